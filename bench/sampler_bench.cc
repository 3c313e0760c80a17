// Micro-benchmarks of the sampling policies at the design scale: 64 jobs over
// 10 million items. Reports the cost of one round (one Next call, every job
// ready) and of one AddJob of a 10-million-item subset; and, at ImageNet-1k's
// size (1,281,167 items) with 1, 8 and 32 jobs on every item, the time per
// decision and the heap the policy holds per item (BM_ImageNetDecision).
//
//   galley_sampler_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "galley/sampler/sampling_policy.h"

namespace galley {
namespace {

constexpr ItemId kItems = 10'000'000;

const std::vector<ItemId>& AllItems() {
  static const std::vector<ItemId> items = [] {
    std::vector<ItemId> v(kItems);
    std::iota(v.begin(), v.end(), 0);
    std::shuffle(v.begin(), v.end(), std::mt19937_64(1));
    return v;
  }();
  return items;
}

enum Mix : int64_t {
  kIdentical = 0,  // every job on all items
  kNested = 1,     // job j on the first (j+1)/jobs of a shuffled order
  kRandom = 2,     // each job on a random 3/4 of the items
};

const char* MixName(int64_t mix) {
  return mix == kIdentical ? "identical" : mix == kNested ? "nested" : "random";
}

std::vector<ItemId> SubsetFor(int64_t mix, int job, int jobs) {
  const std::vector<ItemId>& all = AllItems();
  if (mix == kIdentical) return all;
  if (mix == kNested) {
    const size_t size = all.size() * static_cast<size_t>(job + 1) / static_cast<size_t>(jobs);
    return {all.begin(), all.begin() + static_cast<long>(size)};
  }
  std::vector<ItemId> subset;
  std::mt19937_64 random(job + 7);
  for (ItemId item = 0; item < kItems; ++item) {
    if (random() % 4 != 0) subset.push_back(item);
  }
  return subset;
}

// args: policy index, mix, jobs
void BM_Round(benchmark::State& state) {
  static const char* const kPolicies[] = {"dsa", "dsa-chain", "independent", "lockstep"};
  const char* policy_name = kPolicies[state.range(0)];
  const int64_t mix = state.range(1);
  const int jobs = static_cast<int>(state.range(2));
  auto policy = std::move(MakeSamplingPolicy({policy_name, 42})).value();
  for (int j = 0; j < jobs; ++j) {
    if (!policy->AddJob(static_cast<JobId>(j), SubsetFor(mix, j, jobs)).ok()) {
      state.SkipWithError("AddJob failed");
      return;
    }
  }
  Round round;
  const ReadyFn all_ready = [](JobId) { return true; };
  for (int i = 0; i < 1000; ++i) policy->Next(all_ready, &round);  // warm-up
  uint64_t loads = 0, requests = 0;
  for (auto _ : state) {
    policy->Next(all_ready, &round);
    loads += round.deliveries.size();
    requests += round.requests();
  }
  state.SetLabel(std::string(policy_name) + "/" + MixName(mix));
  state.counters["loads_per_request"] =
      static_cast<double>(loads) / static_cast<double>(std::max<uint64_t>(requests, 1));
  state.counters["rounds_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Round)
    ->ArgsProduct({{0, 1, 2, 3}, {kIdentical, kNested}, {64}})
    ->ArgsProduct({{0, 1, 2}, {kRandom}, {4}})
    ->Unit(benchmark::kNanosecond)
    ->Iterations(200000);

// Adds a 10-million-item subset next to `jobs - 1` registered jobs on the
// same items. args: policy index, jobs
void BM_AddJob(benchmark::State& state) {
  static const char* const kPolicies[] = {"dsa", "lockstep"};
  const char* policy_name = kPolicies[state.range(0)];
  const int jobs = static_cast<int>(state.range(1));
  auto policy = std::move(MakeSamplingPolicy({policy_name, 42})).value();
  const std::vector<ItemId>& items = AllItems();
  for (int j = 0; j + 1 < jobs; ++j) {
    if (!policy->AddJob(static_cast<JobId>(j), items).ok()) state.SkipWithError("AddJob failed");
  }
  for (auto _ : state) {
    if (!policy->AddJob(1000, items).ok()) state.SkipWithError("AddJob failed");
    state.PauseTiming();
    policy->RemoveJob(1000);
    state.ResumeTiming();
  }
  state.SetLabel(policy_name);
  state.counters["ns_per_item"] = benchmark::Counter(
      static_cast<double>(items.size()) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_AddJob)
    ->Args({0, 1})
    ->Args({0, 64})
    ->Args({1, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// Bytes the heap has handed out and not taken back (glibc's count).
uint64_t HeapBytesInUse() {
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

constexpr ItemId kImageNetItems = 1'281'167;

// dsa (the default policy) with `jobs` jobs on every ImageNet-1k item: one
// decision is one Next call with every job ready (a load and the jobs it
// serves). Reports the heap the registered jobs hold, per item and per item
// and job. args: jobs
void BM_ImageNetDecision(benchmark::State& state) {
  const int jobs = static_cast<int>(state.range(0));
  std::vector<ItemId> items(kImageNetItems);
  std::iota(items.begin(), items.end(), 0);
  const uint64_t heap_before = HeapBytesInUse();
  auto policy = std::move(MakeSamplingPolicy({"dsa", 42})).value();
  for (int j = 0; j < jobs; ++j) {
    if (!policy->AddJob(static_cast<JobId>(j), items).ok()) {
      state.SkipWithError("AddJob failed");
      return;
    }
  }
  const double held = static_cast<double>(HeapBytesInUse() - heap_before);
  Round round;
  const ReadyFn all_ready = [](JobId) { return true; };
  for (int i = 0; i < 1000; ++i) policy->Next(all_ready, &round);  // warm-up
  uint64_t requests = 0;
  for (auto _ : state) {
    policy->Next(all_ready, &round);
    requests += round.requests();
  }
  state.counters["bytes_per_item"] = held / kImageNetItems;
  state.counters["bytes_per_item_job"] = held / kImageNetItems / jobs;
  state.counters["ns_per_request"] = benchmark::Counter(
      static_cast<double>(requests), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ImageNetDecision)
    ->Arg(1)
    ->Arg(8)
    ->Arg(32)
    ->Unit(benchmark::kNanosecond)
    ->Iterations(200000);

}  // namespace
}  // namespace galley

BENCHMARK_MAIN();
