// Eviction order of RefCountEviction and LruEviction, on their own and as a
// Tier drives them.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "galley/cache/lru_eviction.h"
#include "galley/cache/refcount_eviction.h"
#include "galley/cache/tier.h"

namespace galley::cache {
namespace {

std::vector<Key> Victims(const EvictionPolicy& policy, uint64_t bytes,
                         std::optional<uint32_t> newcomer = std::nullopt) {
  std::vector<Key> victims;
  EXPECT_TRUE(policy.ChooseVictims(bytes, newcomer, &victims));
  return victims;
}

BlobPtr BlobOfCharge(uint64_t charged_bytes) {
  auto blob = std::make_shared<Blob>();
  blob->bytes.resize(charged_bytes - kEntryOverheadBytes);
  blob->bytes.shrink_to_fit();
  return blob;
}

TEST(RefCountEvictionTest, LowestDemandLeavesFirst) {
  RefCountEviction policy;
  policy.Add(1, 10, 3);
  policy.Add(2, 10, 1);
  policy.Add(3, 10, 2);
  EXPECT_EQ(Victims(policy, 10), (std::vector<Key>{2}));
  EXPECT_EQ(Victims(policy, 30), (std::vector<Key>{2, 3, 1}));
}

TEST(RefCountEvictionTest, ZeroDemandEntriesGoFirst) {
  RefCountEviction policy;
  policy.Add(1, 10, 1);
  policy.Add(2, 10, 5);
  policy.Add(3, 10, 0);
  policy.Add(4, 10, 0);
  EXPECT_EQ(Victims(policy, 20), (std::vector<Key>{3, 4}));
}

TEST(RefCountEvictionTest, AmongEqualsTheOldestResidentLeavesFirst) {
  RefCountEviction policy;
  policy.Add(7, 10, 2);
  policy.Add(5, 10, 2);
  policy.Add(9, 10, 2);
  EXPECT_EQ(Victims(policy, 10), (std::vector<Key>{7}));
}

TEST(RefCountEvictionTest, NewcomerMustStrictlyBeatEveryVictim) {
  RefCountEviction policy;
  policy.Add(1, 10, 2);
  policy.Add(2, 10, 3);
  std::vector<Key> victims;
  // Equal demand: the resident stays.
  EXPECT_FALSE(policy.ChooseVictims(10, 2u, &victims));
  EXPECT_TRUE(victims.empty());
  EXPECT_FALSE(policy.ChooseVictims(10, 0u, &victims));
  EXPECT_TRUE(policy.ChooseVictims(10, 3u, &victims));
  EXPECT_EQ(victims, (std::vector<Key>{1}));
  // Freeing 20 bytes would displace the demand-3 entry too: refused whole.
  victims.clear();
  EXPECT_FALSE(policy.ChooseVictims(20, 3u, &victims));
  EXPECT_TRUE(victims.empty());
  EXPECT_TRUE(policy.ChooseVictims(20, 4u, &victims));
}

TEST(RefCountEvictionTest, DemandChangesReorder) {
  RefCountEviction policy;
  policy.Add(1, 10, 1);
  policy.Add(2, 10, 2);
  policy.DemandChanged(1, 5);
  EXPECT_EQ(Victims(policy, 10), (std::vector<Key>{2}));
  policy.DemandChanged(2, 9);
  EXPECT_EQ(Victims(policy, 10), (std::vector<Key>{1}));
  EXPECT_EQ(policy.DemandOf(2), 9u);
  policy.Remove(1);
  EXPECT_EQ(Victims(policy, 10), (std::vector<Key>{2}));
  EXPECT_EQ(policy.size(), 1u);
}

TEST(RefCountEvictionTest, RefusesWhenResidentsCannotFreeEnough) {
  RefCountEviction policy;
  policy.Add(1, 10, 0);
  std::vector<Key> victims;
  EXPECT_FALSE(policy.ChooseVictims(11, std::nullopt, &victims));
  EXPECT_TRUE(victims.empty());
}

TEST(LruEvictionTest, LeastRecentlyUsedLeavesFirstWhateverTheDemand) {
  LruEviction policy;
  policy.Add(1, 10, 9);
  policy.Add(2, 10, 0);
  policy.Add(3, 10, 4);
  policy.Touched(1);
  EXPECT_EQ(Victims(policy, 10, 100u), (std::vector<Key>{2}));
  EXPECT_EQ(Victims(policy, 30, 0u), (std::vector<Key>{2, 3, 1}));
  policy.Remove(2);
  EXPECT_EQ(Victims(policy, 10), (std::vector<Key>{3}));
}

TEST(TierEvictionTest, RefCountTierKeepsResidentsAgainstEqualNewcomers) {
  Tier tier("decoded", 3 * 1000, std::make_unique<RefCountEviction>());
  ASSERT_TRUE(tier.Put(1, BlobOfCharge(1000), 2));
  ASSERT_TRUE(tier.Put(2, BlobOfCharge(1000), 1));
  ASSERT_TRUE(tier.Put(3, BlobOfCharge(1000), 1));
  // Full. Demand 1 does not beat the demand-1 residents: no churn.
  EXPECT_FALSE(tier.Put(4, BlobOfCharge(1000), 1));
  EXPECT_FALSE(tier.Contains(4));
  EXPECT_TRUE(tier.Contains(2));
  // Demand 2 beats the oldest demand-1 resident only.
  EXPECT_TRUE(tier.Put(5, BlobOfCharge(1000), 2));
  EXPECT_FALSE(tier.Contains(2));
  EXPECT_TRUE(tier.Contains(3));
  // An entry whose demand ran out is the first to go.
  tier.SetDemand(1, 0);
  EXPECT_TRUE(tier.Put(6, BlobOfCharge(1000), 1));
  EXPECT_FALSE(tier.Contains(1));
  const TierStats stats = tier.Stats();
  EXPECT_EQ(stats.inserts, 5u);
  EXPECT_EQ(stats.rejects, 1u);
  EXPECT_EQ(stats.evictions, 2u);
  EXPECT_EQ(stats.entries, 3u);
  EXPECT_EQ(stats.bytes, 3000u);
}

TEST(TierEvictionTest, LruTierAdmitsEverythingAndEvictsColdest) {
  Tier tier("encoded", 2 * 1000, std::make_unique<LruEviction>());
  ASSERT_TRUE(tier.Put(1, BlobOfCharge(1000), 5));
  ASSERT_TRUE(tier.Put(2, BlobOfCharge(1000), 5));
  ASSERT_NE(tier.Get(1), nullptr);
  EXPECT_TRUE(tier.Put(3, BlobOfCharge(1000), 0));
  EXPECT_TRUE(tier.Contains(1));
  EXPECT_FALSE(tier.Contains(2));
  EXPECT_TRUE(tier.Contains(3));
}

}  // namespace
}  // namespace galley::cache
