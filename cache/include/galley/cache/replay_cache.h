// ReplayCache: the cache as a simulator drives it: one tier holding whole
// items of equal size, its demand tracker, and counters of requests and
// loads. It runs the real Tier, EvictionPolicy and DemandTracker code; only
// the item payload is a stand-in (every item shares one small blob).
//
// A replay calls AddDemand when a job starts an epoch, DropDemand when a job
// leaves early, and Serve once per item per round with the number of jobs
// that receive it. Everything is deterministic: the same call sequence gives
// the same hits and loads.
//
// Not meant for concurrent use (the tier is thread-safe, the counters are not).
#ifndef GALLEY_CACHE_REPLAY_CACHE_H_
#define GALLEY_CACHE_REPLAY_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "galley/cache/demand_tracker.h"
#include "galley/cache/tier.h"

namespace galley::cache {

struct ReplayStats {
  uint64_t requests = 0;  // (job, item) deliveries
  uint64_t loads = 0;     // items read and decoded because the cache missed
  uint64_t hits = 0;      // Serve calls the cache answered
  uint64_t evictions = 0;
  uint64_t rejects = 0;  // loaded items the policy did not admit

  double LoadsPerRequest() const {
    return requests == 0 ? 0.0 : static_cast<double>(loads) / static_cast<double>(requests);
  }
};

class ReplayCache {
 public:
  // Holds up to `capacity_items` items under the eviction policy called
  // `policy` ("refcount" or "lru"); InvalidArgument for an unknown policy.
  static Result<std::unique_ptr<ReplayCache>> Create(size_t capacity_items,
                                                     std::string_view policy);
  ReplayCache(const ReplayCache&) = delete;
  ReplayCache& operator=(const ReplayCache&) = delete;

  void AddDemand(std::span<const Key> keys) { demand_.AddDemand(keys); }
  void DropDemand(std::span<const Key> keys) { demand_.DropDemand(keys); }

  // `receivers` jobs get `key` in this round, loaded once between them. On a
  // miss the item is loaded, their demand consumed, and the item offered to
  // the tier with the demand that remains (what it is still worth). Returns
  // whether the cache had it.
  bool Serve(Key key, size_t receivers);

  bool Contains(Key key) const { return tier_->Contains(key); }
  uint32_t Demand(Key key) const { return demand_.Demand(key); }
  ReplayStats Stats() const;

 private:
  ReplayCache(size_t capacity_items, std::unique_ptr<EvictionPolicy> policy);

  DemandTracker demand_;  // declared first: outlives the tier subscribed to it
  std::unique_ptr<Tier> tier_;
  BlobPtr item_;
  ReplayStats stats_;
};

}  // namespace galley::cache

#endif  // GALLEY_CACHE_REPLAY_CACHE_H_
