#include "server/daemon/served_job.h"

#include <algorithm>
#include <random>

namespace galley {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<ItemId> ServedJob::EpochItems(uint64_t epoch) const {
  if (spec.world_size <= 1) return subset;
  // Every rank computes the same shuffle from (seed, epoch), then keeps every
  // world_size-th element: shards are disjoint and together cover the subset.
  std::vector<ItemId> order = subset;
  std::mt19937_64 rng(SplitMix64(spec.seed ^ SplitMix64(epoch + 0x5eed)));
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<ItemId> shard;
  shard.reserve(order.size() / spec.world_size + 1);
  for (size_t i = spec.rank; i < order.size(); i += spec.world_size) shard.push_back(order[i]);
  std::sort(shard.begin(), shard.end());
  return shard;
}

uint64_t ServedJob::BatchesPerEpoch() const {
  const uint64_t b = spec.batch_size;
  return spec.drop_last ? epoch_size / b : (epoch_size + b - 1) / b;
}

nlohmann::json ServedJob::Describe() const {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - opened_at).count();
  const uint64_t samples = counters.samples.load();
  return {{"job_id", id},
          {"name", spec.name},
          {"dataset", dataset->root().string()},
          {"owner_uid", owner_uid},
          {"owner_pid", owner_pid},
          {"policy", policy},
          {"batch_size", spec.batch_size},
          {"epoch_size", epoch_size},
          {"batches_per_epoch", BatchesPerEpoch()},
          {"prefetch", spec.prefetch},
          {"segment_bytes", ring->geometry().segment_bytes},
          {"batches", counters.batches.load()},
          {"samples", samples},
          {"skipped", counters.skipped.load()},
          {"epochs_completed", counters.epochs_completed.load()},
          {"produce_seconds", counters.produce_ns.load() / 1e9},
          {"ring_full_seconds", counters.blocked_ns.load() / 1e9},
          {"peer_hold_seconds", counters.held_ns.load() / 1e9},
          {"consumer_wait_seconds", std::chrono::duration<double>(ring->ConsumerWait()).count()},
          {"consumer_waits", ring->ConsumerWaits()},
          {"uptime_seconds", seconds},
          {"samples_per_second", seconds > 0 ? samples / seconds : 0.0}};
}

}  // namespace galley
