// Micro-benchmarks of the cache library: tier hits and misses, puts that
// evict, one eviction decision and the re-ranking a rule by predicted next
// request would add, demand updates that re-rank resident entries, and a
// planner run.
// Items/s is the figure to read; absolute numbers drift on shared machines.
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "galley/cache/blob_arena.h"
#include "galley/cache/partition_planner.h"
#include "galley/cache/refcount_eviction.h"
#include "galley/cache/tiered_cache.h"

namespace galley::cache {
namespace {

constexpr Key kResident = 100'000;

BlobPtr SmallBlob() {
  auto blob = std::make_shared<Blob>();
  blob->bytes.resize(64);
  return blob;
}

std::unique_ptr<EvictionPolicy> PolicyFor(const benchmark::State& state) {
  return MakeEvictionPolicy(state.range(0) == 0 ? "lru" : "refcount").value();
}

// A tier holding exactly kResident small entries.
std::unique_ptr<Tier> FullTier(std::unique_ptr<EvictionPolicy> policy) {
  BlobPtr blob = SmallBlob();
  auto tier = std::make_unique<Tier>("bench", kResident * ChargedBytes(*blob), std::move(policy));
  for (Key key = 0; key < kResident; ++key) tier->Put(key, blob, 1);
  return tier;
}

void BM_TierGetHit(benchmark::State& state) {
  static std::unique_ptr<Tier> tier;
  if (state.thread_index() == 0) tier = FullTier(PolicyFor(state));
  Key key = static_cast<Key>(state.thread_index()) * 7919;
  for (auto _ : state) {
    benchmark::DoNotOptimize(tier->Get(key));
    key = (key + 104'729) % kResident;  // stride over the table, not one hot line
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) state.counters["hits"] = static_cast<double>(tier->Stats().hits);
}
BENCHMARK(BM_TierGetHit)->ArgName("refcount")->Arg(0)->Arg(1)->ThreadRange(1, 4)->UseRealTime();

void BM_TierGetMiss(benchmark::State& state) {
  auto tier = FullTier(PolicyFor(state));
  Key key = kResident;
  for (auto _ : state) benchmark::DoNotOptimize(tier->Get(key++));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TierGetMiss)->ArgName("refcount")->Arg(0)->Arg(1);

// Every Put finds the tier full and evicts one entry; the newcomer's demand
// rises so RefCountEviction admits it.
void BM_TierPutWithEviction(benchmark::State& state) {
  auto tier = FullTier(PolicyFor(state));
  BlobPtr blob = SmallBlob();
  Key key = kResident;
  uint32_t demand = 2;
  for (auto _ : state) benchmark::DoNotOptimize(tier->Put(key++, blob, demand++));
  state.SetItemsProcessed(state.iterations());
  state.counters["evictions"] = static_cast<double>(tier->Stats().evictions);
}
BENCHMARK(BM_TierPutWithEviction)->ArgName("refcount")->Arg(0)->Arg(1);

// One eviction decision of the decoded tier's policy (RefCountEviction) on
// a full tier of `entries` entries of demand 0..3: ChooseVictims for one
// entry's room against a newcomer of higher demand, then the victim out and
// the newcomer in, as a Put that evicts does. O(log n).
void BM_RefCountDecision(benchmark::State& state) {
  const auto entries = static_cast<Key>(state.range(0));
  RefCountEviction policy;
  for (Key key = 0; key < entries; ++key) policy.Add(key, 1, static_cast<uint32_t>(key % 4));
  std::vector<Key> victims;
  Key next = entries;
  for (auto _ : state) {
    victims.clear();
    benchmark::DoNotOptimize(policy.ChooseVictims(1, 4, &victims));
    policy.Remove(victims.front());
    policy.Add(next, 1, static_cast<uint32_t>(next % 4));
    ++next;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RefCountDecision)->ArgName("entries")->Arg(4096)->Arg(131'072)->Arg(1'048'576);

// What a rule by predicted next request (docs/sampling.md §3.5) would pay on
// top: its ranks move as the jobs advance, so the simulator's version gives
// every resident entry a new rank before each wave (one DemandChanged per
// entry; the prediction itself, a few windows per job, is not counted).
// Items/s is entries re-ranked; a wave costs `entries` of them.
void BM_RerankEveryEntry(benchmark::State& state) {
  const auto entries = static_cast<Key>(state.range(0));
  RefCountEviction policy;
  for (Key key = 0; key < entries; ++key) policy.Add(key, 1, static_cast<uint32_t>(key));
  uint32_t shift = 0;
  for (auto _ : state) {
    ++shift;
    for (Key key = 0; key < entries; ++key) {
      policy.DemandChanged(key, static_cast<uint32_t>(key * 2654435761u) + shift);
    }
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_RerankEveryEntry)
    ->ArgName("entries")
    ->Arg(4096)
    ->Arg(131'072)
    ->Unit(benchmark::kMillisecond);

// A decoded tier filling up: each item is a 500 x 375 image copied into a new
// entry that stays resident, as in a first epoch. memory: 0 = a heap vector
// per entry, 1 = a fresh BlobArena, 2 = a BlobArena populated ahead
// (untimed; its cost per image is the populate_us counter). Each round of
// 128 entries starts from memory the process does not hold yet: a new arena,
// or for the heap, malloc_trim(0) after the previous round's entries are
// freed, since malloc would otherwise hand their pages out again.
void BM_DecodedTierFill(benchmark::State& state) {
  constexpr size_t kImage = 500 * 375 * 3;
  constexpr size_t kRound = 128;
  const int64_t memory = state.range(0);
  const std::vector<uint8_t> pixels(kImage, 7);
  std::vector<std::shared_ptr<Blob>> held;
  held.reserve(kRound);
  std::shared_ptr<BlobArena> arena;
  double populate_s = 0;
  int64_t rounds = 0;
  for (auto _ : state) {
    if (held.size() == kRound || (memory > 0 && arena == nullptr)) {
      state.PauseTiming();
      held.clear();
      arena.reset();
      if (memory == 0) ::malloc_trim(0);
      if (memory > 0) {
        arena = BlobArena::Create(kRound * (kImage + 4096) + (1 << 20)).value();
        if (memory == 2) {
          const auto start = std::chrono::steady_clock::now();
          (void)arena->Populate(kRound * (kImage + 4096));
          populate_s +=
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        }
      }
      ++rounds;
      state.ResumeTiming();
    }
    std::shared_ptr<Blob> blob;
    if (memory == 0) {
      blob = std::make_shared<Blob>();
      blob->bytes.assign(pixels.begin(), pixels.end());
    } else {
      blob = arena->Allocate(kImage);
      std::memcpy(blob->arena_bytes.data(), pixels.data(), kImage);
    }
    held.push_back(std::move(blob));
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["populate_us"] = populate_s * 1e6 / static_cast<double>(rounds * kRound);
}
BENCHMARK(BM_DecodedTierFill)->ArgName("memory")->Arg(0)->Arg(1)->Arg(2)->UseRealTime();

// A job's epoch through the full facade: AddDemand over its subset, then one
// ConsumeDemand per item, each pushed to both tiers holding the item.
void BM_DemandUpdate(benchmark::State& state) {
  CacheOptions options;
  options.cache_bytes = 4 * kResident * ChargedBytes(*SmallBlob());
  options.split = {50, 50, 0};
  auto cache = TieredCache::Create(options).value();
  std::vector<Key> subset(static_cast<size_t>(state.range(0)));
  std::iota(subset.begin(), subset.end(), Key{0});
  BlobPtr blob = SmallBlob();
  cache->demand().AddDemand(subset);
  for (Key key : subset) {
    cache->encoded().Put(key, blob);
    cache->decoded().Put(key, blob);
  }
  for (auto _ : state) {
    cache->demand().AddDemand(subset);
    for (Key key : subset) cache->demand().ConsumeDemand(key);
  }
  // Each item counts an add and a consume.
  state.SetItemsProcessed(state.iterations() * 2 * state.range(0));
}
BENCHMARK(BM_DemandUpdate)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMillisecond);

// One full 1% grid search (5,151 splits).
void BM_PlannerRun(benchmark::State& state) {
  PlannerInputs in;
  in.storage_bytes_per_s = 500e6;
  in.decode_augment_per_core_per_s = 800;
  in.augment_per_core_per_s = 6000;
  in.cores = 16;
  in.memory_bytes_per_s = 10e9;
  in.dataset_items = 1'281'167;
  in.encoded_item_bytes = 110e3;
  in.inflation = 6.5;
  in.augmented_item_bytes = 150'528;
  in.cache_bytes = uint64_t{64} << 30;
  in.identical_pipeline_jobs = 2;
  ModelDrivenPlanner planner;
  Plan plan;
  for (auto _ : state) {
    plan = planner.MakePlan(in);
    benchmark::DoNotOptimize(plan);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["splits_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 5151, benchmark::Counter::kIsRate);
  state.counters["x_E"] = plan.encoded_pct;
  state.counters["x_D"] = plan.decoded_pct;
  state.counters["x_A"] = plan.augmented_pct;
}
BENCHMARK(BM_PlannerRun)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace galley::cache

BENCHMARK_MAIN();
