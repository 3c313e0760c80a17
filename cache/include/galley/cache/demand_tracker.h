// DemandTracker: for every item, how many registered jobs still need it in
// their current epoch: Joader's reference count, kept exact.
//
// The daemon calls AddDemand with a job's whole subset when the job starts an
// epoch, ConsumeDemand when the job receives an item, and DropDemand with the
// job's remaining keys when it closes or dies. Each change is pushed, while
// the key's shard lock is held, to every subscribed DemandListener (the
// tiers), so listeners see the changes of one key in the order they happened.
//
// Thread-safe. Counts live in kShards shards, each with its own mutex; no
// call holds two shard locks at once. Lock order: shard mutex, then
// listeners_mu_, then whatever a listener locks. A listener must not call
// back into the tracker from OnDemandChanged.
#ifndef GALLEY_CACHE_DEMAND_TRACKER_H_
#define GALLEY_CACHE_DEMAND_TRACKER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "galley/cache/blob.h"
#include "galley/mutex.h"

namespace galley::cache {

class DemandListener {
 public:
  virtual ~DemandListener() = default;
  // `key` is now needed by `demand` jobs this epoch. Called with the key's
  // shard lock held.
  virtual void OnDemandChanged(Key key, uint32_t demand) = 0;
};

class DemandTracker {
 public:
  DemandTracker() = default;
  DemandTracker(const DemandTracker&) = delete;
  DemandTracker& operator=(const DemandTracker&) = delete;

  // One more job needs each key (a key listed twice counts twice).
  void AddDemand(std::span<const Key> keys);

  // One job received `key`. Returns false, changing nothing, when no demand
  // was recorded for it (a caller bug the daemon can count).
  bool ConsumeDemand(Key key);

  // A job that still needed `keys` is gone. Returns how many of them had
  // demand to drop; keys without recorded demand are skipped.
  size_t DropDemand(std::span<const Key> keys);

  // Current demand for `key` (0 when none).
  uint32_t Demand(Key key) const;

  // Runs fn(Demand(key)) with the key's shard lock held, so no demand change
  // for `key` can slip between reading the count and acting on it. Tiers use
  // it to admit an entry with the demand it really has. `fn` must not call
  // into the tracker.
  template <typename Fn>
  decltype(auto) WithDemand(Key key, Fn&& fn) const {
    const Shard& shard = ShardFor(key);
    MutexLock lock(&shard.mu);
    auto it = shard.counts.find(key);
    return fn(it == shard.counts.end() ? uint32_t{0} : it->second);
  }

  // Sum of all counts, and number of keys with non-zero demand.
  uint64_t TotalDemand() const;
  size_t KeysWithDemand() const;

  // Registers / unregisters a listener. Neither may be called from inside
  // OnDemandChanged.
  void Subscribe(DemandListener* listener);
  void Unsubscribe(DemandListener* listener);

 private:
  static constexpr size_t kShards = 64;

  struct Shard {
    mutable Mutex mu;
    std::unordered_map<Key, uint32_t> counts GUARDED_BY(mu);  // zero counts are erased
  };

  Shard& ShardFor(Key key) { return shards_[Mix(key) % kShards]; }
  const Shard& ShardFor(Key key) const { return shards_[Mix(key) % kShards]; }
  // Keys are (dataset << 32) | item; mixing spreads consecutive items and
  // datasets evenly over the shards.
  static uint64_t Mix(Key key) { return (key ^ (key >> 29)) * 0x9E3779B97F4A7C15ull >> 32; }

  // Called with the key's shard lock held, so one key's changes reach the
  // listeners in order.
  void Notify(const Shard& shard, Key key, uint32_t demand) const REQUIRES(shard.mu)
      EXCLUDES(listeners_mu_);

  std::array<Shard, kShards> shards_;
  mutable SharedMutex listeners_mu_;
  std::vector<DemandListener*> listeners_ GUARDED_BY(listeners_mu_);
};

}  // namespace galley::cache

#endif  // GALLEY_CACHE_DEMAND_TRACKER_H_
