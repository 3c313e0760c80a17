// DemandTracker counts, and how demand changes reach the tiers: a killed
// job's remaining keys drop out and those entries become the first victims.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "galley/cache/demand_tracker.h"
#include "galley/cache/refcount_eviction.h"
#include "galley/cache/tier.h"
#include "galley/cache/tiered_cache.h"

namespace galley::cache {
namespace {

BlobPtr BlobOfCharge(uint64_t charged_bytes) {
  auto blob = std::make_shared<Blob>();
  blob->bytes.resize(charged_bytes - kEntryOverheadBytes);
  blob->bytes.shrink_to_fit();
  return blob;
}

std::vector<Key> Range(Key first, Key last) {
  std::vector<Key> keys(last - first);
  std::iota(keys.begin(), keys.end(), first);
  return keys;
}

TEST(DemandTrackerTest, CountsAddConsumeAndDrop) {
  DemandTracker demand;
  const std::vector<Key> job_a = Range(0, 10);
  const std::vector<Key> job_b = Range(5, 15);
  demand.AddDemand(job_a);
  demand.AddDemand(job_b);
  EXPECT_EQ(demand.Demand(0), 1u);
  EXPECT_EQ(demand.Demand(7), 2u);
  EXPECT_EQ(demand.Demand(14), 1u);
  EXPECT_EQ(demand.Demand(15), 0u);
  EXPECT_EQ(demand.TotalDemand(), 20u);
  EXPECT_EQ(demand.KeysWithDemand(), 15u);

  EXPECT_TRUE(demand.ConsumeDemand(7));
  EXPECT_EQ(demand.Demand(7), 1u);
  EXPECT_FALSE(demand.ConsumeDemand(99));  // nobody needed it

  // Job b dies having received only item 7 (consumed above, attributed to b).
  std::vector<Key> b_remaining;
  for (Key key : job_b) {
    if (key != 7) b_remaining.push_back(key);
  }
  EXPECT_EQ(demand.DropDemand(b_remaining), 9u);
  // Job a still needs all of its ten items, item 7 included.
  for (Key key = 0; key < 10; ++key) EXPECT_EQ(demand.Demand(key), 1u) << key;
  for (Key key = 10; key < 15; ++key) EXPECT_EQ(demand.Demand(key), 0u) << key;
  EXPECT_EQ(demand.TotalDemand(), 10u);
}

TEST(DemandTrackerTest, ConcurrentUpdatesStayExact) {
  DemandTracker demand;
  const std::vector<Key> keys = Range(0, 5000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 5; ++round) {
        demand.AddDemand(keys);
        for (Key key : keys) ASSERT_TRUE(demand.ConsumeDemand(key));
      }
      demand.AddDemand(keys);
    });
  }
  for (auto& t : threads) t.join();
  for (Key key : keys) ASSERT_EQ(demand.Demand(key), 4u);
  EXPECT_EQ(demand.TotalDemand(), 4u * keys.size());
}

struct RecordingListener : DemandListener {
  std::vector<std::pair<Key, uint32_t>> changes;
  void OnDemandChanged(Key key, uint32_t demand) override { changes.emplace_back(key, demand); }
};

TEST(DemandTrackerTest, ListenersSeeEveryChangeUntilUnsubscribed) {
  DemandTracker demand;
  RecordingListener listener;
  demand.Subscribe(&listener);
  const Key keys[] = {4, 4};
  demand.AddDemand(keys);
  demand.ConsumeDemand(4);
  demand.Unsubscribe(&listener);
  demand.ConsumeDemand(4);
  EXPECT_EQ(listener.changes, (std::vector<std::pair<Key, uint32_t>>{{4, 1}, {4, 2}, {4, 1}}));
}

// A client killed mid-epoch: its remaining keys are dropped, so the entries
// only it still needed fall to demand 0 and are the first to be evicted.
TEST(DemandTierTest, KilledJobsItemsBecomeFirstVictims) {
  DemandTracker demand;
  Tier tier("decoded", 4 * 1000, std::make_unique<RefCountEviction>(), &demand);
  const std::vector<Key> survivor = {1, 2};
  const std::vector<Key> killed = {3, 4};
  demand.AddDemand(survivor);
  demand.AddDemand(killed);
  for (Key key : {1, 2, 3, 4}) ASSERT_TRUE(tier.Put(key, BlobOfCharge(1000)));
  // Full, every resident at demand 1: a demand-1 newcomer is refused.
  const Key newcomer[] = {5};
  demand.AddDemand(newcomer);
  EXPECT_FALSE(tier.Put(5, BlobOfCharge(1000)));

  demand.DropDemand(killed);
  EXPECT_EQ(demand.Demand(3), 0u);
  EXPECT_TRUE(tier.Put(5, BlobOfCharge(1000)));
  EXPECT_FALSE(tier.Contains(3));  // oldest zero-demand entry went first
  EXPECT_TRUE(tier.Contains(4));
  EXPECT_TRUE(tier.Put(6, BlobOfCharge(1000)) == false);  // demand 0 beats nobody
  const Key six[] = {6};
  demand.AddDemand(six);
  EXPECT_TRUE(tier.Put(6, BlobOfCharge(1000)));
  EXPECT_FALSE(tier.Contains(4));
  EXPECT_TRUE(tier.Contains(1));
  EXPECT_TRUE(tier.Contains(2));
}

TEST(DemandTierTest, ConsumedDemandLowersPriorityInEveryTier) {
  CacheOptions options;
  options.cache_bytes = 100 * 1000;
  options.split = {50, 50, 0};
  auto created = TieredCache::Create(options);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  TieredCache* cache = created->get();
  const std::vector<Key> keys = Range(0, 3);
  cache->demand().AddDemand(keys);
  cache->demand().AddDemand(keys);
  for (Key key : keys) {
    ASSERT_TRUE(cache->encoded().Put(key, BlobOfCharge(1000)));
    ASSERT_TRUE(cache->decoded().Put(key, BlobOfCharge(1000)));
  }
  cache->demand().ConsumeDemand(1);
  cache->demand().ConsumeDemand(1);
  // Shrinking to two entries per tier must drop item 1 (demand 0) in both.
  options.split = {2, 2, 0};
  ASSERT_TRUE(cache->SetSplit(options.split).ok());
  EXPECT_FALSE(cache->encoded().Contains(1));
  EXPECT_FALSE(cache->decoded().Contains(1));
  EXPECT_TRUE(cache->encoded().Contains(0));
  EXPECT_TRUE(cache->decoded().Contains(2));
  const CacheStats stats = cache->Stats();
  EXPECT_EQ(stats.encoded.entries, 2u);
  EXPECT_EQ(stats.decoded.entries, 2u);
  EXPECT_EQ(stats.total_demand, 4u);
}

TEST(TieredCacheTest, RejectsBadOptionsAndSplitsTheBudget) {
  CacheOptions options;
  options.eviction = "fifo";
  auto refused = TieredCache::Create(options);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("fifo"), std::string::npos);
  options.eviction = "lru";
  options.split = {60, 50, 0};
  EXPECT_EQ(TieredCache::Create(options).status().code(), StatusCode::kInvalidArgument);

  options.split = {30, 60, 10};
  options.cache_bytes = 1000;
  auto created = TieredCache::Create(options);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  TieredCache* cache = created->get();
  CacheStats stats = cache->Stats();
  EXPECT_EQ(stats.encoded.budget_bytes, 300u);
  EXPECT_EQ(stats.decoded.budget_bytes, 600u);
  EXPECT_EQ(stats.augmented.tier.budget_bytes, 100u);
  EXPECT_EQ(cache->SetSplit({101, 0, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cache->split(), (Split{30, 60, 10}));
  cache->SetCacheBytes(2000);
  stats = cache->Stats();
  EXPECT_EQ(stats.decoded.budget_bytes, 1200u);
}

}  // namespace
}  // namespace galley::cache
