// A job's DDP split and batch arithmetic (DistributedSampler semantics),
// without a daemon: equal shard sizes with padding or dropping, disjointness
// apart from the padding, and a split pinned to exact values so that every
// galley build on every machine agrees with every other rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <vector>

#include "galley/scheduling/served_job.h"

namespace galley {
namespace {

JobPlan MakePlan(uint32_t items, uint32_t rank, uint32_t world, bool shard_drop_last,
                 bool shuffle = true) {
  JobPlan plan;
  plan.spec.seed = 7;
  plan.spec.rank = rank;
  plan.spec.world_size = world;
  plan.spec.shard_drop_last = shard_drop_last;
  plan.spec.shuffle = shuffle;
  plan.spec.batch_size = 2;
  plan.subset.resize(items);
  std::iota(plan.subset.begin(), plan.subset.end(), 0);
  return plan;
}

std::unique_ptr<ServedJob> Serve(JobPlan plan) {
  return std::make_unique<ServedJob>(std::make_shared<const JobPlan>(std::move(plan)));
}

std::unique_ptr<ServedJob> MakeJob(uint32_t items, uint32_t rank, uint32_t world,
                                   bool shard_drop_last, bool shuffle = true) {
  return Serve(MakePlan(items, rank, world, shard_drop_last, shuffle));
}

TEST(DistributedSplitTest, ShardsAreEqualDisjointApartFromPaddingAndCoverTheSubset) {
  for (uint32_t n : {1u, 5u, 10u, 13u, 64u}) {
    for (uint32_t world : {1u, 2u, 3u, 4u, 7u}) {
      for (bool drop : {false, true}) {
        SCOPED_TRACE(testing::Message() << "n=" << n << " world=" << world << " drop=" << drop);
        const uint64_t shard = drop ? n / world : (n + world - 1) / world;
        std::map<ItemId, int> times;
        for (uint32_t rank = 0; rank < world; ++rank) {
          auto job = MakeJob(n, rank, world, drop);
          const auto items = job->EpochItems(3);
          ASSERT_EQ(items.size(), world == 1 ? n : shard);
          EXPECT_EQ(job->plan->ShardSize(), items.size());
          std::vector<ItemId> sorted = items;
          std::sort(sorted.begin(), sorted.end());
          EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
          for (ItemId item : items) times[item]++;
        }
        const uint64_t positions = world == 1 ? n : shard * world;
        if (positions >= n) {
          EXPECT_EQ(times.size(), n);  // the union is the subset
        }
        uint64_t repeats = 0;
        for (const auto& [item, count] : times) repeats += count - 1;
        EXPECT_EQ(repeats, positions > n ? positions - n : 0);  // only the padding repeats
      }
    }
  }
}

TEST(DistributedSplitTest, TheSplitIsPinned) {
  // galley's portable generator (xoshiro256** + Lemire), not std::shuffle:
  // these values (seed 7, epoch 0, 10 items, 3 ranks; 5 and 6 are the
  // padding) must never change, or ranks of different builds disagree.
  EXPECT_EQ(MakeJob(10, 0, 3, false)->EpochItems(0), (std::vector<ItemId>{0, 1, 4, 5}));
  EXPECT_EQ(MakeJob(10, 1, 3, false)->EpochItems(0), (std::vector<ItemId>{5, 6, 8, 9}));
  EXPECT_EQ(MakeJob(10, 2, 3, false)->EpochItems(0), (std::vector<ItemId>{2, 3, 6, 7}));
  // shuffle=false is DistributedSampler(shuffle=False): positions r, r + world, ...
  EXPECT_EQ(MakeJob(10, 1, 3, false, false)->EpochItems(0), (std::vector<ItemId>{1, 4, 7, 0}));
  EXPECT_EQ(MakeJob(10, 1, 3, true, false)->EpochItems(0), (std::vector<ItemId>{1, 4, 7}));
}

TEST(DistributedSplitTest, BatchTargetsAddUpToTheShard) {
  JobPlan job = MakePlan(13, 1, 4, false);  // 4 items per rank
  job.spec.batch_size = 3;
  EXPECT_EQ(job.BatchesPerEpoch(), 2u);
  EXPECT_EQ(job.BatchTarget(0), 3u);
  EXPECT_EQ(job.BatchTarget(1), 1u);
  EXPECT_EQ(job.BatchTarget(2), 0u);
  job.spec.drop_last = true;
  EXPECT_EQ(job.BatchesPerEpoch(), 1u);
  EXPECT_EQ(job.BatchTarget(0), 3u);
}

TEST(DistributedSplitTest, ResumeLeavesOutTheConsumedItemsOfTheStartEpochOnly) {
  JobPlan plan = MakePlan(10, 0, 1, false, false);
  plan.spec.start_epoch = 2;
  plan.spec.resume_consumed = {0, 3, 9};
  auto job = Serve(std::move(plan));
  EXPECT_EQ(job->EpochItems(2, /*resuming=*/true), (std::vector<ItemId>{1, 2, 4, 5, 6, 7, 8}));
  EXPECT_EQ(job->EpochItems(2, /*resuming=*/false).size(), 10u);
  EXPECT_EQ(job->EpochItems(3, /*resuming=*/true).size(), 10u);
}

TEST(DistributedSplitTest, SubstitutesComeFromTheShardAndAvoidKnownFailures) {
  auto job = MakeJob(13, 2, 4, false);
  const auto shard = job->EpochItems(1);
  for (uint32_t attempt = 0; attempt < 50; ++attempt) {
    const ItemId failed = shard[attempt % shard.size()];
    const ItemId pick =
        job->Substitute(1, failed, attempt, [&](ItemId item) { return item == shard[0]; });
    EXPECT_NE(std::find(shard.begin(), shard.end(), pick), shard.end());
    EXPECT_NE(pick, failed);
    EXPECT_NE(pick, shard[0]);
  }
  // Nothing else to try: the failed item itself.
  auto single = MakeJob(1, 0, 1, false);
  EXPECT_EQ(single->Substitute(0, 0, 1, [](ItemId) { return false; }), 0u);
}

}  // namespace
}  // namespace galley
