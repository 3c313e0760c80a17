#include "galley/cache/tiered_cache.h"

#include <utility>

#include "galley/cache/eviction_policy.h"

namespace galley::cache {
namespace {

constexpr uint64_t kMinArenaCacheBytes = uint64_t{1} << 20;

// The decoded tier allocates a newcomer's block before its Put evicts for
// it, and best fit leaves holes between blocks of different sizes: an arena
// of exactly the budget would then refuse blocks (and send pixels to the
// heap) whenever the tier is full. An eighth more, plus room for a few large
// images, kept every entry of a tier at budget in the arena in
// TieredCacheArenaTest; only pages blocks have used are ever committed.
uint64_t ArenaCapacity(uint64_t cache_bytes) {
  return cache_bytes + cache_bytes / 8 + (uint64_t{16} << 20);
}

// The policy called `name`, which TieredCache::Create has checked exists.
std::unique_ptr<EvictionPolicy> CheckedPolicy(const std::string& name) {
  return MakeEvictionPolicy(name).value();
}

// Create's and SetSplit's answer to a split that does not add up.
Status InvalidSplit() {
  return Status::InvalidArgument(
      "cache split must be three shares of 0..100 adding up to at most 100");
}

}  // namespace

Result<std::unique_ptr<TieredCache>> TieredCache::Create(const CacheOptions& options) {
  GALLEY_RETURN_IF_ERROR(MakeEvictionPolicy(options.eviction).status());
  if (!options.split.IsValid()) return InvalidSplit();
  std::shared_ptr<BlobArena> arena;
  // A cache under 1 MiB (tests, simulations) keeps its pixels on the heap.
  if (options.decoded_arena && options.cache_bytes >= kMinArenaCacheBytes) {
    auto reserved = BlobArena::Create(ArenaCapacity(options.cache_bytes));
    if (!reserved.ok()) {
      return Status(reserved.status().code(),
                    "decoded tier's arena: " + reserved.status().message());
    }
    arena = std::move(reserved).value();
  }
  return std::unique_ptr<TieredCache>(new TieredCache(options, std::move(arena)));
}

TieredCache::TieredCache(const CacheOptions& options, std::shared_ptr<BlobArena> decoded_arena)
    : encoded_(std::make_unique<Tier>("encoded",
                                      ShareOf(options.cache_bytes, options.split.encoded_pct),
                                      CheckedPolicy(options.eviction), &demand_)),
      decoded_(std::make_unique<Tier>("decoded",
                                      ShareOf(options.cache_bytes, options.split.decoded_pct),
                                      CheckedPolicy(options.eviction), &demand_)),
      augmented_(std::make_unique<AugmentedTier>(
          ShareOf(options.cache_bytes, options.split.augmented_pct), options.augmented_reuse_limit,
          CheckedPolicy(options.eviction), &demand_)),
      decoded_arena_(std::move(decoded_arena)),
      split_(options.split),
      cache_bytes_(options.cache_bytes) {}

std::shared_ptr<Blob> TieredCache::MakeDecodedBlob(std::vector<uint8_t>&& pixels, uint32_t width,
                                                   uint32_t height, uint32_t channels) {
  return MakePixelBlob(decoded_arena_.get(), std::move(pixels), width, height, channels);
}

Status TieredCache::SetSplit(const Split& split) {
  if (!split.IsValid()) return InvalidSplit();
  MutexLock lock(&split_mu_);
  split_ = split;
  ApplyBudgetsLocked();
  return Status::Ok();
}

void TieredCache::SetCacheBytes(uint64_t cache_bytes) {
  MutexLock lock(&split_mu_);
  cache_bytes_ = cache_bytes;
  ApplyBudgetsLocked();
}

void TieredCache::ApplyBudgetsLocked() {
  const uint64_t encoded = ShareOf(cache_bytes_, split_.encoded_pct);
  const uint64_t decoded = ShareOf(cache_bytes_, split_.decoded_pct);
  const uint64_t augmented = ShareOf(cache_bytes_, split_.augmented_pct);
  // Shrink first, grow second: the tiers' budgets never add up to more than
  // cache_bytes, not even between two of these calls.
  if (encoded < encoded_->Stats().budget_bytes) encoded_->SetBudget(encoded);
  if (decoded < decoded_->Stats().budget_bytes) decoded_->SetBudget(decoded);
  if (augmented < augmented_->Stats().tier.budget_bytes) augmented_->SetBudget(augmented);
  encoded_->SetBudget(encoded);
  decoded_->SetBudget(decoded);
  augmented_->SetBudget(augmented);
}

Split TieredCache::split() const {
  MutexLock lock(&split_mu_);
  return split_;
}

uint64_t TieredCache::cache_bytes() const {
  MutexLock lock(&split_mu_);
  return cache_bytes_;
}

CacheStats TieredCache::Stats() const {
  CacheStats stats;
  {
    MutexLock lock(&split_mu_);
    stats.cache_bytes = cache_bytes_;
    stats.split = split_;
  }
  stats.encoded = encoded_->Stats();
  stats.decoded = decoded_->Stats();
  stats.augmented = augmented_->Stats();
  if (decoded_arena_ != nullptr) stats.decoded_arena = decoded_arena_->Stats();
  stats.keys_with_demand = demand_.KeysWithDemand();
  stats.total_demand = demand_.TotalDemand();
  return stats;
}

}  // namespace galley::cache
