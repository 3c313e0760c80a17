// EvictionPolicy: decides which resident entries of a tier leave first, and
// whether a newcomer may displace them at all.
//
// A tier owns one policy and tells it about every entry it holds (its charged
// bytes and its item's remaining demand: how many registered jobs still need
// the item this epoch). The policy keeps its own ordering and answers
// ChooseVictims; it never frees anything itself, the tier does. Policies are
// not thread-safe: the owning tier calls them with its mutex held.
//
// Implementations: RefCountEviction (refcount_eviction.h), the default, and
// LruEviction (lru_eviction.h), the baseline. Every operation is O(1) or
// O(log n); ChooseVictims is O(log n) per victim it returns.
#ifndef GALLEY_CACHE_EVICTION_POLICY_H_
#define GALLEY_CACHE_EVICTION_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "galley/cache/blob.h"
#include "galley/status.h"

namespace galley::cache {

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;

  // "refcount" or "lru": the name CacheOptions::eviction selects it by.
  virtual std::string_view name() const = 0;

  // Starts tracking a newly resident entry. `key` must not be tracked yet.
  virtual void Add(Key key, uint64_t charged_bytes, uint32_t demand) = 0;

  // Stops tracking `key` (evicted, erased or replaced). Unknown keys are ignored.
  virtual void Remove(Key key) = 0;

  // `key` was just read.
  virtual void Touched(Key key) = 0;

  // The remaining demand for `key`'s item changed. Unknown keys are ignored.
  virtual void DemandChanged(Key key, uint32_t demand) = 0;

  // Appends to `victims`, in eviction order, the fewest entries whose charged
  // bytes add up to at least `bytes_needed`, and returns true. Returns false
  // and appends nothing when the tracked entries cannot free that much, or
  // when `newcomer_demand` is set and the policy would rather keep the
  // residents than admit the newcomer. An unset `newcomer_demand` means the
  // bytes must be freed regardless (the budget shrank).
  virtual bool ChooseVictims(uint64_t bytes_needed, std::optional<uint32_t> newcomer_demand,
                             std::vector<Key>* victims) const = 0;

  // Number of tracked entries.
  virtual size_t size() const = 0;
};

// Returns the policy called `name` ("refcount" or "lru"); InvalidArgument,
// naming the policies there are, when no policy has that name.
Result<std::unique_ptr<EvictionPolicy>> MakeEvictionPolicy(std::string_view name);

}  // namespace galley::cache

#endif  // GALLEY_CACHE_EVICTION_POLICY_H_
