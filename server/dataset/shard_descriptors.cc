#include "galley/dataset/shard_descriptors.h"

#include <algorithm>
#include <vector>

namespace galley {

ShardDescriptorCache::ShardDescriptorCache(size_t capacity)
    : capacity_(std::max<size_t>(1, capacity)) {}

ShardDescriptorCache::Descriptor ShardDescriptorCache::Erase(std::list<Entry>::iterator position) {
  auto set = sets_.find(position->key.first);
  set->second.erase(position->in_set);
  if (set->second.empty()) sets_.erase(set);
  index_.erase(position->key);
  Descriptor fd = std::move(position->fd);
  lru_.erase(position);
  return fd;
}

ShardDescriptorCache::Descriptor ShardDescriptorCache::Find(uint64_t set, uint32_t shard) {
  MutexLock lock(&mu_);
  auto found = index_.find({set, shard});
  if (found == index_.end()) return nullptr;
  const auto position = found->second;
  lru_.splice(lru_.begin(), lru_, position);
  std::list<Key>& keys = sets_.at(set);
  keys.splice(keys.begin(), keys, position->in_set);
  return position->fd;
}

ShardDescriptorCache::Descriptor ShardDescriptorCache::Insert(uint64_t set, uint32_t shard,
                                                              Descriptor fd, size_t set_capacity) {
  // Closed once the lock is released: a close is a system call.
  std::vector<Descriptor> closing;
  Descriptor cached;
  {
    MutexLock lock(&mu_);
    const Key key{set, shard};
    if (auto found = index_.find(key); found != index_.end()) return found->second->fd;
    const size_t own_limit = std::max<size_t>(1, set_capacity);
    // Looked up each time: erasing a set's last key removes its list.
    for (auto keys = sets_.find(set); keys != sets_.end() && keys->second.size() >= own_limit;
         keys = sets_.find(set)) {
      closing.push_back(Erase(index_.at(keys->second.back())));
      ++evicted_;
    }
    while (lru_.size() >= capacity_) {
      closing.push_back(Erase(std::prev(lru_.end())));
      ++evicted_;
    }
    std::list<Key>& own = sets_[set];
    own.push_front(key);
    lru_.push_front(Entry{key, std::move(fd), own.begin()});
    index_.emplace(key, lru_.begin());
    ++opened_;
    cached = lru_.front().fd;
  }
  return cached;
}

void ShardDescriptorCache::Release(uint64_t set) {
  std::vector<Descriptor> closing;
  MutexLock lock(&mu_);
  auto found = sets_.find(set);
  if (found == sets_.end()) return;
  // Copied: erasing the last key removes the list itself.
  const std::vector<Key> keys(found->second.begin(), found->second.end());
  for (const Key& key : keys) {
    closing.push_back(Erase(index_.at(key)));
    ++released_;
  }
  // `closing` is destroyed after `lock` (declared before it): the closes
  // happen outside the lock.
}

void ShardDescriptorCache::ShedHalf() {
  std::vector<Descriptor> closing;
  MutexLock lock(&mu_);
  const size_t shed = std::max<size_t>(1, lru_.size() / 2);
  for (size_t i = 0; i < shed && !lru_.empty(); ++i) {
    closing.push_back(Erase(std::prev(lru_.end())));
    ++evicted_;
  }
}

ShardDescriptorCounts ShardDescriptorCache::Counts() const {
  MutexLock lock(&mu_);
  return {lru_.size(), capacity_, opened_, evicted_, released_};
}

}  // namespace galley
