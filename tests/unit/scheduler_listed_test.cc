// Listed epochs (JobSpec::epoch_items) planned by the Scheduler over fake
// rings: the client's list served in its order, repeats included; a random
// policy's order over the list's distinct items with the repeats after; no
// epoch produced before its list; SeekEpoch's checks; and the cache's
// demand counts with an item listed twice. Nothing is prepared.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "galley/cache/tiered_cache.h"
#include "galley/scheduling/scheduler.h"
#include "tests/unit/empty_image_folder.h"

namespace galley {
namespace {

// Rings that always have a free slot: every wave takes one batch per job.
class OpenRings final : public RingView {
 public:
  RingOccupancy Occupancy(const ServedJob&) const override { return {4, 4, 0}; }
  std::optional<uint32_t> Claim(ServedJob&) override { return 0; }
  uint32_t ReadyOf(const ServedJob&, uint64_t) const override { return 0; }
};

class ListedEpochTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(folder_.Create(kItems)); }

  std::unique_ptr<Scheduler> MakeScheduler(cache::TieredCache* cache = nullptr) {
    return std::make_unique<Scheduler>(SchedulerOptions{}, nullptr, cache,
                                       SchedulerHooks{.rings = &rings_});
  }

  // A job whose client lists `items` for epoch 0, under `policy`.
  std::shared_ptr<ServedJob> AddListedJob(Scheduler& scheduler, uint64_t id,
                                          const std::string& policy,
                                          const std::vector<uint64_t>& items) {
    JobPlan plan = testing::PlanOverAllItems(folder_.dataset(), kBatch, policy);
    plan.spec.shuffle = policy != "sequential";
    plan.spec.epoch_items = items;
    plan.epoch_size = plan.ShardSize();
    auto job = testing::Served(id, std::move(plan));
    EXPECT_TRUE(job->ListEpoch(0, items).ok());
    EXPECT_TRUE(scheduler.OnJobOpened(job).ok());
    scheduler.OnConsumerReady(id);
    return job;
  }

  // The items of the waves planned until the epoch's last batch, and
  // whether that batch was flagged last.
  std::vector<ItemId> PlanEpoch(Scheduler& scheduler, bool* last) {
    std::vector<ItemId> served;
    *last = false;
    for (int wave = 0; wave < 100 && !*last; ++wave) {
      std::vector<std::unique_ptr<SlotPlan>> plans;
      std::vector<ItemTask> tasks;
      if (!scheduler.PlanOneWave(&plans, &tasks)) break;
      for (const auto& plan : plans) {
        served.insert(served.end(), plan->items.begin(), plan->items.end());
        *last = (plan->flags & wire::kLastInEpoch) != 0;
      }
    }
    return served;
  }

  static constexpr int kItems = 20;
  static constexpr uint32_t kBatch = 3;
  testing::EmptyImageFolder folder_;
  OpenRings rings_;
};

TEST_F(ListedEpochTest, TheListIsServedInItsOrderAndTheNextEpochWaitsForItsList) {
  auto scheduler = MakeScheduler();
  const std::vector<uint64_t> first = {7, 3, 7, 19, 0, 3, 12};  // 7 and 3 twice
  auto job = AddListedJob(*scheduler, 1, "sequential", first);
  EXPECT_EQ(job->plan->BatchesPerEpoch(), 3u);
  bool last = false;
  const std::vector<ItemId> served = PlanEpoch(*scheduler, &last);
  EXPECT_TRUE(last);
  EXPECT_EQ(served, std::vector<ItemId>(first.begin(), first.end()));
  // Epoch 1 has no list yet: nothing is planned.
  std::vector<std::unique_ptr<SlotPlan>> plans;
  std::vector<ItemTask> tasks;
  EXPECT_FALSE(scheduler->PlanOneWave(&plans, &tasks));

  const std::vector<uint64_t> second = {1, 2, 3, 4, 5, 6, 6};
  ASSERT_TRUE(scheduler->OnJobSought(*job, {.epoch = 1, .generation = 1, .items = &second}).ok());
  EXPECT_EQ(PlanEpoch(*scheduler, &last), std::vector<ItemId>(second.begin(), second.end()));
  EXPECT_TRUE(last);
}

TEST_F(ListedEpochTest, ARandomPolicyDrawsTheDistinctItemsThenTheRepeats) {
  auto scheduler = MakeScheduler();
  const std::vector<uint64_t> list = {4, 9, 4, 11, 2, 9, 4, 15};
  AddListedJob(*scheduler, 1, "dsa", list);
  bool last = false;
  const std::vector<ItemId> served = PlanEpoch(*scheduler, &last);
  EXPECT_TRUE(last);
  ASSERT_EQ(served.size(), list.size());
  std::vector<ItemId> distinct(served.begin(), served.begin() + 5);
  std::sort(distinct.begin(), distinct.end());
  EXPECT_EQ(distinct, (std::vector<ItemId>{2, 4, 9, 11, 15}));
  EXPECT_EQ(std::vector<ItemId>(served.begin() + 5, served.end()), (std::vector<ItemId>{4, 9, 4}));
}

TEST_F(ListedEpochTest, SeekChecksTheListAgainstTheJob) {
  auto scheduler = MakeScheduler();
  auto job = AddListedJob(*scheduler, 1, "sequential", {0, 1, 2, 3});
  const std::vector<uint64_t> shorter = {0, 1, 2};
  const std::vector<uint64_t> outside = {0, 1, 2, kItems};
  Status refused = scheduler->OnJobSought(*job, {.epoch = 1, .generation = 1, .items = &shorter});
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("lists 3 items where the job expects 4"), std::string::npos)
      << refused.ToString();
  refused = scheduler->OnJobSought(*job, {.epoch = 1, .generation = 1, .items = &outside});
  EXPECT_NE(refused.message().find("lists item 20 but the dataset has 20"), std::string::npos)
      << refused.ToString();
  refused = scheduler->OnJobSought(*job, {.epoch = 1, .generation = 1});
  EXPECT_NE(refused.message().find("needs 'items'"), std::string::npos);

  // A job of the daemon's own split takes no list.
  JobPlan plain_plan;
  plain_plan.spec.batch_size = kBatch;
  plain_plan.dataset = folder_.dataset();
  plain_plan.subset = {0, 1, 2};
  plain_plan.epoch_size = 3;
  plain_plan.policy = "dsa";
  auto plain = testing::Served(2, std::move(plain_plan));
  ASSERT_TRUE(scheduler->OnJobOpened(plain).ok());
  const std::vector<uint64_t> list = {0, 1, 2};
  EXPECT_EQ(scheduler->OnJobSought(*plain, {.epoch = 1, .generation = 1, .items = &list}).code(),
            StatusCode::kInvalidArgument);
}

TEST_F(ListedEpochTest, ARepeatedItemCountsItsDemandOncePerCopy) {
  cache::CacheOptions options;
  options.cache_bytes = 1 << 20;
  options.decoded_arena = false;
  auto created = cache::TieredCache::Create(options);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::unique_ptr<cache::TieredCache> cache = std::move(created).value();
  for (const char* policy : {"sequential", "dsa"}) {
    auto scheduler = MakeScheduler(cache.get());
    // Items 5 and 8 twice; a batch of 3 leaves 5's second copy for later.
    auto job = AddListedJob(*scheduler, 1, policy, {5, 8, 5, 8, 1, 2});
    auto key = [](ItemId item) { return cache::MakeKey(0, item); };
    std::vector<std::unique_ptr<SlotPlan>> plans;
    std::vector<ItemTask> tasks;
    ASSERT_TRUE(scheduler->PlanOneWave(&plans, &tasks));
    uint32_t left = 0;
    for (ItemId item : {5u, 8u, 1u, 2u}) left += cache->demand().Demand(key(item));
    EXPECT_EQ(left, 3u) << policy;  // 6 listed, 3 served
    // Leaving the epoch early drops exactly what was left, copies included.
    const std::vector<uint64_t> next = {0, 1, 2, 3, 4, 6};
    ASSERT_TRUE(scheduler->OnJobSought(*job, {.epoch = 1, .generation = 1, .items = &next}).ok());
    for (ItemId item : {5u, 8u, 1u, 2u}) EXPECT_EQ(cache->demand().Demand(key(item)), 0u);
    scheduler->OnJobClosed(1);
    for (ItemId item : {0u, 1u, 2u}) EXPECT_EQ(cache->demand().Demand(key(item)), 0u);
  }
}

}  // namespace
}  // namespace galley
