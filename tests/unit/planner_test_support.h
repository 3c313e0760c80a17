// Test support for the cache planner's tests: a 1 MiB cache and fixed node
// figures (what MeasureNode would have found), so that a plan depends on
// the datasets and jobs a test gives it, not on the machine.
#ifndef GALLEY_TESTS_UNIT_PLANNER_TEST_SUPPORT_H_
#define GALLEY_TESTS_UNIT_PLANNER_TEST_SUPPORT_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "galley/cache/tiered_cache.h"
#include "galley/daemon/node_probe.h"

namespace galley::testing {

// A cache of 1 MiB, split as by default.
inline std::unique_ptr<cache::TieredCache> SmallCache() {
  cache::CacheOptions options;
  options.cache_bytes = uint64_t{1} << 20;
  auto cache = cache::TieredCache::Create(options);
  EXPECT_TRUE(cache.ok()) << cache.status().ToString();
  return cache.ok() ? std::move(cache).value() : nullptr;
}

// 200 decodes+augments and 1,500 augments per core per second, 5 GB/s of
// memory copies.
inline NodeMeasurements FixedNode() {
  NodeMeasurements node;
  node.decode_augment_per_core_per_s = 200;
  node.augment_per_core_per_s = 1500;
  node.memory_bytes_per_s = 5e9;
  return node;
}

}  // namespace galley::testing

#endif  // GALLEY_TESTS_UNIT_PLANNER_TEST_SUPPORT_H_
