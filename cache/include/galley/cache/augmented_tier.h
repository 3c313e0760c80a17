// AugmentedTier: byte-budgeted store of finished samples (a job's transform
// output for one item), shared only between jobs that would have produced
// exactly the same sample.
//
// An entry is keyed by (item, transform signature) and stamped with the epoch
// it was produced in. The signature must cover everything the output depends
// on: the transform pipeline with its parameters and the augmentation seed.
// Because a sample's randomness is a pure function of (seed, epoch, item), a
// job with the same signature in the same epoch number would compute
// bit-identical output, so reusing the entry changes nothing it sees. Rules:
//   * other signature: miss;
//   * other epoch number: miss (never served across epochs);
//   * a job that already took the entry, or produced it: miss (never twice);
//   * after `reuse_limit` serves the entry is dropped.
// One entry per (item, signature): a Put for a newer epoch replaces the old one.
//
// Charge per entry: ChargedBytes(blob) + the signature's length + one JobId
// per possible taker (reuse_limit + 1, reserved up front so it never grows).
// The sum never exceeds the budget. Eviction order comes from the injected
// policy, with the item's demand (from the tracker, when given) as priority.
//
// Thread-safe: one mutex (mu_) guards everything.
#ifndef GALLEY_CACHE_AUGMENTED_TIER_H_
#define GALLEY_CACHE_AUGMENTED_TIER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "galley/cache/blob.h"
#include "galley/cache/demand_tracker.h"
#include "galley/cache/eviction_policy.h"
#include "galley/cache/tier.h"
#include "galley/mutex.h"

namespace galley::cache {

struct AugmentedTierStats {
  TierStats tier;         // hits, misses, inserts, rejects, evictions, bytes, entries, budget
  uint64_t retired = 0;   // entries dropped after serving their reuse limit
  uint64_t replaced = 0;  // entries replaced by a newer epoch's output
};

class AugmentedTier final : public DemandListener {
 public:
  // `reuse_limit`: how many times an entry may be served to jobs other than
  // its producer; 0 disables the tier (every Put is refused). `demand` may be
  // null; when set it must outlive the tier.
  AugmentedTier(uint64_t budget_bytes, size_t reuse_limit, std::unique_ptr<EvictionPolicy> policy,
                DemandTracker* demand = nullptr);
  ~AugmentedTier() override;
  AugmentedTier(const AugmentedTier&) = delete;
  AugmentedTier& operator=(const AugmentedTier&) = delete;

  // The sample for `key` under `signature` if `job`, in `epoch`, may take it
  // (see the rules above); nullptr otherwise. A hit records `job` as a taker.
  BlobPtr Get(Key key, std::string_view signature, JobId job, uint64_t epoch);

  // Offers `producer`'s output for `key` in `epoch`. Returns true when an
  // entry for (key, signature, epoch) is resident afterwards; when one
  // already was, `producer` is recorded as a taker of it instead.
  bool Put(Key key, std::string_view signature, JobId producer, uint64_t epoch, BlobPtr blob);

  // Removes every signature's entry for `key`; returns how many.
  size_t Erase(Key key);

  // As Tier::SetBudget.
  void SetBudget(uint64_t budget_bytes);

  size_t reuse_limit() const { return reuse_limit_; }
  AugmentedTierStats Stats() const;
  uint64_t RecomputeChargedBytes() const;

  void OnDemandChanged(Key key, uint32_t demand) override;

 private:
  // The policy orders entries, not items, so each entry gets its own id.
  using EntryId = uint64_t;

  struct Entry {
    EntryId id;
    std::string signature;
    uint64_t epoch;
    std::vector<JobId> takers;  // producer first; capacity reuse_limit + 1
    size_t serves;
    BlobPtr blob;
    uint64_t charged_bytes;
  };

  uint64_t ChargeFor(const Blob& blob, std::string_view signature) const;
  bool PutLocked(Key key, std::string_view signature, JobId producer, uint64_t epoch, BlobPtr blob,
                 uint32_t demand) REQUIRES(mu_);
  bool MakeRoomLocked(uint64_t bytes_needed, std::optional<uint32_t> newcomer_demand) REQUIRES(mu_);
  void RemoveLocked(Key key, size_t index) REQUIRES(mu_);

  const size_t reuse_limit_;
  DemandTracker* const demand_;

  mutable Mutex mu_;
  const std::unique_ptr<EvictionPolicy> policy_ PT_GUARDED_BY(mu_);      // keyed by EntryId
  std::unordered_map<Key, std::vector<Entry>> entries_ GUARDED_BY(mu_);  // one per signature
  std::unordered_map<EntryId, Key> owner_ GUARDED_BY(mu_);
  EntryId next_id_ GUARDED_BY(mu_) = 0;
  uint64_t budget_bytes_ GUARDED_BY(mu_);
  uint64_t bytes_ GUARDED_BY(mu_) = 0;  // always <= budget_bytes_
  uint64_t entry_count_ GUARDED_BY(mu_) = 0;
  AugmentedTierStats stats_ GUARDED_BY(mu_);
  std::vector<EntryId> victims_ GUARDED_BY(mu_);  // scratch
};

}  // namespace galley::cache

#endif  // GALLEY_CACHE_AUGMENTED_TIER_H_
