// ReplayCache: the simulator's view of the cache counts requests and loads,
// consumes demand, and is deterministic.
#include <gtest/gtest.h>

#include <vector>

#include "galley/cache/replay_cache.h"

namespace galley::cache {
namespace {

TEST(ReplayCacheTest, CountsLoadsAndConsumesDemand) {
  auto created = ReplayCache::Create(2, "refcount");
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  ReplayCache* cache = created->get();
  const std::vector<Key> job_a = {1, 2, 3};
  const std::vector<Key> job_b = {1, 2};
  cache->AddDemand(job_a);
  cache->AddDemand(job_b);
  EXPECT_FALSE(cache->Serve(1, 1));  // job a: load, item 1 still needed by b
  EXPECT_EQ(cache->Demand(1), 1u);
  EXPECT_TRUE(cache->Contains(1));
  EXPECT_FALSE(cache->Serve(2, 2));  // both jobs in one round: one load, demand 0
  EXPECT_EQ(cache->Demand(2), 0u);
  EXPECT_TRUE(cache->Contains(2));  // demand 0 into a free slot is still admitted
  EXPECT_TRUE(cache->Serve(1, 1));  // job b: hit
  const ReplayStats stats = cache->Stats();
  EXPECT_EQ(stats.requests, 4u);
  EXPECT_EQ(stats.loads, 2u);
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_DOUBLE_EQ(stats.LoadsPerRequest(), 0.5);
}

TEST(ReplayCacheTest, UnknownPolicyIsRefused) {
  const auto refused = ReplayCache::Create(10, "random");
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("random"), std::string::npos);
}

}  // namespace
}  // namespace galley::cache
