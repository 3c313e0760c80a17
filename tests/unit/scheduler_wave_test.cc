// Whole waves planned by the Scheduler with a hand-moved clock and fake
// rings: who is produced for while a peer is slow or stalled, and what the
// jobs still share. Nothing is prepared; no thread, no real time.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "galley/scheduling/scheduler.h"
#include "tests/unit/empty_image_folder.h"

namespace galley {
namespace {

using std::chrono::milliseconds;

class ManualClock final : public SchedulerClock {
 public:
  TimePoint Now() const override { return now_; }
  void Advance(std::chrono::nanoseconds d) { now_ += d; }

 private:
  TimePoint now_ = TimePoint{} + std::chrono::hours(1);
};

// Rings as counts: a claim takes a free slot and makes it ready (as if the
// wave were published at once); Consume moves ready batches back to free.
class FakeRings final : public RingView {
 public:
  RingOccupancy Occupancy(const ServedJob& job) const override { return rings_.at(job.id); }
  std::optional<uint32_t> Claim(ServedJob& job) override {
    RingOccupancy& r = rings_.at(job.id);
    if (r.free == 0) return std::nullopt;
    r.free--;
    r.ready++;
    return r.slots - 1 - r.free;
  }
  // The fake keeps no generations: every ready slot is of the current one.
  uint32_t ReadyOf(const ServedJob& job, uint64_t) const override {
    return rings_.at(job.id).ready;
  }
  void Set(uint64_t job, uint32_t free, uint32_t ready) { rings_[job] = {4, free, ready}; }
  void Consume(uint64_t job) {
    RingOccupancy& r = rings_.at(job);
    if (r.ready > 0) {
      r.ready--;
      r.free++;
    }
  }
  const RingOccupancy& at(uint64_t job) const { return rings_.at(job); }

 private:
  std::map<uint64_t, RingOccupancy> rings_;
};

class SchedulerWaveTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(folder_.Create(kItems)); }

  std::unique_ptr<Scheduler> MakeScheduler(int hold_budget_ms) {
    SchedulerOptions options;
    options.gate.hold_budget_per_epoch = milliseconds(hold_budget_ms);
    return std::make_unique<Scheduler>(options, nullptr, nullptr,
                                       SchedulerHooks{.clock = &clock_, .rings = &rings_});
  }

  // Adds a job over the whole dataset whose consumer is waiting.
  void AddJob(Scheduler& scheduler, uint64_t id, const std::string& policy, uint32_t free,
              uint32_t ready) {
    JobPlan plan = testing::PlanOverAllItems(folder_.dataset(), kBatch, policy);
    plan.spec.epochs = 1;
    plan.epoch_size = kItems;
    plan.opened_at = clock_.Now() - std::chrono::seconds(10);
    auto job = testing::Served(id, std::move(plan));
    rings_.Set(id, free, ready);
    jobs_[id] = job;
    ASSERT_TRUE(scheduler.OnJobOpened(job).ok());
    scheduler.OnConsumerReady(id);
  }

  struct Wave {
    bool planned = false;
    std::map<uint64_t, size_t> items;  // per job
    uint32_t flags_of_1 = 0;
    size_t loads = 0;
  };
  Wave Plan(Scheduler& scheduler) {
    std::vector<std::unique_ptr<SlotPlan>> plans;
    std::vector<ItemTask> tasks;
    Wave wave;
    wave.planned = scheduler.PlanOneWave(&plans, &tasks);
    for (const auto& plan : plans) {
      wave.items[plan->job->id] = plan->items.size();
      if (plan->job->id == 1) wave.flags_of_1 = plan->flags;
    }
    wave.loads = tasks.size();
    return wave;
  }

  static constexpr int kItems = 64;
  static constexpr uint32_t kBatch = 8;
  testing::EmptyImageFolder folder_;
  ManualClock clock_;
  FakeRings rings_;
  std::map<uint64_t, std::shared_ptr<ServedJob>> jobs_;
};

TEST_F(SchedulerWaveTest, JobsWithFreeSlotsShareOneWave) {
  auto scheduler = MakeScheduler(100);
  AddJob(*scheduler, 1, "dsa", 4, 0);
  AddJob(*scheduler, 2, "dsa", 4, 0);
  const Wave wave = Plan(*scheduler);
  ASSERT_TRUE(wave.planned);
  EXPECT_EQ(wave.items.at(1), kBatch);
  EXPECT_EQ(wave.items.at(2), kBatch);
  EXPECT_EQ(wave.loads, kBatch);  // identical sets started together share every item
}

TEST_F(SchedulerWaveTest, StarvingJobIsProducedAloneWhilePeerIsFull) {
  auto scheduler = MakeScheduler(100);
  AddJob(*scheduler, 1, "dsa", 4, 0);
  AddJob(*scheduler, 2, "dsa", 0, 4);
  // Its consumer is waiting: held for the peer for GateOptions::thin_hold at most.
  EXPECT_FALSE(Plan(*scheduler).planned);
  clock_.Advance(GateOptions{}.thin_hold);
  const Wave wave = Plan(*scheduler);
  ASSERT_TRUE(wave.planned);
  EXPECT_EQ(wave.items.at(1), kBatch);
  EXPECT_EQ(wave.items.count(2), 0u);
}

TEST_F(SchedulerWaveTest, IndependentNeverHolds) {
  auto scheduler = MakeScheduler(100);
  AddJob(*scheduler, 1, "independent", 1, 3);
  AddJob(*scheduler, 2, "independent", 0, 4);
  const Wave wave = Plan(*scheduler);
  ASSERT_TRUE(wave.planned);
  EXPECT_EQ(wave.items.at(1), kBatch);
}

TEST_F(SchedulerWaveTest, BufferedJobIsHeldUntilPeerFreesASlotAndThenShares) {
  auto scheduler = MakeScheduler(100);
  AddJob(*scheduler, 1, "dsa", 4, 0);
  AddJob(*scheduler, 2, "dsa", 4, 0);
  ASSERT_TRUE(Plan(*scheduler).planned);  // both start together
  rings_.Set(1, 1, 3);
  rings_.Set(2, 0, 4);
  clock_.Advance(milliseconds(5));
  EXPECT_FALSE(Plan(*scheduler).planned);  // job 1 is held for job 2
  clock_.Advance(milliseconds(5));
  rings_.Set(2, 1, 3);
  const Wave wave = Plan(*scheduler);
  ASSERT_TRUE(wave.planned);
  EXPECT_EQ(wave.items.at(1), kBatch);
  EXPECT_EQ(wave.items.at(2), kBatch);
  EXPECT_EQ(wave.loads, kBatch);
}

// A stalled peer (its consumer holds every slot): the other job runs its
// whole epoch, losing at most the hold budget in total, and is never held
// again in that epoch once the budget is spent.
TEST_F(SchedulerWaveTest, StalledPeerCostsOneThinHoldOverAnEpoch) {
  constexpr int kBudgetMs = 30;
  auto scheduler = MakeScheduler(kBudgetMs);
  AddJob(*scheduler, 1, "dsa", 4, 0);
  AddJob(*scheduler, 2, "dsa", 4, 0);
  ASSERT_TRUE(Plan(*scheduler).planned);  // one shared batch each
  rings_.Set(2, 0, 4);                    // job 2 stops here
  size_t delivered = kBatch;
  bool last = false;
  // Job 1's consumer takes a batch every third look (6 ms); a produced wave
  // is ready at once (fake rings); looks are 2 ms apart, as the daemon polls
  // a held job.
  for (int step = 0; step < 1000 && !last; ++step) {
    if (step % 3 == 0) rings_.Consume(1);
    const Wave wave = Plan(*scheduler);
    clock_.Advance(milliseconds(2));
    if (!wave.planned) continue;
    ASSERT_EQ(wave.items.count(2), 0u);
    delivered += wave.items.at(1);
    last = wave.flags_of_1 & wire::kLastInEpoch;
  }
  ASSERT_TRUE(last);
  EXPECT_EQ(delivered, static_cast<size_t>(kItems));
  // Held once, when the peer was first found full, for at most one thin
  // hold plus one poll; never again for a peer that stays full.
  const auto held = std::chrono::nanoseconds(jobs_.at(1)->counters.held_ns.load());
  EXPECT_GT(held, milliseconds(0));
  EXPECT_LE(held, GateOptions{}.thin_hold + milliseconds(2));
  EXPECT_EQ(jobs_.at(1)->counters.holds.load(), 1u);
  EXPECT_EQ(jobs_.at(2)->counters.held_ns.load(), 0u);
}

TEST_F(SchedulerWaveTest, RingFullSecondsCountsASlowConsumerWithBatchesReady) {
  auto scheduler = MakeScheduler(100);
  AddJob(*scheduler, 1, "dsa", 4, 0);
  ASSERT_TRUE(Plan(*scheduler).planned);
  rings_.Set(1, 0, 4);
  Plan(*scheduler);
  clock_.Advance(milliseconds(250));
  rings_.Set(1, 1, 3);
  std::vector<std::unique_ptr<SlotPlan>> plans;
  std::vector<ItemTask> tasks;
  ASSERT_TRUE(scheduler->PlanOneWave(&plans, &tasks));
  EXPECT_EQ(plans.front()->job->counters.blocked_ns.load(),
            static_cast<uint64_t>(std::chrono::nanoseconds(milliseconds(250)).count()));
}

}  // namespace
}  // namespace galley
