// Chi-square tests for the sampler's uniformity guarantee, shared by the unit
// tests and the simulator so both judge orders the same way.
//
// All functions are pure and thread-safe.
#ifndef GALLEY_SERVER_SAMPLER_UNIFORMITY_STATISTICS_H_
#define GALLEY_SERVER_SAMPLER_UNIFORMITY_STATISTICS_H_

#include <cstddef>
#include <cstdint>
#include <span>

namespace galley {

struct ChiSquareResult {
  double statistic = 0;
  double degrees_of_freedom = 0;
  double p_value = 1;  // P(χ²_df >= statistic)
};

// Upper tail of the chi-square distribution.
double ChiSquareUpperTail(double statistic, double degrees_of_freedom);

// Pearson goodness of fit of `observed` counts to `probabilities` (same
// length, summing to 1; cells of probability 0 must be empty and are skipped).
ChiSquareResult GoodnessOfFit(std::span<const uint64_t> observed,
                              std::span<const double> probabilities);

// Item-by-position table of `permutations` independent orders of the same n
// items (counts[item * n + position]). Under uniform permutations the Pearson
// statistic against T/n per cell is distributed as n/(n-1)·χ²_{(n-1)²} —
// every row and column sum is fixed at T, and one permutation matrix has
// covariance (Π⊗Π)/(n-1) with Π the centring projection — so the statistic is
// rescaled by (n-1)/n and tested with (n-1)² degrees of freedom.
ChiSquareResult PositionTableTest(std::span<const uint64_t> counts, size_t n,
                                  uint64_t permutations);

// Pearson test of independence for a rows x cols contingency table (row-major)
// with margins taken from the table; (rows-1)(cols-1) degrees of freedom,
// counting only non-empty rows and columns.
ChiSquareResult IndependenceTest(std::span<const uint64_t> counts, size_t rows, size_t cols);

}  // namespace galley

#endif  // GALLEY_SERVER_SAMPLER_UNIFORMITY_STATISTICS_H_
