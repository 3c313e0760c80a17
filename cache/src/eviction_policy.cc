#include "galley/cache/eviction_policy.h"

#include <string>

#include "galley/cache/lru_eviction.h"
#include "galley/cache/refcount_eviction.h"

namespace galley::cache {

Result<std::unique_ptr<EvictionPolicy>> MakeEvictionPolicy(std::string_view name) {
  if (name == "refcount")
    return std::unique_ptr<EvictionPolicy>(std::make_unique<RefCountEviction>());
  if (name == "lru") return std::unique_ptr<EvictionPolicy>(std::make_unique<LruEviction>());
  return Status::InvalidArgument("unknown eviction policy \"" + std::string(name) +
                                 "\" (want refcount or lru)");
}

}  // namespace galley::cache
