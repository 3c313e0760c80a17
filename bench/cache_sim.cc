// galley_cache_sim: replays a multi-job workload against the real cache and
// prints cache misses (loads) per eviction policy and cache size.
//
// Workload: 4 jobs, each with 2,000 distinct ids drawn at random from
// [0, 2667); every job walks a fresh uniform permutation of its ids each
// epoch, one item per round, on its own (the `independent` sampling policy);
// an item several jobs draw in the same round is loaded once. The cache holds
// 10% or 50% of the union of the subsets. Deterministic for a given seed.
//
// Usage: galley_cache_sim [--epochs N] [--seed S]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "galley/cache/replay_cache.h"

namespace {

using galley::cache::Key;
using galley::cache::ReplayCache;
using galley::cache::ReplayStats;

constexpr int kJobs = 4;
constexpr uint64_t kUniverse = 2667;
constexpr size_t kIdsPerJob = 2000;

// Uniform in [0, n) by rejection, so results do not depend on the standard
// library's distribution implementation.
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit = std::mt19937_64::max() - std::mt19937_64::max() % n;
  uint64_t x;
  do {
    x = rng();
  } while (x >= limit);
  return x % n;
}

void Shuffle(std::vector<Key>& keys, std::mt19937_64& rng) {
  for (size_t i = keys.size(); i > 1; --i) std::swap(keys[i - 1], keys[UniformBelow(rng, i)]);
}

std::vector<std::vector<Key>> DrawSubsets(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<Key>> subsets;
  for (int job = 0; job < kJobs; ++job) {
    std::vector<Key> all(kUniverse);
    for (Key id = 0; id < kUniverse; ++id) all[id] = id;
    // Partial Fisher-Yates: the first kIdsPerJob slots are a uniform sample.
    for (size_t i = 0; i < kIdsPerJob; ++i)
      std::swap(all[i], all[i + UniformBelow(rng, kUniverse - i)]);
    all.resize(kIdsPerJob);
    subsets.push_back(std::move(all));
  }
  return subsets;
}

ReplayStats Replay(const std::vector<std::vector<Key>>& subsets, size_t capacity_items,
                   const char* policy, int epochs, uint64_t seed) {
  auto cache = ReplayCache::Create(capacity_items, policy).value();
  std::vector<std::mt19937_64> rngs;
  for (int job = 0; job < kJobs; ++job) rngs.emplace_back(seed * 1000003 + job + 1);
  std::vector<std::vector<Key>> order(kJobs);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (int job = 0; job < kJobs; ++job) {
      order[job] = subsets[job];
      Shuffle(order[job], rngs[job]);
      cache->AddDemand(subsets[job]);
    }
    for (size_t step = 0; step < kIdsPerJob; ++step) {
      // Items drawn by several jobs this round are loaded once.
      std::map<Key, size_t> receivers;
      std::vector<Key> first_seen;
      for (int job = 0; job < kJobs; ++job) {
        if (receivers[order[job][step]]++ == 0) first_seen.push_back(order[job][step]);
      }
      for (Key key : first_seen) cache->Serve(key, receivers[key]);
    }
  }
  return cache->Stats();
}

}  // namespace

int main(int argc, char** argv) {
  int epochs = 3;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--epochs") == 0) {
      epochs = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--seed") == 0) {
      seed = std::strtoull(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: %s [--epochs N] [--seed S]\n", argv[0]);
      return 2;
    }
  }
  if (argc % 2 == 0 || epochs <= 0) {
    std::fprintf(stderr, "usage: %s [--epochs N] [--seed S]\n", argv[0]);
    return 2;
  }

  const auto subsets = DrawSubsets(seed);
  std::set<Key> union_ids;
  for (const auto& subset : subsets) union_ids.insert(subset.begin(), subset.end());

  std::printf("workload: %d jobs x %zu ids from [0, %llu), union %zu items, %d epochs, seed %llu\n",
              kJobs, kIdsPerJob, static_cast<unsigned long long>(kUniverse), union_ids.size(),
              epochs, static_cast<unsigned long long>(seed));
  std::printf("sampling: independent (coinciding draws in a round merged)\n\n");
  std::printf("%-9s %6s %9s %9s %9s %11s %9s\n", "policy", "cache", "items", "requests", "loads",
              "loads/req", "hit rate");
  for (int pct : {10, 50}) {
    const size_t capacity = union_ids.size() * pct / 100;
    for (const char* policy : {"lru", "refcount"}) {
      const ReplayStats stats = Replay(subsets, capacity, policy, epochs, seed);
      std::printf(
          "%-9s %5d%% %9zu %9llu %9llu %11.4f %8.2f%%\n", policy, pct, capacity,
          static_cast<unsigned long long>(stats.requests),
          static_cast<unsigned long long>(stats.loads), stats.LoadsPerRequest(),
          100.0 * static_cast<double>(stats.hits) / static_cast<double>(stats.hits + stats.loads));
    }
  }
  return 0;
}
