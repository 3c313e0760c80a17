// LruEviction: evicts the least recently used entry first and admits every
// newcomer. It ignores demand; it is the baseline the simulator compares
// RefCountEviction against.
//
// O(1) per operation (a recency list plus a hash index). Not thread-safe; see
// EvictionPolicy.
#ifndef GALLEY_CACHE_LRU_EVICTION_H_
#define GALLEY_CACHE_LRU_EVICTION_H_

#include <list>
#include <unordered_map>

#include "galley/cache/eviction_policy.h"

namespace galley::cache {

class LruEviction final : public EvictionPolicy {
 public:
  LruEviction() = default;
  LruEviction(const LruEviction&) = delete;
  LruEviction& operator=(const LruEviction&) = delete;

  std::string_view name() const override { return "lru"; }
  void Add(Key key, uint64_t charged_bytes, uint32_t demand) override;
  void Remove(Key key) override;
  void Touched(Key key) override;
  void DemandChanged(Key, uint32_t) override {}
  bool ChooseVictims(uint64_t bytes_needed, std::optional<uint32_t> newcomer_demand,
                     std::vector<Key>* victims) const override;
  size_t size() const override { return index_.size(); }

 private:
  struct Entry {
    std::list<Key>::iterator position;
    uint64_t charged_bytes;
  };

  std::list<Key> recency_;  // most recently used at the front
  std::unordered_map<Key, Entry> index_;
};

}  // namespace galley::cache

#endif  // GALLEY_CACHE_LRU_EVICTION_H_
