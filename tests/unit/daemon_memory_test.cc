// galleyd's memory setup: the prefaulter commits what the decoded tier may
// take and follows the other tiers' holdings; image-sized heap buffers are
// reused after TuneHeapForImages instead of being mapped afresh.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "galley/daemon/memory_setup.h"
#include "tests/sanitizers.h"

namespace galley {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

bool WaitFor(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

TEST(CachePrefaulterTest, TargetIsTheBudgetLessWhatTheOtherTiersHold) {
  cache::CacheStats stats;
  stats.cache_bytes = 100 * kMiB;
  EXPECT_EQ(CachePrefaulter::Target(stats), 0u) << "no arena, nothing to commit";
  stats.decoded_arena = cache::ArenaStats{.capacity_bytes = 100 * kMiB};
  EXPECT_EQ(CachePrefaulter::Target(stats), 100 * kMiB);
  stats.encoded.bytes = 30 * kMiB;
  stats.augmented.tier.bytes = 10 * kMiB;
  EXPECT_EQ(CachePrefaulter::Target(stats), 60 * kMiB);
  stats.encoded.bytes = 200 * kMiB;
  EXPECT_EQ(CachePrefaulter::Target(stats), 0u);
}

TEST(CachePrefaulterTest, CommitsTheArenaUpToTheTargetAndStops) {
  cache::CacheOptions options;
  options.cache_bytes = 48 * kMiB;
  auto created = cache::TieredCache::Create(options);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  cache::TieredCache* cache = created->get();
  // What the encoded tier holds is not the decoded tier's to take.
  auto encoded = std::make_shared<cache::Blob>();
  encoded->bytes.assign(10 * kMiB, 1);
  ASSERT_TRUE(cache->encoded().Put(cache::MakeKey(1, 1), encoded));
  const uint64_t target = CachePrefaulter::Target(cache->Stats());
  EXPECT_EQ(target, 48 * kMiB - cache->Stats().encoded.bytes);

  CachePrefaulter prefaulter(cache, std::chrono::milliseconds(10));
  prefaulter.Start();
  auto populated = [&] { return cache->decoded_arena()->Stats().populated_bytes; };
  ASSERT_TRUE(WaitFor([&] { return populated() >= target; })) << populated();
  // Two more rounds: the first of them saw the target reached, and whatever
  // it did about it was done before the second began.
  const uint64_t rounds = prefaulter.rounds();
  ASSERT_TRUE(WaitFor([&] { return prefaulter.rounds() >= rounds + 2; }));
  EXPECT_LT(populated(), target + 4096) << "it stops at the target";

  // Room the encoded tier gives up is committed next.
  ASSERT_TRUE(cache->encoded().Erase(cache::MakeKey(1, 1)));
  EXPECT_TRUE(WaitFor([&] { return populated() >= 48 * kMiB; })) << populated();
  prefaulter.Stop();
}

TEST(CachePrefaulterTest, KeepsTheNodesReserve) {
  constexpr uint64_t kGiB = 1024 * kMiB;
  // The reserve is an eighth of the node, at least 256 MiB.
  EXPECT_TRUE(CachePrefaulter::NodeCanSpare({64 * kGiB, 8 * kGiB + 8 * kMiB}, 8 * kMiB));
  EXPECT_FALSE(CachePrefaulter::NodeCanSpare({64 * kGiB, 8 * kGiB + 7 * kMiB}, 8 * kMiB));
  EXPECT_FALSE(CachePrefaulter::NodeCanSpare({kGiB, 260 * kMiB}, 8 * kMiB));
  EXPECT_FALSE(CachePrefaulter::NodeCanSpare({}, 8 * kMiB)) << "unreadable: commit nothing";

  // A 48 MiB cache on a node with 24 MiB above its reserve: the prefaulter
  // commits the 24 MiB the node can spare, in 8 MiB steps, and stops.
  cache::CacheOptions options;
  options.cache_bytes = 48 * kMiB;
  auto created = cache::TieredCache::Create(options);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  cache::TieredCache* cache = created->get();
  auto populated = [&] { return cache->decoded_arena()->Stats().populated_bytes; };
  std::atomic<int> reads{0};
  auto memory = [&] {
    ++reads;
    return NodeMemory{kGiB, 256 * kMiB + 24 * kMiB - populated()};
  };
  CachePrefaulter prefaulter(cache, std::chrono::milliseconds(10), memory);
  prefaulter.Start();
  // Reads 1-3 find room for a step each; the fourth finds none and ends it.
  ASSERT_TRUE(WaitFor([&] { return reads >= 4; })) << reads;
  EXPECT_EQ(populated(), 24 * kMiB);
  prefaulter.Stop();
  EXPECT_EQ(reads, 4) << "it stopped for good";
}

TEST(HeapTuningTest, ImageSizedBuffersAreReusedInsteadOfMappedAfresh) {
#ifdef GALLEY_TEST_UNDER_ASAN
  GTEST_SKIP() << "AddressSanitizer's allocator replaces glibc malloc, which this test is about";
#endif
  TuneHeapForImages();
  constexpr size_t kImageBytes = 500 * 375 * 3;
  // One round to grow the heap, then rounds that must reuse it.
  const auto round = [] {
    std::vector<std::unique_ptr<uint8_t[]>> buffers;
    for (int i = 0; i < 4; ++i) {
      buffers.emplace_back(new uint8_t[kImageBytes]);
      std::memset(buffers.back().get(), i + 1, kImageBytes);
    }
  };
  round();
  const long before = MinorFaults();
  for (int i = 0; i < 50; ++i) round();
  // Mapped afresh, each round would fault 4 x 138 pages.
  EXPECT_LT(MinorFaults() - before, 50) << "image buffers are being mapped and unmapped";
}

}  // namespace
}  // namespace galley
