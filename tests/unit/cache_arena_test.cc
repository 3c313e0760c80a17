// BlobArena: blocks are reused after a free, a full arena refuses instead of
// failing, a blob outlives the arena's last other owner, Populate commits
// memory so that later writes take no page faults, and the decoded tier
// serves arena blobs as it serves heap ones.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "galley/cache/blob_arena.h"
#include "galley/cache/tiered_cache.h"

namespace galley::cache {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr size_t kImageBytes = 500 * 375 * 3;  // a typical decoded ImageNet image

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

std::shared_ptr<BlobArena> NewArena(uint64_t capacity) {
  auto arena = BlobArena::Create(capacity);
  EXPECT_TRUE(arena.ok()) << arena.status().ToString();
  return arena.ok() ? std::move(arena).value() : nullptr;
}

std::unique_ptr<TieredCache> NewCache(const CacheOptions& options) {
  auto cache = TieredCache::Create(options);
  EXPECT_TRUE(cache.ok()) << cache.status().ToString();
  return cache.ok() ? std::move(cache).value() : nullptr;
}

TEST(BlobArenaTest, AFreedBlockIsReusedAndAFullArenaRefuses) {
  auto arena = NewArena(2 * kMiB);
  auto first = arena->Allocate(kImageBytes);
  auto second = arena->Allocate(kImageBytes);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(first->arena_bytes.size(), kImageBytes);
  EXPECT_TRUE(first->bytes.empty());
  // 2 MiB holds three such images, not four.
  auto third = arena->Allocate(kImageBytes);
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(arena->Allocate(kImageBytes), nullptr);
  EXPECT_EQ(arena->Stats().refused, 1u);
  EXPECT_EQ(arena->Stats().blocks, 3u);

  uint8_t* const where = second->arena_bytes.data();
  second.reset();
  EXPECT_EQ(arena->Stats().blocks, 2u);
  auto again = arena->Allocate(kImageBytes);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->arena_bytes.data(), where) << "the freed block is the best fit";
}

TEST(BlobArenaTest, BlocksDoNotOverlapAndKeepTheirBytes) {
  auto arena = NewArena(16 * kMiB);
  std::vector<std::shared_ptr<Blob>> blobs;
  for (int i = 0; i < 20; ++i) {
    auto blob = arena->Allocate(1000 + 4099 * i);
    ASSERT_NE(blob, nullptr);
    std::memset(blob->arena_bytes.data(), i, blob->arena_bytes.size());
    blobs.push_back(std::move(blob));
  }
  for (int i = 0; i < 20; i += 2) blobs[i].reset();  // holes for the next ones
  for (int i = 0; i < 20; i += 2) {
    blobs[i] = arena->Allocate(900 + 4099 * i);
    ASSERT_NE(blobs[i], nullptr);
    std::memset(blobs[i]->arena_bytes.data(), 100 + i, blobs[i]->arena_bytes.size());
  }
  for (int i = 0; i < 20; ++i) {
    const uint8_t want = static_cast<uint8_t>(i % 2 == 0 ? 100 + i : i);
    for (const uint8_t byte : blobs[i]->payload()) ASSERT_EQ(byte, want) << "blob " << i;
  }
}

TEST(BlobArenaTest, ABlobOutlivesItsArenasOtherOwners) {
  auto arena = NewArena(4 * kMiB);
  auto blob = arena->Allocate(kImageBytes);
  ASSERT_NE(blob, nullptr);
  std::weak_ptr<BlobArena> weak = arena;
  arena.reset();
  EXPECT_FALSE(weak.expired()) << "the blob keeps the arena mapped";
  std::memset(blob->arena_bytes.data(), 7, kImageBytes);
  EXPECT_EQ(blob->payload()[kImageBytes - 1], 7);
  blob.reset();
  EXPECT_TRUE(weak.expired());
}

TEST(BlobArenaTest, ChargesTheBlockSizeLikeAHeapPayload) {
  auto arena = NewArena(4 * kMiB);
  auto blob = arena->Allocate(kImageBytes);
  ASSERT_NE(blob, nullptr);
  EXPECT_EQ(ChargedBytes(*blob), kEntryOverheadBytes + kImageBytes);
}

TEST(BlobArenaTest, PopulatedMemoryIsFilledWithoutFaultingItIn) {
  constexpr int kImages = 40;
  const auto fill = [](BlobArena& arena) {
    std::vector<std::shared_ptr<Blob>> blobs;
    const long before = MinorFaults();
    for (int i = 0; i < kImages; ++i) {
      blobs.push_back(arena.Allocate(kImageBytes));
      EXPECT_NE(blobs.back(), nullptr);
      std::memset(blobs.back()->arena_bytes.data(), i, kImageBytes);
    }
    return MinorFaults() - before;
  };
  // Without Populate every 4 KiB page faults on its first write: the test
  // can tell the two apart.
  auto cold = NewArena(64 * kMiB);
  const long cold_faults = fill(*cold);
  EXPECT_GT(cold_faults, kImages * 50);

  auto warm = NewArena(64 * kMiB);
  auto populated = warm->Populate(kImages * (kImageBytes + 4096));
  if (!populated.ok()) GTEST_SKIP() << populated.status().ToString();
  EXPECT_GE(*populated, kImages * kImageBytes);
  EXPECT_EQ(warm->Stats().populated_bytes, *populated);
  const long warm_faults = fill(*warm);
  // A quarter, not zero: under AddressSanitizer the writes also fault in
  // the shadow memory of what they touch, populated or not.
  EXPECT_LT(warm_faults, cold_faults / 4) << "cold: " << cold_faults;
}

TEST(BlobArenaTest, PopulateLeavesBlocksInUseAsTheyAre) {
  auto arena = NewArena(8 * kMiB);
  auto blob = arena->Allocate(kImageBytes);
  ASSERT_NE(blob, nullptr);
  std::memset(blob->arena_bytes.data(), 0xab, kImageBytes);
  auto populated = arena->Populate(8 * kMiB);
  if (!populated.ok()) GTEST_SKIP() << populated.status().ToString();
  EXPECT_EQ(*populated, 8 * kMiB);
  for (const uint8_t byte : blob->payload()) ASSERT_EQ(byte, 0xab);
  EXPECT_EQ(*arena->Populate(kMiB), 8 * kMiB) << "never shrinks";
}

TEST(BlobArenaTest, ConcurrentAllocateFreeAndPopulateKeepEveryBlocksBytes) {
  auto arena = NewArena(64 * kMiB);
  std::atomic<bool> corrupt{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::shared_ptr<Blob>> held;
      for (int i = 0; i < 400; ++i) {
        auto blob = arena->Allocate(1 + (i * 7919 + t * 104729) % (256 << 10));
        if (blob == nullptr) continue;
        const auto mark = static_cast<uint8_t>(t * 50 + i % 50);
        std::memset(blob->arena_bytes.data(), mark, blob->arena_bytes.size());
        held.push_back(std::move(blob));
        if (held.size() > 16) {
          const Blob& old = *held.front();
          const uint8_t want = old.arena_bytes[0];
          for (const uint8_t byte : old.payload()) {
            if (byte != want) corrupt = true;
          }
          held.erase(held.begin());
        }
      }
    });
  }
  threads.emplace_back([&] {
    for (uint64_t to = kMiB; to <= 64 * kMiB; to += kMiB) (void)arena->Populate(to);
  });
  for (auto& thread : threads) thread.join();
  EXPECT_FALSE(corrupt);
  EXPECT_EQ(arena->Stats().blocks, 0u);
}

TEST(TieredCacheArenaTest, DecodedPixelsGoToTheArenaAndFallBackToTheHeapWhenItIsFull) {
  CacheOptions options;
  options.cache_bytes = 2 * kMiB;
  options.split = {0, 100, 0};
  auto cache = NewCache(options);
  ASSERT_NE(cache, nullptr);
  ASSERT_NE(cache->decoded_arena(), nullptr);

  std::vector<uint8_t> pixels(kImageBytes, 9);
  auto in_arena = cache->MakeDecodedBlob(std::move(pixels), 500, 375, 3);
  EXPECT_FALSE(in_arena->arena_bytes.empty());
  EXPECT_EQ(in_arena->payload().size(), kImageBytes);
  EXPECT_EQ(in_arena->payload()[1234], 9);
  EXPECT_EQ(in_arena->width, 500u);
  ASSERT_TRUE(cache->decoded().Put(MakeKey(1, 1), in_arena));
  BlobPtr hit = cache->decoded().Get(MakeKey(1, 1));
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->payload().data(), in_arena->payload().data()) << "served in place";

  // A 24 MiB image has no block in the arena (2 MiB, an eighth and 16 MiB
  // of headroom): it stays on the heap.
  std::vector<uint8_t> large(24 * kMiB, 4);
  const uint8_t* const heap = large.data();
  auto on_heap = cache->MakeDecodedBlob(std::move(large), 4096, 2048, 3);
  EXPECT_TRUE(on_heap->arena_bytes.empty());
  EXPECT_EQ(on_heap->payload().data(), heap) << "moved, not copied";
  EXPECT_EQ(cache->Stats().decoded_arena->refused, 1u);
}

// A tier at its budget admits each newcomer after its block is allocated,
// and images differ in size: the arena's headroom keeps every entry in it.
TEST(TieredCacheArenaTest, AFullTierOfImagesOfManySizesStaysInTheArena) {
  for (const char* eviction : {"refcount", "lru"}) {
    CacheOptions options;
    options.cache_bytes = 32 * kMiB;
    options.split = {0, 100, 0};
    options.eviction = eviction;
    auto cache = NewCache(options);
    ASSERT_NE(cache, nullptr);
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> side(300, 640);
    int on_heap = 0;
    for (uint32_t i = 0; i < 1500; ++i) {
      const int width = side(rng);
      const int height = side(rng);
      std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * 3, 1);
      auto blob = cache->MakeDecodedBlob(std::move(pixels), width, height, 3);
      on_heap += blob->arena_bytes.empty() ? 1 : 0;
      cache->decoded().Put(MakeKey(0, i), std::move(blob), 1 + i % 7);
    }
    const CacheStats stats = cache->Stats();
    EXPECT_EQ(on_heap, 0) << eviction;
    EXPECT_EQ(stats.decoded_arena->refused, 0u) << eviction;
    EXPECT_GT(stats.decoded.evictions, 100u) << eviction << ": the tier was full";
    EXPECT_GT(stats.decoded.bytes, stats.decoded.budget_bytes / 10 * 9) << eviction;
    EXPECT_LE(stats.decoded_arena->allocated_bytes, stats.decoded.budget_bytes) << eviction;
  }
}

TEST(TieredCacheArenaTest, SmallCachesAndCachesThatAskForNoArenaUseTheHeap) {
  CacheOptions options;
  options.cache_bytes = 1000;
  auto small = NewCache(options);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->decoded_arena(), nullptr);
  EXPECT_FALSE(small->Stats().decoded_arena.has_value());

  options.cache_bytes = 64 * kMiB;
  options.decoded_arena = false;
  auto off = NewCache(options);
  ASSERT_NE(off, nullptr);
  EXPECT_EQ(off->decoded_arena(), nullptr);
  auto blob = off->MakeDecodedBlob(std::vector<uint8_t>(30, 1), 10, 1, 3);
  EXPECT_EQ(blob->bytes.size(), 30u);
}

}  // namespace
}  // namespace galley::cache
