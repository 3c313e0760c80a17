#include "galley/sampler/uniformity_statistics.h"

#include <boost/math/special_functions/gamma.hpp>
#include <vector>

namespace galley {

double ChiSquareUpperTail(double statistic, double degrees_of_freedom) {
  if (degrees_of_freedom <= 0) return 1.0;
  if (statistic <= 0) return 1.0;
  return boost::math::gamma_q(degrees_of_freedom / 2.0, statistic / 2.0);
}

ChiSquareResult GoodnessOfFit(std::span<const uint64_t> observed,
                              std::span<const double> probabilities) {
  uint64_t total = 0;
  for (uint64_t count : observed) total += count;
  ChiSquareResult result;
  size_t cells = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    if (probabilities[i] <= 0) continue;
    const double expected = probabilities[i] * static_cast<double>(total);
    const double difference = static_cast<double>(observed[i]) - expected;
    result.statistic += difference * difference / expected;
    ++cells;
  }
  result.degrees_of_freedom = cells > 0 ? static_cast<double>(cells - 1) : 0;
  result.p_value = ChiSquareUpperTail(result.statistic, result.degrees_of_freedom);
  return result;
}

ChiSquareResult PositionTableTest(std::span<const uint64_t> counts, size_t n,
                                  uint64_t permutations) {
  ChiSquareResult result;
  if (n < 2 || permutations == 0) return result;
  const double expected = static_cast<double>(permutations) / static_cast<double>(n);
  double pearson = 0;
  for (uint64_t count : counts) {
    const double difference = static_cast<double>(count) - expected;
    pearson += difference * difference / expected;
  }
  result.statistic = pearson * static_cast<double>(n - 1) / static_cast<double>(n);
  result.degrees_of_freedom = static_cast<double>((n - 1) * (n - 1));
  result.p_value = ChiSquareUpperTail(result.statistic, result.degrees_of_freedom);
  return result;
}

ChiSquareResult IndependenceTest(std::span<const uint64_t> counts, size_t rows, size_t cols) {
  std::vector<double> row_sum(rows, 0), col_sum(cols, 0);
  double total = 0;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      const double count = static_cast<double>(counts[r * cols + c]);
      row_sum[r] += count;
      col_sum[c] += count;
      total += count;
    }
  }
  ChiSquareResult result;
  if (total == 0) return result;
  size_t used_rows = 0, used_cols = 0;
  for (double sum : row_sum) used_rows += sum > 0;
  for (double sum : col_sum) used_cols += sum > 0;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      const double expected = row_sum[r] * col_sum[c] / total;
      if (expected <= 0) continue;
      const double difference = static_cast<double>(counts[r * cols + c]) - expected;
      result.statistic += difference * difference / expected;
    }
  }
  if (used_rows < 2 || used_cols < 2) return result;
  result.degrees_of_freedom = static_cast<double>((used_rows - 1) * (used_cols - 1));
  result.p_value = ChiSquareUpperTail(result.statistic, result.degrees_of_freedom);
  return result;
}

}  // namespace galley
