// Statistical tests of the uniformity guarantee (docs/sampling.md, opening): for each policy
// that promises it, in mixes with identical, nested and pairwise-different
// subsets, random masking, different speeds and staggered starts, every job's
// epoch must be a uniformly random permutation of its subset.
//
// Two chi-square tests per (job, epoch), over kTrials independent runs:
//  - positions: the item x position table (PositionTableTest), (n-1)² df;
//  - ordered pairs: the first two items, n(n-1) equally likely cells.
// Significance: alpha = 0.001 per scenario, split by Bonferroni over all the
// tests of the scenario, so a correct sampler fails a scenario with
// probability below 0.001 (the seeds are fixed, so the outcome is repeatable).
//
// Sizing: the alternative we must catch is a 5% relative bias — the lowest
// remaining id drawn with weight 1.05 instead of 1 (BiasedSampler below). Its
// exact position and pair distributions give the noncentrality λ of each
// test (λ = T·Σ(p-p0)²/p0); at the strictest per-test level used here,
// 0.001/8, and kTrials = 200,000, the noncentral chi-square gives power
// > 0.9999 for the position test and 0.999 for the pair test with n = 8 items
// (both 1.0000 for n = 6). At 100,000 trials the pair test's power for n = 8
// would be only 0.78, hence 200,000. BiasedSampler is run through the same
// harness and must fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "galley/sampler/sampling_policy.h"
#include "galley/sampler/uniformity_statistics.h"
#include "tests/unit/sampler_workloads.h"

namespace galley {
namespace {

constexpr uint64_t kTrials = 200000;
constexpr double kAlpha = 0.001;

struct JobPlan {
  std::vector<ItemId> subset;
  int start_round = 0;
  double mask_probability = 0;  // chance of being masked in a round it could run
  int period = 1;               // ready only every period-th round (speed 1/period)
  int epochs = 1;
};

struct Scenario {
  std::string name;
  std::vector<JobPlan> jobs;
};

// Counts for one (job, epoch) over all trials.
struct EpochTables {
  size_t job = 0;
  int epoch = 0;
  std::vector<ItemId> subset;       // sorted; an item's row is its index here
  std::vector<uint64_t> positions;  // n x n
  std::vector<uint64_t> pairs;      // n x n, first item x second item
};

using PolicyFactory = std::function<std::unique_ptr<SamplingPolicy>(uint64_t seed)>;

std::vector<EpochTables> Collect(const PolicyFactory& factory, const Scenario& scenario,
                                 uint64_t trials) {
  std::vector<EpochTables> tables;
  std::vector<std::vector<size_t>> table_of(scenario.jobs.size());
  ItemId universe = 0;
  for (size_t j = 0; j < scenario.jobs.size(); ++j) {
    const JobPlan& plan = scenario.jobs[j];
    for (ItemId item : plan.subset) universe = std::max<ItemId>(universe, item + 1);
    for (int epoch = 0; epoch < plan.epochs; ++epoch) {
      EpochTables t;
      t.job = j;
      t.epoch = epoch;
      t.subset = plan.subset;
      std::sort(t.subset.begin(), t.subset.end());
      const size_t n = t.subset.size();
      t.positions.assign(n * n, 0);
      t.pairs.assign(n * n, 0);
      table_of[j].push_back(tables.size());
      tables.push_back(std::move(t));
    }
  }
  std::vector<std::vector<size_t>> row_of(scenario.jobs.size(), std::vector<size_t>(universe));
  for (size_t j = 0; j < scenario.jobs.size(); ++j) {
    const EpochTables& t = tables[table_of[j][0]];
    for (size_t r = 0; r < t.subset.size(); ++r) row_of[j][t.subset[r]] = r;
  }

  const size_t job_count = scenario.jobs.size();
  for (uint64_t trial = 0; trial < trials; ++trial) {
    std::unique_ptr<SamplingPolicy> policy = factory(trial * 7919 + 17);
    std::mt19937_64 masks(trial ^ 0x5eed5eedULL);
    std::bernoulli_distribution coin(0.5);
    std::vector<int> epoch(job_count, -1);  // -1: not started
    std::vector<bool> finished(job_count, false);
    std::vector<std::vector<ItemId>> sequence(job_count);
    std::vector<bool> ready(job_count);
    size_t done = 0;
    Round round;
    for (int r = 0; done < job_count; ++r) {
      for (size_t j = 0; j < job_count; ++j) {
        const JobPlan& plan = scenario.jobs[j];
        if (epoch[j] < 0 && plan.start_round == r) {
          epoch[j] = 0;
          EXPECT_TRUE(policy->AddJob(static_cast<JobId>(j), plan.subset).ok());
        }
        if (epoch[j] >= 0 && !finished[j] && sequence[j].size() == plan.subset.size()) {
          EpochTables& t = tables[table_of[j][static_cast<size_t>(epoch[j])]];
          const size_t n = t.subset.size();
          for (size_t pos = 0; pos < n; ++pos) ++t.positions[row_of[j][sequence[j][pos]] * n + pos];
          if (n >= 2) ++t.pairs[row_of[j][sequence[j][0]] * n + row_of[j][sequence[j][1]]];
          sequence[j].clear();
          policy->RemoveJob(static_cast<JobId>(j));
          if (++epoch[j] == plan.epochs) {
            finished[j] = true;
            ++done;
          } else {
            EXPECT_TRUE(policy->AddJob(static_cast<JobId>(j), plan.subset).ok());
          }
        }
        ready[j] =
            r % plan.period == 0 && std::bernoulli_distribution(1.0 - plan.mask_probability)(masks);
      }
      if (policy->Next([&](JobId job) { return static_cast<bool>(ready[job]); }, &round)) {
        for (const Delivery& d : round.deliveries) {
          for (JobId job : d.receivers) sequence[job].push_back(d.item);
        }
      }
    }
  }
  return tables;
}

// Smallest p-value over the scenario's tests, and the Bonferroni threshold.
struct Verdict {
  double min_p = 1;
  double threshold = 0;
  std::string worst;
};

Verdict Judge(const std::vector<EpochTables>& tables, uint64_t trials) {
  Verdict verdict;
  verdict.threshold = kAlpha / static_cast<double>(2 * tables.size());
  for (const EpochTables& t : tables) {
    const size_t n = t.subset.size();
    const ChiSquareResult positions = PositionTableTest(t.positions, n, trials);
    std::vector<double> pair_probability(n * n, 0);
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = 0; b < n; ++b) {
        if (a != b) pair_probability[a * n + b] = 1.0 / static_cast<double>(n * (n - 1));
      }
    }
    const ChiSquareResult pairs = GoodnessOfFit(t.pairs, pair_probability);
    const std::string where = "job " + std::to_string(t.job) + " epoch " + std::to_string(t.epoch);
    if (positions.p_value < verdict.min_p) {
      verdict.min_p = positions.p_value;
      verdict.worst = where + " positions";
    }
    if (pairs.p_value < verdict.min_p) {
      verdict.min_p = pairs.p_value;
      verdict.worst = where + " first pairs";
    }
  }
  return verdict;
}

// A ∩ B, A ∩ C and B ∩ C all different and none nested: atoms
// AB {0,1,2}, AC {3,4}, BC {5}, ABC {6}, A {7,8}, B {9}, C {10,11}.
const std::vector<ItemId> kPairA = {0, 1, 2, 3, 4, 6, 7, 8};
const std::vector<ItemId> kPairB = {0, 1, 2, 5, 6, 9};
const std::vector<ItemId> kPairC = {3, 4, 5, 6, 10, 11};

std::vector<Scenario> Scenarios() {
  return {
      {"identical", {{ItemRange(0, 8)}, {ItemRange(0, 8)}, {ItemRange(0, 8)}}},
      {"nested", {{ItemRange(0, 8)}, {ItemRange(0, 6)}, {ItemRange(0, 4)}}},
      {"pairwise", {{kPairA}, {kPairB}, {kPairC}}},
      // Random masks and a job at half speed on the pairwise mix.
      {"masked_speeds", {{kPairA, 0, 0.3}, {kPairB, 0, 0.5}, {kPairC, 0, 0.0, /*period=*/2}}},
      // Jobs arriving mid-epoch of others, the first running two epochs so its
      // second one starts while the others are mid-way.
      {"staggered",
       {{ItemRange(0, 8), 0, 0.2, 1, /*epochs=*/2},
        {ItemRange(2, 8), 3, 0.2},
        {ItemRange(0, 5), 5, 0.0, 2}}},
  };
}

class UniformityTest
    : public ::testing::TestWithParam<std::tuple<const char*, size_t /*scenario*/>> {};

TEST_P(UniformityTest, EveryEpochIsAUniformPermutation) {
  const std::string policy_name = std::get<0>(GetParam());
  const Scenario scenario = Scenarios()[std::get<1>(GetParam())];
  const PolicyFactory factory = [&](uint64_t seed) {
    return std::move(MakeSamplingPolicy({policy_name, seed})).value();
  };
  const std::vector<EpochTables> tables = Collect(factory, scenario, kTrials);
  const Verdict verdict = Judge(tables, kTrials);
  RecordProperty("min_p", std::to_string(verdict.min_p));
  EXPECT_GT(verdict.min_p, verdict.threshold)
      << policy_name << " on " << scenario.name << ": " << verdict.worst;
}

INSTANTIATE_TEST_SUITE_P(Policies, UniformityTest,
                         ::testing::Combine(::testing::Values("dsa", "dsa-chain", "independent"),
                                            ::testing::Range<size_t>(0, 5)),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name + "_" + Scenarios()[std::get<1>(info.param)].name;
                         });

// ods with a cache holding everything (no draw misses) or nothing (no
// replacement exists) must not substitute, so it keeps dsa's guarantee. The
// wrapper checks every epoch's substitution count as the job leaves it.
class NoSubstitutionCheck final : public SamplingPolicy {
 public:
  explicit NoSubstitutionCheck(std::unique_ptr<SamplingPolicy> inner) : inner_(std::move(inner)) {}
  using SamplingPolicy::AddJob;
  Status AddJob(JobId job, std::span<const ItemId> items,
                const JobSamplingOptions& options) override {
    return inner_->AddJob(job, items, options);
  }
  void RemoveJob(JobId job) override {
    EXPECT_EQ(inner_->Substitutions(job).substitutions, 0u);
    inner_->RemoveJob(job);
  }
  size_t Remaining(JobId job) const override { return inner_->Remaining(job); }
  bool Next(const ReadyFn& ready, Round* round) override { return inner_->Next(ready, round); }
  std::string_view name() const override { return inner_->name(); }

 private:
  std::unique_ptr<SamplingPolicy> inner_;
};

class OdsUniformityTest : public ::testing::TestWithParam<std::tuple<bool /*all cached*/, size_t>> {
};

TEST_P(OdsUniformityTest, EveryEpochIsAUniformPermutation) {
  const bool all_cached = std::get<0>(GetParam());
  const Scenario scenario = Scenarios()[std::get<1>(GetParam())];
  const PolicyFactory factory = [&](uint64_t seed) {
    SamplerOptions options;
    options.policy = "ods";
    options.seed = seed;
    options.is_cached = [all_cached](ItemId) { return all_cached; };
    return std::make_unique<NoSubstitutionCheck>(std::move(MakeSamplingPolicy(options)).value());
  };
  const Verdict verdict = Judge(Collect(factory, scenario, kTrials), kTrials);
  RecordProperty("min_p", std::to_string(verdict.min_p));
  EXPECT_GT(verdict.min_p, verdict.threshold) << scenario.name << ": " << verdict.worst;
}

// The mixes with masking, speeds and staggered arrivals, where substitution
// would have the most room to bend an order.
INSTANTIATE_TEST_SUITE_P(Ods, OdsUniformityTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Values<size_t>(3, 4)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "all_cached_"
                                                                      : "none_cached_") +
                                  Scenarios()[std::get<1>(info.param)].name;
                         });

// The daemon gives every job its own stream per epoch (JobSamplingOptions::
// seed) for the draws it makes alone. The hardest case for the guarantee is
// every job getting the *same* seed (a sweep left at seed=0): the wrapper
// hands all jobs of a trial the same seed for the same epoch number.
class EqualJobSeeds final : public SamplingPolicy {
 public:
  EqualJobSeeds(std::unique_ptr<SamplingPolicy> inner, uint64_t trial_seed)
      : inner_(std::move(inner)), trial_seed_(trial_seed) {}
  using SamplingPolicy::AddJob;
  Status AddJob(JobId job, std::span<const ItemId> items,
                const JobSamplingOptions& options) override {
    JobSamplingOptions with_seed = options;
    with_seed.seed = trial_seed_ * 0x9e3779b97f4a7c15ULL + epochs_[job]++;
    return inner_->AddJob(job, items, with_seed);
  }
  void RemoveJob(JobId job) override { inner_->RemoveJob(job); }
  size_t Remaining(JobId job) const override { return inner_->Remaining(job); }
  bool Next(const ReadyFn& ready, Round* round) override { return inner_->Next(ready, round); }
  std::string_view name() const override { return inner_->name(); }

 private:
  std::unique_ptr<SamplingPolicy> inner_;
  const uint64_t trial_seed_;
  std::map<JobId, uint64_t> epochs_;
};

class JobSeedUniformityTest
    : public ::testing::TestWithParam<std::tuple<const char*, size_t /*scenario*/>> {};

TEST_P(JobSeedUniformityTest, EveryEpochIsAUniformPermutation) {
  const std::string policy_name = std::get<0>(GetParam());
  const Scenario scenario = Scenarios()[std::get<1>(GetParam())];
  const PolicyFactory factory = [&](uint64_t seed) {
    return std::make_unique<EqualJobSeeds>(
        std::move(MakeSamplingPolicy({policy_name, seed})).value(), seed);
  };
  const Verdict verdict = Judge(Collect(factory, scenario, kTrials), kTrials);
  RecordProperty("min_p", std::to_string(verdict.min_p));
  EXPECT_GT(verdict.min_p, verdict.threshold)
      << policy_name << " on " << scenario.name << ": " << verdict.worst;
}

// The coupled mixes (overlaps, masks, speeds, arrivals).
INSTANTIATE_TEST_SUITE_P(JobSeeds, JobSeedUniformityTest,
                         ::testing::Combine(::testing::Values("dsa", "dsa-chain", "independent"),
                                            ::testing::Values<size_t>(1, 2, 3, 4)),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name + "_" + Scenarios()[std::get<1>(info.param)].name;
                         });

// Each job draws alone, giving the lowest remaining id weight 1.05 against 1
// for every other item: a 5% relative bias.
class BiasedSampler final : public SamplingPolicy {
 public:
  explicit BiasedSampler(uint64_t seed) : random_(seed) {}
  using SamplingPolicy::AddJob;
  Status AddJob(JobId job, std::span<const ItemId> items, const JobSamplingOptions&) override {
    remaining_[job] = std::set<ItemId>(items.begin(), items.end());
    return Status::Ok();
  }
  void RemoveJob(JobId job) override { remaining_.erase(job); }
  size_t Remaining(JobId job) const override {
    auto it = remaining_.find(job);
    return it == remaining_.end() ? 0 : it->second.size();
  }
  bool Next(const ReadyFn& ready, Round* round) override {
    round->deliveries.clear();
    for (auto& [job, items] : remaining_) {
      if (items.empty() || !ready(job)) continue;
      const double others = static_cast<double>(items.size() - 1);
      double u = std::uniform_real_distribution<double>(0, others + 1.05)(random_);
      auto it = items.begin();
      if (u >= 1.05)
        it = std::next(
            it, 1 + std::min<long>(static_cast<long>(u - 1.05), static_cast<long>(others) - 1));
      round->deliveries.push_back({*it, {job}});
      items.erase(it);
    }
    return !round->deliveries.empty();
  }
  std::string_view name() const override { return "biased"; }

 private:
  std::mt19937_64 random_;
  std::map<JobId, std::set<ItemId>> remaining_;
};

TEST(UniformityHarnessTest, DetectsAFivePercentBias) {
  const PolicyFactory factory = [](uint64_t seed) { return std::make_unique<BiasedSampler>(seed); };
  for (size_t s : {size_t{0}, size_t{3}}) {
    const Scenario scenario = Scenarios()[s];
    const Verdict verdict = Judge(Collect(factory, scenario, kTrials), kTrials);
    EXPECT_LT(verdict.min_p, verdict.threshold) << scenario.name;
  }
}

}  // namespace
}  // namespace galley
