// How much the policies share: identical subsets started together share every
// item; nested subsets share exactly as the coupling's theory predicts; and on
// overlaps that are not nested the coupling tree ("dsa") loads fewer items than
// Joader's chain ("dsa-chain").
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "galley/sampler/sampling_policy.h"
#include "tests/unit/sampler_workloads.h"

namespace galley {
namespace {

struct Totals {
  uint64_t requests = 0;
  uint64_t loads = 0;
};

// Runs one epoch of every job, all ready every round.
Totals RunOneEpoch(const std::string& policy_name, uint64_t seed,
                   const std::vector<std::vector<ItemId>>& subsets) {
  auto policy = std::move(MakeSamplingPolicy({policy_name, seed})).value();
  for (size_t j = 0; j < subsets.size(); ++j) {
    EXPECT_TRUE(policy->AddJob(static_cast<JobId>(j), subsets[j]).ok());
  }
  Totals totals;
  Round round;
  while (policy->Next([](JobId) { return true; }, &round)) {
    totals.loads += round.deliveries.size();
    totals.requests += round.requests();
  }
  return totals;
}

TEST(SharingTest, IdenticalSubsetsStartedTogetherShareEveryItem) {
  const std::vector<std::vector<ItemId>> subsets(4, ItemRange(0, 1000));
  for (const char* policy : {"dsa", "dsa-chain", "lockstep"}) {
    const Totals totals = RunOneEpoch(policy, 3, subsets);
    EXPECT_EQ(totals.requests, 4000u) << policy;
    EXPECT_EQ(totals.loads, 1000u) << policy;
  }
}

// Nested subsets l1 < l2 < ... all ready: in every round job k takes job
// k-1's item with probability l_{k-1}/l_k (the pairwise optimum), with fresh
// coins each round, and otherwise an item outside S_{k-1}; remaining counts
// fall by one per round, so the number of loads is the largest size plus a
// sum of independent Bernoulli variables with known means.
TEST(SharingTest, NestedSubsetsShareAsTheoryPredicts) {
  const std::vector<ItemId> sizes = {4000, 6000, 8000, 10000};
  double mean = sizes.back();
  double variance = 0;
  for (size_t k = 1; k < sizes.size(); ++k) {
    for (ItemId t = 0; t < sizes[k - 1]; ++t) {
      const double miss = 1.0 - static_cast<double>(sizes[k - 1] - t) / (sizes[k] - t);
      mean += miss;
      variance += miss * (1 - miss);
    }
  }
  std::vector<std::vector<ItemId>> subsets;
  for (ItemId size : sizes) subsets.push_back(ItemRange(0, size));
  const Totals dsa = RunOneEpoch("dsa", 11, subsets);
  EXPECT_EQ(dsa.requests, 28000u);
  // 5 standard deviations: a correct sampler fails this with p < 6e-7.
  EXPECT_NEAR(static_cast<double>(dsa.loads), mean, 5 * std::sqrt(variance))
      << "expected " << mean << " loads";
  // The chain couples job k to k-1 only while all earlier jobs agreed, so it
  // loads more; its excess (hundreds) dwarfs sigma (about 61).
  const Totals chain = RunOneEpoch("dsa-chain", 11, subsets);
  EXPECT_GT(static_cast<double>(chain.loads), mean + 5 * std::sqrt(variance));
}

// Mean and standard error of loads over `runs` seeds.
std::pair<double, double> MeanLoads(const std::string& policy,
                                    const std::vector<std::vector<ItemId>>& subsets, int runs) {
  std::vector<double> loads;
  for (int run = 0; run < runs; ++run) {
    loads.push_back(static_cast<double>(RunOneEpoch(policy, 100 + run, subsets).loads));
  }
  const double mean = std::accumulate(loads.begin(), loads.end(), 0.0) / runs;
  double squares = 0;
  for (double x : loads) squares += (x - mean) * (x - mean);
  return {mean, std::sqrt(squares / (runs - 1) / runs)};
}

void ExpectTreeBeatsChain(const std::vector<std::vector<ItemId>>& subsets) {
  const auto [tree, tree_error] = MeanLoads("dsa", subsets, 5);
  const auto [chain, chain_error] = MeanLoads("dsa-chain", subsets, 5);
  const double error = std::hypot(tree_error, chain_error);
  EXPECT_LT(tree + 5 * error, chain) << "dsa " << tree << " vs dsa-chain " << chain;
}

TEST(SharingTest, PairwiseDifferentOverlapsShareMoreThanTheChain) {
  ExpectTreeBeatsChain(PairwiseOverlapSubsets());
}

TEST(SharingTest, RandomSubsetsShareMoreThanTheChain) {
  // Four jobs, each 10,000 ids drawn at random from [0, 13333).
  std::mt19937_64 random(5);
  ExpectTreeBeatsChain(RandomSubsets(random, 4, 13333, 10000));
}

}  // namespace
}  // namespace galley
