#include "galley/cache/demand_tracker.h"

#include <algorithm>

namespace galley::cache {

void DemandTracker::AddDemand(std::span<const Key> keys) {
  for (Key key : keys) {
    Shard& shard = ShardFor(key);
    MutexLock lock(&shard.mu);
    const uint32_t demand = ++shard.counts[key];
    Notify(shard, key, demand);
  }
}

bool DemandTracker::ConsumeDemand(Key key) {
  Shard& shard = ShardFor(key);
  MutexLock lock(&shard.mu);
  auto it = shard.counts.find(key);
  if (it == shard.counts.end()) return false;
  const uint32_t demand = --it->second;
  if (demand == 0) shard.counts.erase(it);
  Notify(shard, key, demand);
  return true;
}

size_t DemandTracker::DropDemand(std::span<const Key> keys) {
  size_t dropped = 0;
  for (Key key : keys) dropped += ConsumeDemand(key) ? 1 : 0;
  return dropped;
}

uint32_t DemandTracker::Demand(Key key) const {
  return WithDemand(key, [](uint32_t demand) { return demand; });
}

uint64_t DemandTracker::TotalDemand() const {
  uint64_t total = 0;
  for (const Shard& shard : shards_) {
    MutexLock lock(&shard.mu);
    for (const auto& [key, count] : shard.counts) total += count;
  }
  return total;
}

size_t DemandTracker::KeysWithDemand() const {
  size_t keys = 0;
  for (const Shard& shard : shards_) {
    MutexLock lock(&shard.mu);
    keys += shard.counts.size();
  }
  return keys;
}

void DemandTracker::Subscribe(DemandListener* listener) {
  WriterLock lock(&listeners_mu_);
  listeners_.push_back(listener);
}

void DemandTracker::Unsubscribe(DemandListener* listener) {
  WriterLock lock(&listeners_mu_);
  listeners_.erase(std::remove(listeners_.begin(), listeners_.end(), listener), listeners_.end());
}

void DemandTracker::Notify(const Shard& /*shard*/, Key key, uint32_t demand) const {
  ReaderLock lock(&listeners_mu_);
  for (DemandListener* listener : listeners_) listener->OnDemandChanged(key, demand);
}

}  // namespace galley::cache
