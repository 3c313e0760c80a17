#include "galley/cache/eviction_policy.h"

#include "galley/cache/lru_eviction.h"
#include "galley/cache/refcount_eviction.h"

namespace galley::cache {

std::unique_ptr<EvictionPolicy> MakeEvictionPolicy(std::string_view name) {
  if (name == "refcount") return std::make_unique<RefCountEviction>();
  if (name == "lru") return std::make_unique<LruEviction>();
  return nullptr;
}

}  // namespace galley::cache
