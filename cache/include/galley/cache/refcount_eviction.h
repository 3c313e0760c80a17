// RefCountEviction: evicts the entries whose items the fewest registered jobs
// still need this epoch (Joader's RefCnt policy), and does not churn.
//
// Order: lowest remaining demand first (zero-demand entries before all
// others); among equal demand, the entry resident longest. Admission: a
// newcomer displaces residents only if its demand is strictly higher than that
// of every resident it would displace, so among equals the resident stays and
// the newcomer is turned away. Under random per-epoch access that is what
// keeps the hit rate up where LRU keeps swapping equally useful items.
//
// O(log n) per operation: entries sit in an ordered set keyed by
// (demand, admission sequence). Not thread-safe; see EvictionPolicy.
#ifndef GALLEY_CACHE_REFCOUNT_EVICTION_H_
#define GALLEY_CACHE_REFCOUNT_EVICTION_H_

#include <set>
#include <tuple>
#include <unordered_map>

#include "galley/cache/eviction_policy.h"

namespace galley::cache {

class RefCountEviction final : public EvictionPolicy {
 public:
  RefCountEviction() = default;
  RefCountEviction(const RefCountEviction&) = delete;
  RefCountEviction& operator=(const RefCountEviction&) = delete;

  std::string_view name() const override { return "refcount"; }
  void Add(Key key, uint64_t charged_bytes, uint32_t demand) override;
  void Remove(Key key) override;
  void Touched(Key key) override;
  void DemandChanged(Key key, uint32_t demand) override;
  bool ChooseVictims(uint64_t bytes_needed, std::optional<uint32_t> newcomer_demand,
                     std::vector<Key>* victims) const override;
  size_t size() const override { return entries_.size(); }

  // The demand this policy holds for `key`, or nullopt when it is not tracked.
  std::optional<uint32_t> DemandOf(Key key) const;

 private:
  struct Entry {
    uint32_t demand;
    uint64_t sequence;  // admission order: older entries leave first among equals
    uint64_t charged_bytes;
  };
  using Rank = std::tuple<uint32_t, uint64_t, Key>;  // (demand, sequence, key)

  std::unordered_map<Key, Entry> entries_;
  std::set<Rank> order_;  // eviction order, front first
  uint64_t next_sequence_ = 0;
};

}  // namespace galley::cache

#endif  // GALLEY_CACHE_REFCOUNT_EVICTION_H_
