#include "galley/cache/lru_eviction.h"

namespace galley::cache {

void LruEviction::Add(Key key, uint64_t charged_bytes, uint32_t) {
  if (index_.contains(key)) return;
  recency_.push_front(key);
  index_.emplace(key, Entry{recency_.begin(), charged_bytes});
}

void LruEviction::Remove(Key key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  recency_.erase(it->second.position);
  index_.erase(it);
}

void LruEviction::Touched(Key key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  recency_.splice(recency_.begin(), recency_, it->second.position);
}

bool LruEviction::ChooseVictims(uint64_t bytes_needed, std::optional<uint32_t>,
                                std::vector<Key>* victims) const {
  const size_t first = victims->size();
  uint64_t freed = 0;
  for (auto it = recency_.rbegin(); it != recency_.rend() && freed < bytes_needed; ++it) {
    victims->push_back(*it);
    freed += index_.at(*it).charged_bytes;
  }
  if (freed < bytes_needed) {
    victims->resize(first);
    return false;
  }
  return true;
}

}  // namespace galley::cache
