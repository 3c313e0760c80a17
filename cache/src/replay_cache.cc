#include "galley/cache/replay_cache.h"

#include <utility>

#include "galley/cache/eviction_policy.h"

namespace galley::cache {

Result<std::unique_ptr<ReplayCache>> ReplayCache::Create(size_t capacity_items,
                                                         std::string_view policy) {
  GALLEY_ASSIGN_OR_RETURN(std::unique_ptr<EvictionPolicy> eviction, MakeEvictionPolicy(policy));
  return std::unique_ptr<ReplayCache>(new ReplayCache(capacity_items, std::move(eviction)));
}

ReplayCache::ReplayCache(size_t capacity_items, std::unique_ptr<EvictionPolicy> policy)
    : item_(std::make_shared<const Blob>()) {
  tier_ = std::make_unique<Tier>("replay", capacity_items * ChargedBytes(*item_), std::move(policy),
                                 &demand_);
}

bool ReplayCache::Serve(Key key, size_t receivers) {
  stats_.requests += receivers;
  const bool hit = tier_->Get(key) != nullptr;
  for (size_t i = 0; i < receivers; ++i) demand_.ConsumeDemand(key);
  if (hit) {
    ++stats_.hits;
  } else {
    ++stats_.loads;
    tier_->Put(key, item_);
  }
  return hit;
}

ReplayStats ReplayCache::Stats() const {
  ReplayStats stats = stats_;
  const TierStats tier = tier_->Stats();
  stats.evictions = tier.evictions;
  stats.rejects = tier.rejects;
  return stats;
}

}  // namespace galley::cache
