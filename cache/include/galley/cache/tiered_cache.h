// TieredCache: galleyd's cache: one byte budget split into the encoded,
// decoded and augmented tiers, plus the demand counts that drive eviction.
//
// The facade owns a DemandTracker and the three tiers, which subscribe to it;
// callers use the tiers directly (encoded().Get(...), decoded().Put(...)) and
// report demand through demand(). Between a job receiving an item and the
// item being offered to a tier, consume the demand first: admission then sees
// how many jobs still need the item, which is what its value is.
//
// Thread-safe: every member is. SetSplit and SetCacheBytes re-budget the
// tiers one after the other (each tier shrinks before the next one grows, so
// the total never exceeds cache_bytes even mid-change); serialise them with
// split_mu_.
#ifndef GALLEY_CACHE_TIERED_CACHE_H_
#define GALLEY_CACHE_TIERED_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "galley/cache/augmented_tier.h"
#include "galley/cache/blob_arena.h"
#include "galley/cache/demand_tracker.h"
#include "galley/cache/split.h"
#include "galley/cache/tier.h"
#include "galley/mutex.h"
#include "galley/status.h"

namespace galley::cache {

struct CacheOptions {
  // Total bytes all three tiers may charge together. Default 2 GiB: small
  // enough for any training node; operators size it to the node's spare RAM.
  uint64_t cache_bytes = uint64_t{2} << 30;

  // Initial split. The daemon replaces it with the planner's (or the admin's)
  // split; until then half encoded, half decoded, as augmented entries only
  // pay off for jobs with identical pipelines.
  Split split;

  // Times an augmented entry may be served to jobs other than its producer
  // before it is dropped. 1 keeps each finished sample in at most two jobs'
  // streams; raise it when many jobs share one pipeline and seed. 0 turns the
  // augmented tier off.
  size_t augmented_reuse_limit = 1;

  // "refcount" (default: lowest remaining demand first, no churn) or "lru"
  // (the baseline; thrashes under random per-epoch access).
  std::string eviction = "refcount";

  // Keep the decoded tier's pixels in a BlobArena (blob_arena.h) of
  // cache_bytes plus an eighth and 16 MiB of headroom, so that a freed entry's memory is reused and
  // the memory can be committed ahead of use (galleyd's cache_prefault). Off: each entry's pixels
  // are a heap allocation, as they are in a cache under 1 MiB.
  bool decoded_arena = true;
};

struct CacheStats {
  uint64_t cache_bytes = 0;
  Split split;
  TierStats encoded;
  TierStats decoded;
  AugmentedTierStats augmented;
  std::optional<ArenaStats> decoded_arena;  // set when the decoded tier has one
  uint64_t keys_with_demand = 0;
  uint64_t total_demand = 0;
};

class TieredCache {
 public:
  // InvalidArgument when the options are invalid (unknown eviction policy,
  // split over 100%); the arena's error when the decoded tier's arena cannot
  // be reserved.
  static Result<std::unique_ptr<TieredCache>> Create(const CacheOptions& options);
  TieredCache(const TieredCache&) = delete;
  TieredCache& operator=(const TieredCache&) = delete;

  DemandTracker& demand() { return demand_; }
  Tier& encoded() { return *encoded_; }
  Tier& decoded() { return *decoded_; }
  AugmentedTier& augmented() { return *augmented_; }

  // Decoded pixels (width x height x channels, HWC) as a blob ready for
  // decoded().Put: copied into the decoded arena when there is one with a
  // free block that large (`pixels` then stays with the caller, to be
  // reused or freed), else moved into a heap blob.
  std::shared_ptr<Blob> MakeDecodedBlob(std::vector<uint8_t>&& pixels, uint32_t width,
                                        uint32_t height, uint32_t channels);
  // The decoded tier's arena, or nullptr when decoded_arena is off.
  BlobArena* decoded_arena() { return decoded_arena_.get(); }

  // Re-budgets the tiers; shrinking tiers evict before this returns.
  // InvalidArgument, changing nothing, when `split` is invalid.
  Status SetSplit(const Split& split);
  // Changes the total budget, keeping the split.
  void SetCacheBytes(uint64_t cache_bytes);

  Split split() const;
  uint64_t cache_bytes() const;
  CacheStats Stats() const;

 private:
  TieredCache(const CacheOptions& options, std::shared_ptr<BlobArena> decoded_arena);
  void ApplyBudgetsLocked() REQUIRES(split_mu_);

  // Declared first so it outlives the tiers that subscribe to it.
  DemandTracker demand_;
  std::unique_ptr<Tier> encoded_;
  std::unique_ptr<Tier> decoded_;
  std::unique_ptr<AugmentedTier> augmented_;
  const std::shared_ptr<BlobArena> decoded_arena_;

  mutable Mutex split_mu_;
  Split split_ GUARDED_BY(split_mu_);
  uint64_t cache_bytes_ GUARDED_BY(split_mu_);
};

}  // namespace galley::cache

#endif  // GALLEY_CACHE_TIERED_CACHE_H_
