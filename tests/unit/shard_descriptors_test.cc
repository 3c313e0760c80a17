// The process-wide cache of open shard descriptors: each set within its own
// share, all sets within the total, least recently used closed first; a
// released set holds nothing; a reader's descriptor outlives its eviction.
// Descriptors here are real (dup of /dev/null), so "closed" is checked with
// fcntl, not inferred.
#include "galley/dataset/shard_descriptors.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <thread>
#include <vector>

namespace galley {
namespace {

ShardDescriptorCache::Descriptor NewDescriptor() {
  return std::make_shared<const UniqueFd>(::open("/dev/null", O_RDONLY | O_CLOEXEC));
}

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(ShardDescriptorCacheTest, EachSetStaysWithinItsShareAndAllWithinTheTotal) {
  ShardDescriptorCache cache(5);
  const uint64_t a = cache.NewSet(), b = cache.NewSet();
  std::vector<int> fds;
  for (uint32_t shard = 0; shard < 4; ++shard) {
    auto fd = NewDescriptor();
    fds.push_back(fd->get());
    cache.Insert(a, shard, std::move(fd), /*set_capacity=*/3);
  }
  // Set a's share is 3: shard 0, the least recently used, was closed.
  EXPECT_EQ(cache.Counts().open, 3u);
  EXPECT_EQ(cache.Find(a, 0), nullptr);
  EXPECT_FALSE(IsOpen(fds[0]));
  ASSERT_NE(cache.Find(a, 1), nullptr);  // now a's most recent
  for (uint32_t shard = 0; shard < 3; ++shard) cache.Insert(b, shard, NewDescriptor(), 3);
  // Six would be open; the total is 5, so a's least recent (shard 2) went.
  const ShardDescriptorCounts counts = cache.Counts();
  EXPECT_EQ(counts.open, 5u);
  EXPECT_EQ(counts.capacity, 5u);
  EXPECT_EQ(counts.evicted, 2u);
  EXPECT_EQ(cache.Find(a, 2), nullptr);
  EXPECT_FALSE(IsOpen(fds[2]));
  EXPECT_NE(cache.Find(a, 1), nullptr);
  EXPECT_NE(cache.Find(a, 3), nullptr);
}

TEST(ShardDescriptorCacheTest, ReleasingASetClosesItsDescriptorsOnly) {
  ShardDescriptorCache cache(100);
  const uint64_t a = cache.NewSet(), b = cache.NewSet();
  std::vector<int> fds;
  for (uint32_t shard = 0; shard < 4; ++shard) {
    auto fd = NewDescriptor();
    fds.push_back(fd->get());
    cache.Insert(a, shard, std::move(fd), 128);
  }
  cache.Insert(b, 0, NewDescriptor(), 128);
  cache.Release(a);
  for (int fd : fds) EXPECT_FALSE(IsOpen(fd));
  EXPECT_EQ(cache.Counts().open, 1u);
  EXPECT_EQ(cache.Counts().released, 4u);
  EXPECT_NE(cache.Find(b, 0), nullptr);
  cache.Release(a);  // nothing left: a no-op
  EXPECT_EQ(cache.Counts().released, 4u);
}

TEST(ShardDescriptorCacheTest, AReadersDescriptorStaysOpenUntilItLetsGo) {
  ShardDescriptorCache cache(1);
  const uint64_t set = cache.NewSet();
  auto first = cache.Insert(set, 0, NewDescriptor(), 1);
  const int held = first->get();
  cache.Insert(set, 1, NewDescriptor(), 1);  // evicts shard 0 from the cache
  EXPECT_EQ(cache.Find(set, 0), nullptr);
  EXPECT_TRUE(IsOpen(held)) << "closed under a reader";
  first.reset();
  EXPECT_FALSE(IsOpen(held));
}

TEST(ShardDescriptorCacheTest, TheFirstDescriptorInsertedForAShardWins) {
  ShardDescriptorCache cache(4);
  const uint64_t set = cache.NewSet();
  auto mine = cache.Insert(set, 0, NewDescriptor(), 4);
  auto late = NewDescriptor();
  const int late_fd = late->get();
  auto got = cache.Insert(set, 0, std::move(late), 4);
  EXPECT_EQ(got, mine);
  EXPECT_FALSE(IsOpen(late_fd));  // the loser's was dropped
  EXPECT_EQ(cache.Counts().open, 1u);
}

TEST(ShardDescriptorCacheTest, ShedHalfGivesBackTheLeastRecentlyUsed) {
  ShardDescriptorCache cache(10);
  const uint64_t set = cache.NewSet();
  for (uint32_t shard = 0; shard < 6; ++shard) cache.Insert(set, shard, NewDescriptor(), 10);
  cache.ShedHalf();
  EXPECT_EQ(cache.Counts().open, 3u);
  EXPECT_EQ(cache.Find(set, 0), nullptr);
  EXPECT_NE(cache.Find(set, 5), nullptr);
}

TEST(ShardDescriptorCacheTest, ManyThreadsNeverExceedTheTotal) {
  ShardDescriptorCache cache(16);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache] {
      const uint64_t set = cache.NewSet();
      for (uint32_t i = 0; i < 2000; ++i) {
        const uint32_t shard = (i * 7) % 13;
        if (cache.Find(set, shard) == nullptr) cache.Insert(set, shard, NewDescriptor(), 6);
        if (i % 500 == 499) cache.Release(set);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(cache.Counts().open, 16u);
}

}  // namespace
}  // namespace galley
