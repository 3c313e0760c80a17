// galley_sampler_sim: replays job mixes against every sampling policy, using
// the real galley_sampler code, and prints per mix and policy the requests
// (item deliveries), loads (distinct items prepared), loads per request, cache
// misses, and a uniformity statistic. Deterministic: a seed fixes every choice.
//
//   galley_sampler_sim [--seed N] [--epochs N] [--csv FILE]
//
// Uniformity: for each (job, epoch) the subset is cut into 10 id-rank bins and
// the epoch into 10 position bins; under a uniform permutation the 10 x 10
// table has no association, so its chi-square test of independence (81 df)
// gives a p-value. The table reports the smallest p over all (job, epoch)
// multiplied by their number (Bonferroni), capped at 1: values far below 0.001
// would mean the policy is not uniform.
//
// Cache: the job mixes run without a cache (every load is a miss). A second
// table replays the cache workload — 4 jobs each taking 2,000 ids drawn at
// random from [0, 2667), all ready every round — through the real sampler
// policies in front of the real cache (galley::cache::ReplayCache: Tier,
// DemandTracker, LRU or refcount eviction) holding 10% or 50% of the union.
// Demand follows the jobs: a job's subset is added when it starts an epoch
// and each item's demand is consumed as it is delivered. The "ods" policy asks
// the same cache whether an item is resident. For each row: requests, loads
// (distinct items per round), misses, hit rate, the share of draws ods
// substituted, the uniformity p above, and a bias test aimed at ods:
//
// Cached-draw bias: before every round each ready job k has c_k of its ℓ_k
// remaining items cached; a uniform draw hits one with probability
// p = c_k/ℓ_k. Summed over a job's draws, (observed − Σp)/sqrt(Σp(1−p)) is
// asymptotically standard normal for any uniform sampler (a martingale CLT),
// whatever the cache does. The table shows observed vs expected cached draws
// over all jobs and the two-sided p (chi-square, 1 df) of the worst job times
// the number of jobs, capped at 1.
//
//   galley_sampler_sim [--seed N] [--epochs N] [--cache-epochs N]
//                      [--ods-fraction F] [--csv FILE]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "galley/cache/replay_cache.h"
#include "galley/sampler/sampling_policy.h"
#include "galley/sampler/uniformity_statistics.h"
#include "tests/unit/sampler_workloads.h"

namespace galley {
namespace {

// Whether a load finds its item prepared; told about every load so it can
// admit or evict.
class CacheModel {
 public:
  virtual ~CacheModel() = default;
  virtual std::string_view name() const = 0;
  // Returns true on a hit. `demand` is how many jobs take the item now.
  virtual bool Load(ItemId item, size_t demand) = 0;
};

class NoCache final : public CacheModel {
 public:
  std::string_view name() const override { return "none"; }
  bool Load(ItemId, size_t) override { return false; }
};

struct SimJob {
  std::vector<ItemId> subset;
  int start_round = 0;
  int period = 1;  // ready every period-th round: speed 1/period
};

struct Mix {
  std::string name;
  std::vector<SimJob> jobs;
  bool identical_subsets = false;  // lockstep runs only here
};

struct Outcome {
  uint64_t requests = 0;
  uint64_t loads = 0;
  uint64_t misses = 0;
  uint64_t rounds = 0;
  double uniformity_p = 1;
};

constexpr size_t kBins = 10;

std::vector<ItemId> Prefix(const std::vector<ItemId>& order, ItemId size) {
  return {order.begin(), order.begin() + size};
}

std::vector<Mix> Mixes(uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<Mix> mixes;
  const std::vector<ItemId> base = RandomSubset(random, 10000, 10000);

  mixes.push_back({"identical-4", {}, true});
  for (int j = 0; j < 4; ++j) mixes.back().jobs.push_back({base});

  mixes.push_back({"nested-10k/8k/6k/4k", {}, false});
  for (ItemId size : {10000, 8000, 6000, 4000}) mixes.back().jobs.push_back({Prefix(base, size)});

  mixes.push_back({"random-10k-of-13333", {}, false});
  for (int j = 0; j < 4; ++j) mixes.back().jobs.push_back({RandomSubset(random, 13333, 10000)});

  mixes.push_back({"staggered-4", {}, true});
  for (int j = 0; j < 4; ++j) mixes.back().jobs.push_back({base, 2500 * j});

  mixes.push_back({"half-speed", {}, true});
  for (int j = 0; j < 4; ++j) mixes.back().jobs.push_back({base, 0, j == 3 ? 2 : 1});

  mixes.push_back({"pairwise-3", {}, false});
  for (std::vector<ItemId>& subset : PairwiseOverlapSubsets()) {
    mixes.back().jobs.push_back({std::move(subset)});
  }

  // A sweep of 16 jobs on one dataset, arriving every 500 rounds.
  mixes.push_back({"sweep-16", {}, true});
  for (int j = 0; j < 16; ++j) mixes.back().jobs.push_back({base, 500 * j});

  // 64 jobs over four nested subsets, staggered, a quarter at half speed.
  mixes.push_back({"nested-64", {}, false});
  for (int j = 0; j < 64; ++j) {
    const ItemId size = std::vector<ItemId>{10000, 8000, 6000, 4000}[j % 4];
    mixes.back().jobs.push_back({Prefix(base, size), 100 * j, j % 4 == 1 ? 2 : 1});
  }
  return mixes;
}

Outcome Simulate(const std::string& policy_name, const Mix& mix, uint64_t seed, int epochs,
                 CacheModel& cache) {
  auto policy = std::move(MakeSamplingPolicy({policy_name, seed})).value();
  const size_t n_jobs = mix.jobs.size();
  // Rank of each item in each job's sorted subset, for the id bins.
  std::vector<std::vector<uint32_t>> rank(n_jobs);
  for (size_t j = 0; j < n_jobs; ++j) {
    std::vector<ItemId> sorted = mix.jobs[j].subset;
    std::sort(sorted.begin(), sorted.end());
    rank[j].assign(sorted.empty() ? 0 : sorted.back() + 1, 0);
    for (size_t r = 0; r < sorted.size(); ++r) rank[j][sorted[r]] = static_cast<uint32_t>(r);
  }
  std::vector<int> epoch(n_jobs, -1);
  std::vector<std::vector<ItemId>> sequence(n_jobs);
  std::vector<char> ready(n_jobs, 0);
  size_t finished = 0;
  double min_p = 1;
  size_t tests = 0;
  Outcome outcome;
  Round round;
  for (int r = 0; finished < n_jobs; ++r) {
    for (size_t j = 0; j < n_jobs; ++j) {
      const SimJob& job = mix.jobs[j];
      if (epoch[j] < 0 && job.start_round == r) {
        epoch[j] = 0;
        (void)policy->AddJob(static_cast<JobId>(j), job.subset);
      }
      if (epoch[j] >= 0 && epoch[j] < epochs && sequence[j].size() == job.subset.size()) {
        const size_t n = job.subset.size();
        std::vector<uint64_t> table(kBins * kBins, 0);
        for (size_t pos = 0; pos < n; ++pos) {
          ++table[(rank[j][sequence[j][pos]] * kBins / n) * kBins + pos * kBins / n];
        }
        min_p = std::min(min_p, IndependenceTest(table, kBins, kBins).p_value);
        ++tests;
        sequence[j].clear();
        policy->RemoveJob(static_cast<JobId>(j));
        if (++epoch[j] == epochs) {
          ++finished;
        } else {
          (void)policy->AddJob(static_cast<JobId>(j), job.subset);
        }
      }
      ready[j] = r % job.period == 0;
    }
    ++outcome.rounds;
    if (!policy->Next([&](JobId job) { return ready[job] != 0; }, &round)) continue;
    for (const Delivery& d : round.deliveries) {
      ++outcome.loads;
      outcome.requests += d.receivers.size();
      if (!cache.Load(d.item, d.receivers.size())) ++outcome.misses;
      for (JobId job : d.receivers) sequence[job].push_back(d.item);
    }
  }
  outcome.uniformity_p = std::min(1.0, min_p * static_cast<double>(std::max<size_t>(tests, 1)));
  return outcome;
}

// The uniformity statistic of one job epoch: 10 x 10 id-rank x position-bin
// independence test.
double RankPositionP(const std::vector<ItemId>& sequence, const std::vector<uint32_t>& rank) {
  const size_t n = sequence.size();
  std::vector<uint64_t> table(kBins * kBins, 0);
  for (size_t pos = 0; pos < n; ++pos) {
    ++table[(rank[sequence[pos]] * kBins / n) * kBins + pos * kBins / n];
  }
  return IndependenceTest(table, kBins, kBins).p_value;
}

struct CacheOutcome {
  uint64_t requests = 0;
  uint64_t loads = 0;   // distinct items per round
  uint64_t misses = 0;  // loads the cache did not hold
  uint64_t hits = 0;
  uint64_t substitutions = 0;
  double uniformity_p = 1;
  uint64_t cached_draws = 0;         // draws that found their item cached
  double expected_cached_draws = 0;  // what uniform draws would have found
  double bias_p = 1;                 // cached-draw test, Bonferroni over jobs
};

// One run of the cache workload: every job starts at round 0 and is ready in
// every round, for `epochs` epochs.
CacheOutcome SimulateWithCache(const std::string& policy_name, const std::string& eviction,
                               size_t capacity_items,
                               const std::vector<std::vector<ItemId>>& subsets, int epochs,
                               uint64_t seed, double ods_fraction) {
  auto cache = cache::ReplayCache::Create(capacity_items, eviction).value();
  auto key = [](ItemId item) { return cache::MakeKey(0, item); };
  // The cache's content as the sampler saw it before the round; refreshed
  // after every round (the cache reports no evictions, so residents are
  // re-checked).
  ItemId universe = 0;
  for (const auto& subset : subsets) {
    for (ItemId item : subset) universe = std::max<ItemId>(universe, item + 1);
  }
  std::vector<char> resident(universe, 0);
  std::vector<ItemId> resident_items;

  SamplerOptions options;
  options.policy = policy_name;
  options.seed = seed;
  options.is_cached = [&](ItemId item) { return cache->Contains(key(item)); };
  auto policy = std::move(MakeSamplingPolicy(options)).value();

  const size_t n_jobs = subsets.size();
  std::vector<std::vector<uint32_t>> rank(n_jobs);
  std::vector<std::vector<char>> remaining(n_jobs, std::vector<char>(universe, 0));
  std::vector<size_t> remaining_count(n_jobs, 0);
  std::vector<size_t> cached_remaining(n_jobs, 0);
  std::vector<std::vector<ItemId>> sequence(n_jobs);
  std::vector<double> observed(n_jobs, 0), expected(n_jobs, 0), variance(n_jobs, 0);
  for (size_t j = 0; j < n_jobs; ++j) {
    std::vector<ItemId> sorted = subsets[j];
    std::sort(sorted.begin(), sorted.end());
    rank[j].assign(universe, 0);
    for (size_t r = 0; r < sorted.size(); ++r) rank[j][sorted[r]] = static_cast<uint32_t>(r);
  }
  auto set_resident = [&](ItemId item, bool now) {
    if ((resident[item] != 0) == now) return;
    resident[item] = now;
    for (size_t j = 0; j < n_jobs; ++j) {
      if (!remaining[j][item]) continue;
      if (now) {
        ++cached_remaining[j];
      } else {
        --cached_remaining[j];
      }
    }
  };

  CacheOutcome outcome;
  double min_p = 1;
  size_t tests = 0;
  Round round;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (size_t j = 0; j < n_jobs; ++j) {
      const JobId job = static_cast<JobId>(j);
      (void)policy->AddJob(job, subsets[j], {ods_fraction});
      std::vector<cache::Key> keys;
      for (ItemId item : subsets[j]) {
        keys.push_back(key(item));
        remaining[j][item] = 1;
        cached_remaining[j] += resident[item];
      }
      remaining_count[j] = subsets[j].size();
      cache->AddDemand(keys);
    }
    while (true) {
      // Every job is ready; what a uniform draw of each would find cached.
      for (size_t j = 0; j < n_jobs; ++j) {
        if (remaining_count[j] == 0) continue;
        const double p =
            static_cast<double>(cached_remaining[j]) / static_cast<double>(remaining_count[j]);
        expected[j] += p;
        variance[j] += p * (1 - p);
      }
      if (!policy->Next([](JobId) { return true; }, &round)) break;
      for (const Delivery& d : round.deliveries) {
        ++outcome.loads;
        outcome.requests += d.receivers.size();
        for (JobId job : d.receivers) {
          sequence[job].push_back(d.item);
          remaining[job][d.item] = 0;
          --remaining_count[job];
          if (resident[d.item]) {
            --cached_remaining[job];
            observed[job] += 1;
          }
        }
        if (cache->Serve(key(d.item), d.receivers.size())) {
          ++outcome.hits;
        } else {
          ++outcome.misses;
          if (cache->Contains(key(d.item)) && !resident[d.item]) {
            set_resident(d.item, true);
            resident_items.push_back(d.item);
          }
        }
      }
      std::erase_if(resident_items, [&](ItemId item) {
        if (cache->Contains(key(item))) return false;
        set_resident(item, false);
        return true;
      });
    }
    for (size_t j = 0; j < n_jobs; ++j) {
      const JobId job = static_cast<JobId>(j);
      outcome.substitutions += policy->Substitutions(job).substitutions;
      policy->RemoveJob(job);
      min_p = std::min(min_p, RankPositionP(sequence[j], rank[j]));
      ++tests;
      sequence[j].clear();
    }
  }
  outcome.uniformity_p = std::min(1.0, min_p * static_cast<double>(tests));
  double min_bias_p = 1;
  for (size_t j = 0; j < n_jobs; ++j) {
    outcome.cached_draws += static_cast<uint64_t>(observed[j]);
    outcome.expected_cached_draws += expected[j];
    if (variance[j] > 0) {
      const double z = (observed[j] - expected[j]) / std::sqrt(variance[j]);
      min_bias_p = std::min(min_bias_p, ChiSquareUpperTail(z * z, 1));
    }
  }
  outcome.bias_p = std::min(1.0, min_bias_p * static_cast<double>(n_jobs));
  return outcome;
}

// The cache workload's table: sampling x eviction x cache size.
void RunCacheTable(uint64_t seed, int epochs, double ods_fraction, std::ofstream& csv) {
  constexpr ItemId kUniverse = 2667;
  constexpr ItemId kIdsPerJob = 2000;
  std::mt19937_64 random(seed);
  const std::vector<std::vector<ItemId>> subsets = RandomSubsets(random, 4, kUniverse, kIdsPerJob);
  std::vector<char> in_union(kUniverse, 0);
  for (const auto& subset : subsets) {
    for (ItemId item : subset) in_union[item] = 1;
  }
  const size_t union_size = static_cast<size_t>(std::count(in_union.begin(), in_union.end(), 1));

  std::printf(
      "cache workload: 4 jobs x %u ids from [0, %u), union %zu items, %d epochs, "
      "all ready every round; ods fraction %.2f\n\n",
      kIdsPerJob, kUniverse, union_size, epochs, ods_fraction);
  std::printf("%-12s %-9s %11s %9s %8s %8s %9s %10s %7s %10s %10s %10s %9s\n", "sampling",
              "eviction", "cache", "requests", "loads", "misses", "hit rate", "miss/req", "subst",
              "uniform p", "on cached", "if unif.", "bias p");
  for (int percent : {10, 50}) {
    const size_t capacity = union_size * static_cast<size_t>(percent) / 100;
    for (const char* policy : {"independent", "dsa", "ods"}) {
      for (const char* eviction : {"lru", "refcount"}) {
        const CacheOutcome o =
            SimulateWithCache(policy, eviction, capacity, subsets, epochs, seed, ods_fraction);
        const double requests = static_cast<double>(o.requests);
        const double hit_rate =
            static_cast<double>(o.hits) / static_cast<double>(o.hits + o.misses);
        char cache_label[32];
        std::snprintf(cache_label, sizeof cache_label, "%d%% (%zu)", percent, capacity);
        std::printf(
            "%-12s %-9s %11s %9llu %8llu %8llu %8.2f%% %10.4f %6.2f%% %10.3g %10llu %10.0f %9.3g\n",
            policy, eviction, cache_label, static_cast<unsigned long long>(o.requests),
            static_cast<unsigned long long>(o.loads), static_cast<unsigned long long>(o.misses),
            100 * hit_rate, static_cast<double>(o.misses) / requests,
            100 * static_cast<double>(o.substitutions) / requests, o.uniformity_p,
            static_cast<unsigned long long>(o.cached_draws), o.expected_cached_draws, o.bias_p);
        if (csv.is_open()) {
          csv << "cache-4x2000-of-2667," << policy << ',' << eviction << '-' << percent << "%,4,"
              << o.requests << ',' << o.loads << ',' << static_cast<double>(o.loads) / requests
              << ',' << o.misses << ',' << o.uniformity_p << ',' << o.hits << ',' << o.substitutions
              << ',' << o.cached_draws << ',' << o.expected_cached_draws << ',' << o.bias_p << '\n';
        }
      }
    }
  }
  std::printf("\n");
}

}  // namespace
}  // namespace galley

int main(int argc, char** argv) {
  using namespace galley;
  uint64_t seed = 1;
  int epochs = 2;
  int cache_epochs = 3;
  double ods_fraction = 0.1;
  std::string csv_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--epochs" && i + 1 < argc) {
      epochs = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--cache-epochs" && i + 1 < argc) {
      cache_epochs = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--ods-fraction" && i + 1 < argc) {
      ods_fraction = std::strtod(argv[++i], nullptr);
      if (!(ods_fraction >= 0 && ods_fraction <= 1)) {
        std::fprintf(stderr, "--ods-fraction must lie in [0, 1]\n");
        return 2;
      }
    } else if (arg == "--csv" && i + 1 < argc) {
      csv_path = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: %s [--seed N] [--epochs N] [--cache-epochs N] [--ods-fraction F] "
                   "[--csv FILE]\n",
                   argv[0]);
      return 2;
    }
  }
  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path);
    csv << "mix,policy,cache,jobs,requests,loads,loads_per_request,misses,uniformity_p,"
           "hits,substitutions,cached_draws,expected_cached_draws,bias_p\n";
  }
  std::printf("seed %llu, %d epochs per job, cache model: none\n\n",
              static_cast<unsigned long long>(seed), epochs);
  std::printf("%-22s %-12s %5s %10s %10s %9s %10s %12s\n", "mix", "policy", "jobs", "requests",
              "loads", "loads/req", "misses", "uniform p");
  for (const Mix& mix : Mixes(seed)) {
    for (const char* policy : {"independent", "lockstep", "dsa-chain", "dsa"}) {
      if (std::string(policy) == "lockstep" && !mix.identical_subsets) continue;
      NoCache cache;
      const Outcome o = Simulate(policy, mix, seed, epochs, cache);
      const double per_request = static_cast<double>(o.loads) / static_cast<double>(o.requests);
      std::printf("%-22s %-12s %5zu %10llu %10llu %9.4f %10llu %12.3g\n", mix.name.c_str(), policy,
                  mix.jobs.size(), static_cast<unsigned long long>(o.requests),
                  static_cast<unsigned long long>(o.loads), per_request,
                  static_cast<unsigned long long>(o.misses), o.uniformity_p);
      if (csv.is_open()) {
        csv << mix.name << ',' << policy << ',' << cache.name() << ',' << mix.jobs.size() << ','
            << o.requests << ',' << o.loads << ',' << per_request << ',' << o.misses << ','
            << o.uniformity_p << ",,,,,\n";
      }
    }
    std::printf("\n");
  }
  RunCacheTable(seed, cache_epochs, ods_fraction, csv);
  return 0;
}
