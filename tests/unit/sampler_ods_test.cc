// The opportunistic policy ("ods"): exactly-once under random schedules with a
// random, changing cache; the per-epoch substitution budget is never exceeded
// and is reached when the cache holds only a few items; no substitution (and
// dsa's very decisions) with everything, nothing, or no budget; and fewer
// misses than dsa in front of a real cache. Uniformity with
// everything or nothing cached is tested by the uniformity harness
// (sampler_uniformity_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "galley/cache/replay_cache.h"
#include "galley/sampler/sampling_policy.h"
#include "tests/unit/sampler_schedule.h"
#include "tests/unit/sampler_workloads.h"

namespace galley {
namespace {

std::unique_ptr<SamplingPolicy> MakeOds(uint64_t seed, CachedFn is_cached) {
  SamplerOptions options;
  options.policy = "ods";
  options.seed = seed;
  options.is_cached = std::move(is_cached);
  auto policy = MakeSamplingPolicy(options);
  EXPECT_TRUE(policy.ok()) << policy.status().ToString();
  return std::move(policy).value();
}

uint64_t Budget(double fraction, size_t items) {
  return static_cast<uint64_t>(std::floor(fraction * static_cast<double>(items)));
}

// One random schedule (arrivals, departures, new epochs, masks) with random
// substitution fractions and a cache whose content changes every step.
void RunSchedule(uint64_t seed) {
  RandomSchedule schedule(seed);
  const ItemId universe = schedule.universe();
  std::vector<char> cached(universe, 0);
  auto policy = MakeOds(seed, [&](ItemId item) { return item < cached.size() && cached[item]; });
  ScheduleHooks hooks;
  hooks.before_step = [&](std::mt19937_64& random) {
    // The cache changes under the sampler: a random part of it is replaced.
    const uint64_t density = random() % 4;  // 0: empty ... 3: mostly cached
    for (ItemId item = 0; item < universe; ++item) {
      if (random() % 2 == 0) cached[item] = random() % 4 < density;
    }
  };
  hooks.epoch_options = [](std::mt19937_64& random) {
    const double fraction = static_cast<double>(random() % 5) / 4.0;  // 0, 1/4, ..., 1
    return JobSamplingOptions{fraction};
  };
  hooks.check_step = [&](const ModelJobs& jobs) {
    for (const auto& [job, model] : jobs) {
      ASSERT_EQ(policy->Substitutions(job).budget,
                Budget(model.options.substitution_fraction, model.subset_size));
    }
  };
  schedule.Run(*policy, hooks);
}

TEST(OdsSamplerTest, ExactlyOnceWithAChangingCache) { ForEachScheduleSeed(2000, RunSchedule); }

TEST(OdsSamplerTest, RejectsAFractionOutsideZeroToOne) {
  auto policy = MakeOds(1, [](ItemId) { return false; });
  const std::vector<ItemId> items = {1, 2, 3};
  EXPECT_EQ(policy->AddJob(1, items, {-0.1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(policy->AddJob(1, items, {1.5}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(policy->AddJob(1, items, {std::nan("")}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(policy->Remaining(1), 0u);  // nothing registered
  EXPECT_TRUE(policy->AddJob(1, items, {1.0}).ok());
  EXPECT_EQ(policy->Substitutions(1).budget, 3u);
}

// Runs every job's epoch to its end, all ready every round, and returns each
// job's substitution count at the end of its epoch.
std::vector<uint64_t> SubstitutionsAtEpochEnd(SamplingPolicy& policy,
                                              const std::vector<std::vector<ItemId>>& subsets,
                                              double fraction) {
  for (size_t j = 0; j < subsets.size(); ++j) {
    EXPECT_TRUE(policy.AddJob(static_cast<JobId>(j), subsets[j], {fraction}).ok());
  }
  Round round;
  while (policy.Next([](JobId) { return true; }, &round)) {
    for (size_t j = 0; j < subsets.size(); ++j) {
      const SubstitutionStats stats = policy.Substitutions(static_cast<JobId>(j));
      EXPECT_LE(stats.substitutions, stats.budget);
    }
  }
  std::vector<uint64_t> counts;
  for (size_t j = 0; j < subsets.size(); ++j) {
    counts.push_back(policy.Substitutions(static_cast<JobId>(j)).substitutions);
  }
  return counts;
}

// When only a few items are cached, almost every draw misses, so every job
// spends its whole budget — and not one substitution more. Covers the exact
// scan (small sets) and rejection sampling (sets above kScanLimit).
TEST(OdsSamplerTest, SpendsExactlyTheBudgetWhenFewItemsAreCached) {
  for (ItemId universe : {ItemId{300}, ItemId{4000}}) {
    SCOPED_TRACE(universe);
    std::mt19937_64 random(universe);
    // Three jobs, each on a random 3/4 of the universe; 8% of the universe is
    // cached, chosen at random.
    const std::vector<std::vector<ItemId>> subsets =
        RandomSubsets(random, 3, universe, universe * 3 / 4);
    std::vector<char> cached(universe, 0);
    for (ItemId item = 0; item < universe; ++item) cached[item] = random() % 100 < 8;
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      auto policy = MakeOds(seed, [&](ItemId item) { return cached[item] != 0; });
      const double fraction = 0.02;
      const std::vector<uint64_t> counts = SubstitutionsAtEpochEnd(*policy, subsets, fraction);
      for (size_t j = 0; j < subsets.size(); ++j) {
        EXPECT_EQ(counts[j], Budget(fraction, subsets[j].size())) << "job " << j;
      }
    }
  }
}

// Collects the order in which each job receives its items during one epoch.
std::vector<std::vector<ItemId>> Orders(SamplingPolicy& policy,
                                        const std::vector<std::vector<ItemId>>& subsets,
                                        double fraction, uint64_t mask_seed) {
  for (size_t j = 0; j < subsets.size(); ++j) {
    EXPECT_TRUE(policy.AddJob(static_cast<JobId>(j), subsets[j], {fraction}).ok());
  }
  std::mt19937_64 masks(mask_seed);
  std::vector<std::vector<ItemId>> orders(subsets.size());
  Round round;
  bool any = true;
  while (any) {
    std::vector<bool> ready(subsets.size());
    for (size_t j = 0; j < subsets.size(); ++j) ready[j] = masks() % 3 != 0;
    ready[masks() % subsets.size()] = true;  // someone is always ready
    any = false;
    for (size_t j = 0; j < subsets.size(); ++j) any |= policy.Remaining(static_cast<JobId>(j)) > 0;
    if (!any) break;
    policy.Next([&](JobId job) { return static_cast<bool>(ready[job]); }, &round);
    for (const Delivery& d : round.deliveries) {
      for (JobId job : d.receivers) orders[job].push_back(d.item);
    }
  }
  return orders;
}

std::vector<std::vector<ItemId>> OverlappingSubsets(uint64_t seed) {
  std::mt19937_64 random(seed);
  return RandomSubsets(random, 4, 400, 300);
}

// Everything cached (no draw ever misses), no predicate, or a zero budget:
// ods never substitutes and makes dsa's very decisions for the same seed.
TEST(OdsSamplerTest, DecidesAsDsaWhenItHasNothingToSubstitute) {
  const auto subsets = OverlappingSubsets(7);
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    auto dsa = std::move(MakeSamplingPolicy({"dsa", seed})).value();
    const auto expected = Orders(*dsa, subsets, 0.1, seed);
    struct Case {
      const char* name;
      CachedFn is_cached;
      double fraction;
    };
    const Case cases[] = {{"everything cached", [](ItemId) { return true; }, 0.5},
                          {"no cache", nullptr, 0.5},
                          {"zero budget", [](ItemId item) { return item % 2 == 0; }, 0.0}};
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      auto ods = MakeOds(seed, c.is_cached);
      EXPECT_EQ(Orders(*ods, subsets, c.fraction, seed), expected);
      for (JobId j = 0; j < subsets.size(); ++j) {
        EXPECT_EQ(ods->Substitutions(j).substitutions, 0u);
      }
    }
  }
}

// Nothing cached: every search fails, so there is no substitution, and
// exactly-once still holds (uniformity: sampler_uniformity_test.cc).
TEST(OdsSamplerTest, NothingCachedMeansNoSubstitution) {
  const auto subsets = OverlappingSubsets(11);
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    auto ods = MakeOds(seed, [](ItemId) { return false; });
    const auto orders = Orders(*ods, subsets, 1.0, seed);
    for (size_t j = 0; j < subsets.size(); ++j) {
      EXPECT_EQ(ods->Substitutions(static_cast<JobId>(j)).substitutions, 0u);
      std::vector<ItemId> sorted = orders[j];
      std::sort(sorted.begin(), sorted.end());
      std::vector<ItemId> subset = subsets[j];
      std::sort(subset.begin(), subset.end());
      EXPECT_EQ(sorted, subset);
    }
  }
}

// Substitution pays when the cache changes: an item another job just loaded
// and that this job still needs is served now, while it is resident, instead
// of being loaded again after it has been evicted. (With a cache whose content
// never changes it cannot pay: every uncached item must be loaded in the end.)
// Four jobs on random 300-of-400 subsets, two epochs each, all ready every
// round, through the real cache (ReplayCache, refcount eviction, 60 items).
// Per trial the difference of the misses of dsa and ods on the same subsets is
// computed; over kTrials independent trials its mean must be positive by more
// than 5 standard errors (one-sided z-test, about 3e-7).
uint64_t CacheMisses(const std::string& policy_name, uint64_t seed,
                     const std::vector<std::vector<ItemId>>& subsets) {
  auto cache = cache::ReplayCache::Create(60, "refcount").value();
  SamplerOptions options;
  options.policy = policy_name;
  options.seed = seed;
  options.is_cached = [&](ItemId item) { return cache->Contains(cache::MakeKey(0, item)); };
  auto policy = std::move(MakeSamplingPolicy(options)).value();
  auto keys_of = [](const std::vector<ItemId>& items) {
    std::vector<cache::Key> keys;
    for (ItemId item : items) keys.push_back(cache::MakeKey(0, item));
    return keys;
  };
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (size_t j = 0; j < subsets.size(); ++j) {
      EXPECT_TRUE(policy->AddJob(static_cast<JobId>(j), subsets[j], {0.1}).ok());
      cache->AddDemand(keys_of(subsets[j]));
    }
    Round round;
    while (policy->Next([](JobId) { return true; }, &round)) {
      for (const Delivery& d : round.deliveries) {
        cache->Serve(cache::MakeKey(0, d.item), d.receivers.size());
      }
    }
    for (size_t j = 0; j < subsets.size(); ++j) policy->RemoveJob(static_cast<JobId>(j));
  }
  return cache->Stats().loads;
}

TEST(OdsSamplerTest, MissesLessThanDsaWithAChangingCache) {
  constexpr int kTrials = 100;
  double sum = 0;
  double sum_squares = 0;
  uint64_t dsa_misses = 0;
  uint64_t ods_misses = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    const uint64_t seed = 1000 + static_cast<uint64_t>(trial);
    const auto subsets = OverlappingSubsets(seed);
    const uint64_t dsa = CacheMisses("dsa", seed, subsets);
    const uint64_t ods = CacheMisses("ods", seed, subsets);
    const double difference = static_cast<double>(dsa) - static_cast<double>(ods);
    sum += difference;
    sum_squares += difference * difference;
    dsa_misses += dsa;
    ods_misses += ods;
  }
  const double mean = sum / kTrials;
  const double variance = (sum_squares - kTrials * mean * mean) / (kTrials - 1);
  const double standard_error = std::sqrt(variance / kTrials);
  RecordProperty("dsa_misses", std::to_string(dsa_misses));
  RecordProperty("ods_misses", std::to_string(ods_misses));
  EXPECT_GT(mean, 5 * standard_error) << "dsa " << dsa_misses << " ods " << ods_misses;
  std::printf("misses over %d trials: dsa %llu, ods %llu (mean difference %.1f, se %.2f)\n",
              kTrials, static_cast<unsigned long long>(dsa_misses),
              static_cast<unsigned long long>(ods_misses), mean, standard_error);
}

}  // namespace
}  // namespace galley
