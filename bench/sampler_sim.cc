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
// Cache: a CacheModel decides whether a load is served from memory. The only
// model here is NoCache (every load is a miss); a model over galley_cache plugs
// in through the same interface.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "server/sampler/sampling_policy.h"
#include "server/sampler/uniformity_statistics.h"

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

std::vector<ItemId> RandomSubset(std::mt19937_64& random, ItemId universe, ItemId size) {
  std::vector<ItemId> all(universe);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), random);
  all.resize(size);
  return all;
}

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

  // Pairwise-different overlaps: atoms AB 3000, AC 2000, BC 1000, ABC 500,
  // 1000 private items each.
  {
    Mix mix{"pairwise-3", std::vector<SimJob>(3), false};
    ItemId next = 0;
    auto atom = [&](ItemId size, std::initializer_list<int> jobs) {
      for (ItemId i = 0; i < size; ++i, ++next) {
        for (int job : jobs) mix.jobs[job].subset.push_back(next);
      }
    };
    atom(3000, {0, 1});
    atom(2000, {0, 2});
    atom(1000, {1, 2});
    atom(500, {0, 1, 2});
    atom(1000, {0});
    atom(1000, {1});
    atom(1000, {2});
    mixes.push_back(mix);
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

}  // namespace
}  // namespace galley

int main(int argc, char** argv) {
  using namespace galley;
  uint64_t seed = 1;
  int epochs = 2;
  std::string csv_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--epochs" && i + 1 < argc) {
      epochs = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--csv" && i + 1 < argc) {
      csv_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--seed N] [--epochs N] [--csv FILE]\n", argv[0]);
      return 2;
    }
  }
  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path);
    csv << "mix,policy,cache,jobs,requests,loads,loads_per_request,misses,uniformity_p\n";
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
            << o.uniformity_p << '\n';
      }
    }
    std::printf("\n");
  }
  return 0;
}
