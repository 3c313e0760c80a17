// Tier byte accounting: the resident charge never exceeds the budget, alone
// or under many threads, and shrinking the budget evicts at once.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "galley/cache/lru_eviction.h"
#include "galley/cache/refcount_eviction.h"
#include "galley/cache/tier.h"

namespace galley::cache {
namespace {

BlobPtr BlobOfPayload(size_t payload, uint8_t fill = 0) {
  auto blob = std::make_shared<Blob>();
  blob->bytes.assign(payload, fill);
  blob->bytes.shrink_to_fit();
  return blob;
}

TEST(TierTest, ChargesPayloadPlusFixedOverhead) {
  Tier tier("encoded", 1 << 20, std::make_unique<RefCountEviction>());
  ASSERT_TRUE(tier.Put(1, BlobOfPayload(1000)));
  ASSERT_TRUE(tier.Put(2, BlobOfPayload(24)));
  const TierStats stats = tier.Stats();
  EXPECT_EQ(stats.bytes, 1000 + 24 + 2 * kEntryOverheadBytes);
  EXPECT_EQ(stats.entries, 2u);
  EXPECT_EQ(tier.RecomputeChargedBytes(), stats.bytes);
}

TEST(TierTest, GetServesWhatWasPutAndCountsHitsAndMisses) {
  Tier tier("decoded", 1 << 20, std::make_unique<LruEviction>());
  auto blob = std::make_shared<Blob>();
  blob->bytes = {1, 2, 3, 4, 5, 6};
  blob->width = 2;
  blob->height = 1;
  blob->channels = 3;
  ASSERT_TRUE(tier.Put(MakeKey(3, 17), blob));
  BlobPtr got = tier.Get(MakeKey(3, 17));
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->bytes, blob->bytes);
  EXPECT_EQ(got->width, 2u);
  EXPECT_EQ(tier.Get(MakeKey(3, 18)), nullptr);
  EXPECT_EQ(tier.Get(MakeKey(4, 17)), nullptr);
  const TierStats stats = tier.Stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 2u);
}

TEST(TierTest, RefusesAnEntryLargerThanTheBudget) {
  Tier tier("encoded", 1000, std::make_unique<LruEviction>());
  EXPECT_FALSE(tier.Put(1, BlobOfPayload(1000)));
  EXPECT_TRUE(tier.Put(2, BlobOfPayload(1000 - kEntryOverheadBytes)));
  EXPECT_FALSE(tier.Put(3, nullptr));
  EXPECT_EQ(tier.Stats().rejects, 2u);
}

// WouldAdmit answers as Put would, and changes nothing: room admits; a full
// tier admits a newcomer only if its policy would make room for it; a
// resident key or an entry over the budget is never "admitted".
TEST(TierTest, WouldAdmitAnswersAsPutWouldWithoutEvicting) {
  const uint64_t entry = ChargedBytes(*BlobOfPayload(100));
  Tier tier("decoded", 2 * entry, std::make_unique<RefCountEviction>());
  EXPECT_TRUE(tier.WouldAdmit(1, entry));
  EXPECT_FALSE(tier.WouldAdmit(1, 3 * entry));
  ASSERT_TRUE(tier.Put(1, BlobOfPayload(100), 1));
  ASSERT_TRUE(tier.Put(2, BlobOfPayload(100), 2));
  EXPECT_FALSE(tier.WouldAdmit(1, entry));  // resident
  // Full: no tracker, so a newcomer's demand is 0, which displaces nothing.
  EXPECT_FALSE(tier.WouldAdmit(3, entry));
  EXPECT_FALSE(tier.Put(3, BlobOfPayload(100), 0));
  tier.SetDemand(1, 0);
  EXPECT_FALSE(tier.WouldAdmit(3, entry));  // an equal does not displace
  EXPECT_EQ(tier.Stats().evictions, 0u);
  Tier lru("decoded", 2 * entry, std::make_unique<LruEviction>());
  ASSERT_TRUE(lru.Put(1, BlobOfPayload(100)));
  ASSERT_TRUE(lru.Put(2, BlobOfPayload(100)));
  EXPECT_TRUE(lru.WouldAdmit(3, entry));  // LRU admits every newcomer
  EXPECT_EQ(lru.Stats().entries, 2u);
  EXPECT_EQ(lru.Stats().evictions, 0u);
}

TEST(TierTest, WouldAdmitReadsTheTrackersDemand) {
  const uint64_t entry = ChargedBytes(*BlobOfPayload(100));
  DemandTracker demand;
  Tier tier("decoded", entry, std::make_unique<RefCountEviction>(), &demand);
  ASSERT_TRUE(tier.Put(1, BlobOfPayload(100)));  // demand 0
  EXPECT_FALSE(tier.WouldAdmit(2, entry));
  const std::vector<Key> needed = {2};
  demand.AddDemand(needed);
  EXPECT_TRUE(tier.WouldAdmit(2, entry));
  EXPECT_TRUE(tier.Contains(1));
}

TEST(TierTest, EvictedValueStaysValidForItsReader) {
  Tier tier("encoded", 2 * (kEntryOverheadBytes + 100), std::make_unique<LruEviction>());
  ASSERT_TRUE(tier.Put(1, BlobOfPayload(100, 7)));
  BlobPtr held = tier.Get(1);
  ASSERT_TRUE(tier.Put(2, BlobOfPayload(100)));
  ASSERT_TRUE(tier.Put(3, BlobOfPayload(100)));
  ASSERT_FALSE(tier.Contains(1));
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held->bytes.size(), 100u);
  EXPECT_EQ(held->bytes[99], 7);
}

TEST(TierTest, ShrinkingTheBudgetEvictsImmediately) {
  const uint64_t charge = kEntryOverheadBytes + 744;  // 1000 bytes each
  Tier tier("decoded", 10 * charge, std::make_unique<RefCountEviction>());
  for (Key key = 0; key < 10; ++key) ASSERT_TRUE(tier.Put(key, BlobOfPayload(744), key));
  tier.SetBudget(4 * charge + 10);
  TierStats stats = tier.Stats();
  EXPECT_EQ(stats.entries, 4u);
  EXPECT_LE(stats.bytes, stats.budget_bytes);
  EXPECT_EQ(stats.evictions, 6u);
  // The lowest-demand entries went.
  for (Key key = 0; key < 6; ++key) EXPECT_FALSE(tier.Contains(key));
  for (Key key = 6; key < 10; ++key) EXPECT_TRUE(tier.Contains(key));
  tier.SetBudget(0);
  stats = tier.Stats();
  EXPECT_EQ(stats.entries, 0u);
  EXPECT_EQ(stats.bytes, 0u);
  tier.SetBudget(3 * charge);
  EXPECT_TRUE(tier.Put(42, BlobOfPayload(744), 0));
}

TEST(TierTest, EraseReleasesTheCharge) {
  Tier tier("encoded", 1 << 20, std::make_unique<RefCountEviction>());
  ASSERT_TRUE(tier.Put(1, BlobOfPayload(500)));
  EXPECT_TRUE(tier.Erase(1));
  EXPECT_FALSE(tier.Erase(1));
  EXPECT_EQ(tier.Stats().bytes, 0u);
  EXPECT_EQ(tier.Stats().entries, 0u);
}

// Writers put blobs of random sizes with random demand, readers get, one
// thread keeps shrinking and growing the budget, and an observer checks the
// invariant bytes <= budget on every snapshot. Afterwards the counter must
// equal the charge recomputed from the resident entries.
void HammerTier(std::unique_ptr<EvictionPolicy> policy) {
  constexpr uint64_t kBudget = 256 * 1024;
  Tier tier("hammered", kBudget, std::move(policy));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> violations{0};
  std::atomic<uint64_t> snapshots{0};

  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&tier, w] {
      std::mt19937_64 rng(1234 + w);
      for (int i = 0; i < 20000; ++i) {
        const Key key = rng() % 2000;
        tier.Put(key, BlobOfPayload(rng() % 8192), static_cast<uint32_t>(rng() % 5));
        if (i % 7 == 0) tier.Erase(rng() % 2000);
        if (i % 5 == 0) tier.SetDemand(rng() % 2000, static_cast<uint32_t>(rng() % 5));
      }
    });
  }
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&tier, r] {
      std::mt19937_64 rng(99 + r);
      for (int i = 0; i < 40000; ++i) {
        BlobPtr blob = tier.Get(rng() % 2000);
        if (blob != nullptr && blob->bytes.size() > 8192) std::abort();
      }
    });
  }
  std::thread resizer([&tier, &stop] {
    std::mt19937_64 rng(7);
    while (!stop.load()) {
      tier.SetBudget(kBudget / 4 + rng() % (kBudget - kBudget / 4));
      std::this_thread::yield();
    }
    tier.SetBudget(kBudget / 2);
  });
  std::thread observer([&] {
    while (!stop.load()) {
      const TierStats stats = tier.Stats();
      if (stats.bytes > stats.budget_bytes) violations.fetch_add(1);
      snapshots.fetch_add(1);
    }
  });
  for (auto& t : threads) t.join();
  stop.store(true);
  resizer.join();
  observer.join();

  const TierStats stats = tier.Stats();
  EXPECT_EQ(violations.load(), 0u);
  EXPECT_GT(snapshots.load(), 0u);
  EXPECT_LE(stats.bytes, kBudget / 2);
  EXPECT_EQ(stats.bytes, tier.RecomputeChargedBytes());
  EXPECT_GT(stats.inserts, 0u);
  EXPECT_GT(stats.evictions, 0u);
}

TEST(TierConcurrencyTest, RefCountBudgetNeverExceeded) {
  HammerTier(std::make_unique<RefCountEviction>());
}

TEST(TierConcurrencyTest, LruBudgetNeverExceeded) { HammerTier(std::make_unique<LruEviction>()); }

}  // namespace
}  // namespace galley::cache
