// Reuse rules of the augmented tier: same signature, same epoch, never twice
// to one job, dropped after its reuse limit; and its byte accounting.
#include <gtest/gtest.h>

#include <memory>

#include "galley/cache/augmented_tier.h"
#include "galley/cache/lru_eviction.h"
#include "galley/cache/refcount_eviction.h"

namespace galley::cache {
namespace {

BlobPtr Sample(uint8_t fill) {
  auto blob = std::make_shared<Blob>();
  blob->bytes.assign(3 * 4 * 4, fill);
  blob->width = 4;
  blob->height = 4;
  blob->channels = 3;
  return blob;
}

constexpr char kCrop[] = "rrc224|flip|seed=0";
constexpr char kOther[] = "resize256|cc224|seed=0";

TEST(AugmentedTierTest, ServesAnotherJobWithTheSameSignatureAndEpoch) {
  AugmentedTier tier(1 << 20, 1, std::make_unique<RefCountEviction>());
  ASSERT_TRUE(tier.Put(9, kCrop, /*producer=*/1, /*epoch=*/0, Sample(42)));
  BlobPtr got = tier.Get(9, kCrop, /*job=*/2, 0);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->bytes[0], 42);
}

TEST(AugmentedTierTest, OtherSignatureMisses) {
  AugmentedTier tier(1 << 20, 3, std::make_unique<RefCountEviction>());
  ASSERT_TRUE(tier.Put(9, kCrop, 1, 0, Sample(1)));
  EXPECT_EQ(tier.Get(9, kOther, 2, 0), nullptr);
  EXPECT_EQ(tier.Get(8, kCrop, 2, 0), nullptr);
  EXPECT_NE(tier.Get(9, kCrop, 2, 0), nullptr);
}

TEST(AugmentedTierTest, OtherEpochMisses) {
  AugmentedTier tier(1 << 20, 3, std::make_unique<RefCountEviction>());
  ASSERT_TRUE(tier.Put(9, kCrop, 1, 4, Sample(1)));
  EXPECT_EQ(tier.Get(9, kCrop, 2, 3), nullptr);
  EXPECT_EQ(tier.Get(9, kCrop, 2, 5), nullptr);
  EXPECT_NE(tier.Get(9, kCrop, 2, 4), nullptr);
}

TEST(AugmentedTierTest, SameJobNeverServedTwiceNorItsOwnOutput) {
  AugmentedTier tier(1 << 20, 5, std::make_unique<RefCountEviction>());
  ASSERT_TRUE(tier.Put(9, kCrop, 1, 0, Sample(1)));
  EXPECT_EQ(tier.Get(9, kCrop, 1, 0), nullptr);  // the producer
  EXPECT_NE(tier.Get(9, kCrop, 2, 0), nullptr);
  EXPECT_EQ(tier.Get(9, kCrop, 2, 0), nullptr);  // already took it
  EXPECT_NE(tier.Get(9, kCrop, 3, 0), nullptr);
  // A second producer of the same sample keeps its own copy and is marked.
  EXPECT_TRUE(tier.Put(9, kCrop, 4, 0, Sample(1)));
  EXPECT_EQ(tier.Get(9, kCrop, 4, 0), nullptr);
  EXPECT_EQ(tier.Stats().tier.entries, 1u);
}

TEST(AugmentedTierTest, DroppedAfterItsReuseLimit) {
  AugmentedTier tier(1 << 20, 2, std::make_unique<RefCountEviction>());
  ASSERT_TRUE(tier.Put(9, kCrop, 1, 0, Sample(1)));
  EXPECT_NE(tier.Get(9, kCrop, 2, 0), nullptr);
  EXPECT_NE(tier.Get(9, kCrop, 3, 0), nullptr);
  EXPECT_EQ(tier.Get(9, kCrop, 4, 0), nullptr);
  const AugmentedTierStats stats = tier.Stats();
  EXPECT_EQ(stats.retired, 1u);
  EXPECT_EQ(stats.tier.entries, 0u);
  EXPECT_EQ(stats.tier.bytes, 0u);
  EXPECT_EQ(stats.tier.hits, 2u);
  EXPECT_EQ(stats.tier.misses, 1u);
}

TEST(AugmentedTierTest, DefaultLimitOfOneServesOnce) {
  AugmentedTier tier(1 << 20, 1, std::make_unique<LruEviction>());
  ASSERT_TRUE(tier.Put(9, kCrop, 1, 0, Sample(1)));
  EXPECT_NE(tier.Get(9, kCrop, 2, 0), nullptr);
  EXPECT_EQ(tier.Get(9, kCrop, 3, 0), nullptr);
}

TEST(AugmentedTierTest, ZeroReuseLimitDisablesTheTier) {
  AugmentedTier tier(1 << 20, 0, std::make_unique<LruEviction>());
  EXPECT_FALSE(tier.Put(9, kCrop, 1, 0, Sample(1)));
  EXPECT_EQ(tier.Get(9, kCrop, 2, 0), nullptr);
}

TEST(AugmentedTierTest, NewerEpochReplacesAndSignaturesCoexist) {
  AugmentedTier tier(1 << 20, 3, std::make_unique<RefCountEviction>());
  ASSERT_TRUE(tier.Put(9, kCrop, 1, 0, Sample(1)));
  ASSERT_TRUE(tier.Put(9, kOther, 5, 0, Sample(2)));
  ASSERT_TRUE(tier.Put(9, kCrop, 1, 1, Sample(3)));
  AugmentedTierStats stats = tier.Stats();
  EXPECT_EQ(stats.tier.entries, 2u);
  EXPECT_EQ(stats.replaced, 1u);
  EXPECT_EQ(tier.Get(9, kCrop, 2, 0), nullptr);
  BlobPtr got = tier.Get(9, kCrop, 2, 1);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->bytes[0], 3);
  got = tier.Get(9, kOther, 6, 0);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->bytes[0], 2);
  EXPECT_EQ(tier.Erase(9), 2u);
  EXPECT_EQ(tier.Stats().tier.bytes, 0u);
}

TEST(AugmentedTierTest, ChargesSignatureAndTakerSlotsWithinBudget) {
  const uint64_t charge = ChargedBytes(*Sample(0)) + sizeof(kCrop) - 1 + sizeof(JobId) * 3;
  AugmentedTier tier(2 * charge, 2, std::make_unique<RefCountEviction>());
  ASSERT_TRUE(tier.Put(1, kCrop, 1, 0, Sample(1)));
  EXPECT_EQ(tier.Stats().tier.bytes, charge);
  ASSERT_TRUE(tier.Put(2, kCrop, 1, 0, Sample(1)));
  EXPECT_FALSE(tier.Put(3, kCrop, 1, 0, Sample(1)));  // equal demand 0: no churn
  EXPECT_EQ(tier.RecomputeChargedBytes(), tier.Stats().tier.bytes);
  tier.SetBudget(charge);
  EXPECT_EQ(tier.Stats().tier.entries, 1u);
  EXPECT_LE(tier.Stats().tier.bytes, charge);
}

TEST(AugmentedTierTest, DemandFromTheTrackerRanksEntries) {
  DemandTracker demand;
  const uint64_t charge = ChargedBytes(*Sample(0)) + sizeof(kCrop) - 1 + sizeof(JobId) * 2;
  AugmentedTier tier(2 * charge, 1, std::make_unique<RefCountEviction>(), &demand);
  const Key needed[] = {1, 2, 3, 3};
  demand.AddDemand(needed);
  ASSERT_TRUE(tier.Put(1, kCrop, 1, 0, Sample(1)));
  ASSERT_TRUE(tier.Put(2, kCrop, 1, 0, Sample(2)));
  demand.ConsumeDemand(2);
  ASSERT_TRUE(tier.Put(3, kCrop, 1, 0, Sample(3)));  // demand 2 beats item 2's 0
  EXPECT_NE(tier.Get(1, kCrop, 2, 0), nullptr);
  EXPECT_EQ(tier.Get(2, kCrop, 2, 0), nullptr);
}

}  // namespace
}  // namespace galley::cache
