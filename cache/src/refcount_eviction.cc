#include "galley/cache/refcount_eviction.h"

namespace galley::cache {

void RefCountEviction::Add(Key key, uint64_t charged_bytes, uint32_t demand) {
  const uint64_t sequence = next_sequence_++;
  auto [it, inserted] = entries_.try_emplace(key, Entry{demand, sequence, charged_bytes});
  if (!inserted) return;  // contract says `key` is new; keep the existing rank intact
  order_.emplace(demand, sequence, key);
}

void RefCountEviction::Remove(Key key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  order_.erase(Rank{it->second.demand, it->second.sequence, key});
  entries_.erase(it);
}

// Recency does not matter: under random per-epoch access a read says nothing
// about the next one, demand does.
void RefCountEviction::Touched(Key) {}

void RefCountEviction::DemandChanged(Key key, uint32_t demand) {
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.demand == demand) return;
  // The sequence is kept, so an entry's age among equals survives re-ranking.
  auto node = order_.extract(Rank{it->second.demand, it->second.sequence, key});
  std::get<0>(node.value()) = demand;
  order_.insert(std::move(node));
  it->second.demand = demand;
}

bool RefCountEviction::ChooseVictims(uint64_t bytes_needed, std::optional<uint32_t> newcomer_demand,
                                     std::vector<Key>* victims) const {
  const size_t first = victims->size();
  uint64_t freed = 0;
  for (auto it = order_.begin(); it != order_.end() && freed < bytes_needed; ++it) {
    const auto& [demand, sequence, key] = *it;
    // Victims come in ascending demand, so the first one the newcomer does
    // not strictly beat ends the search: no resident is displaced by an equal.
    if (newcomer_demand && *newcomer_demand <= demand) break;
    victims->push_back(key);
    freed += entries_.at(key).charged_bytes;
  }
  if (freed < bytes_needed) {
    victims->resize(first);
    return false;
  }
  return true;
}

std::optional<uint32_t> RefCountEviction::DemandOf(Key key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second.demand;
}

}  // namespace galley::cache
