// Tier: one byte-budgeted store of blobs keyed by item (the encoded and the
// decoded tier are each one Tier).
//
// Every resident entry is charged ChargedBytes(blob) (payload capacity plus
// kEntryOverheadBytes); the sum of charges never exceeds the budget, at any
// moment: a Put evicts before it inserts, SetBudget evicts before it returns,
// and both happen under one lock. Which entries leave, and whether a newcomer
// is admitted at all, is up to the injected EvictionPolicy.
//
// A tier built with a DemandTracker subscribes to it: Put admits with the
// item's current demand (read under the tracker's key lock, so a concurrent
// demand change cannot be lost) and demand changes re-prioritise resident
// entries. A tier built without one takes demand explicitly (Put with a
// demand, SetDemand): that is how a simulator or a test drives it.
//
// Thread-safe: one mutex (mu_) guards the entries, the policy and the stats.
// Get returns a BlobPtr the caller owns; eviction never invalidates it.
#ifndef GALLEY_CACHE_TIER_H_
#define GALLEY_CACHE_TIER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "galley/cache/blob.h"
#include "galley/cache/demand_tracker.h"
#include "galley/cache/eviction_policy.h"
#include "galley/mutex.h"

namespace galley::cache {

struct TierStats {
  uint64_t hits = 0;       // Get found the entry
  uint64_t misses = 0;     // Get found nothing
  uint64_t inserts = 0;    // Put admitted a new entry
  uint64_t rejects = 0;    // Put refused (too large, or the policy kept the residents)
  uint64_t evictions = 0;  // entries pushed out to make room or to fit a smaller budget
  uint64_t bytes = 0;      // charged bytes resident now
  uint64_t entries = 0;    // entries resident now
  uint64_t budget_bytes = 0;
};

class Tier final : public DemandListener {
 public:
  // `demand` may be null; when set it must outlive the tier.
  Tier(std::string name, uint64_t budget_bytes, std::unique_ptr<EvictionPolicy> policy,
       DemandTracker* demand = nullptr);
  ~Tier() override;
  Tier(const Tier&) = delete;
  Tier& operator=(const Tier&) = delete;

  // The entry for `key`, or nullptr (counted as a miss).
  BlobPtr Get(Key key);

  // Whether `key` is resident; touches neither stats nor recency.
  bool Contains(Key key) const;

  // Admits `blob` under `key` with the item's demand from the tracker (0
  // without one). Returns true when the entry is resident afterwards (a key
  // already resident keeps its value and returns true). Null blobs are refused.
  bool Put(Key key, BlobPtr blob);

  // As above with an explicit demand; for tiers built without a tracker.
  bool Put(Key key, BlobPtr blob, uint32_t demand);

  // Whether a Put of an entry charged `charged_bytes` for `key` would be
  // admitted now: it fits the free room, or the policy would make room for
  // it given the item's current demand (from the tracker; 0 without one).
  // False for a key already resident. Evicts nothing; a Put afterwards may
  // still decide otherwise if the tier changed in between.
  bool WouldAdmit(Key key, uint64_t charged_bytes) const;

  // Removes `key`; returns whether it was resident.
  bool Erase(Key key);

  // Re-prioritises `key` (ignored when not resident); for tiers built
  // without a tracker.
  void SetDemand(Key key, uint32_t demand);

  // Changes the budget; when it shrinks, evicts in policy order until the
  // resident charge fits before returning.
  void SetBudget(uint64_t budget_bytes);

  TierStats Stats() const;
  const std::string& name() const { return name_; }
  std::string_view policy_name() const;

  // Recomputes the resident charge from the entries themselves; equals
  // Stats().bytes unless the accounting is broken. For tests and audits.
  uint64_t RecomputeChargedBytes() const;

  void OnDemandChanged(Key key, uint32_t demand) override;

 private:
  struct Entry {
    BlobPtr blob;
    uint64_t charged_bytes;
  };

  bool PutLocked(Key key, BlobPtr blob, uint32_t demand) REQUIRES(mu_);
  // Evicts until `bytes_needed` more bytes fit.
  bool MakeRoomLocked(uint64_t bytes_needed, std::optional<uint32_t> newcomer_demand) REQUIRES(mu_);
  // Evicts every key in victims_ and clears it.
  void EvictVictimsLocked() REQUIRES(mu_);

  const std::string name_;
  DemandTracker* const demand_;

  mutable Mutex mu_;
  const std::unique_ptr<EvictionPolicy> policy_ PT_GUARDED_BY(mu_);
  std::unordered_map<Key, Entry> entries_ GUARDED_BY(mu_);
  uint64_t budget_bytes_ GUARDED_BY(mu_);
  TierStats stats_ GUARDED_BY(mu_);           // bytes/entries/budget filled on read
  uint64_t bytes_ GUARDED_BY(mu_) = 0;        // always <= budget_bytes_
  std::vector<Key> victims_ GUARDED_BY(mu_);  // scratch reused across Puts
};

}  // namespace galley::cache

#endif  // GALLEY_CACHE_TIER_H_
