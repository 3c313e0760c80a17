// The scheduler's timing decisions (ProductionGate), driven by hand-set
// times and ring occupancies: no real time, no threads.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "galley/scheduling/production_gate.h"

namespace galley {
namespace {

using std::chrono::milliseconds;
using TimePoint = SchedulerClock::TimePoint;

const int kDatasetA = 0;

// A job whose consumer is waiting, with `free` and `ready` of 4 slots.
GateInput Job(uint64_t id, uint32_t free, uint32_t ready, const void* group = &kDatasetA) {
  return GateInput{.job = id,
                   .group = group,
                   .sharing = true,
                   .finished = false,
                   .consumer_ready = true,
                   .started = true,
                   .opened_at = TimePoint{},
                   .epoch = 0,
                   .generation = 0,
                   .ring = {.slots = 4, .free = free, .ready = ready}};
}

TimePoint At(int ms) { return TimePoint{} + milliseconds(1000 + ms); }

GateOptions Options(int hold_budget_ms, int thin_hold_ms = 0) {
  GateOptions options;
  options.hold_budget_per_epoch = milliseconds(hold_budget_ms);
  options.thin_hold = milliseconds(thin_hold_ms);
  options.hold_min_ready_fraction = 0.5;
  options.start_grace = milliseconds(100);
  return options;
}

TEST(ProductionGate, JobWithFreeSlotIsProducedWhilePeerIsFullUnderIndependent) {
  ProductionGate gate(Options(100));
  GateInput fast = Job(1, 2, 2);
  fast.sharing = false;
  GateInput slow = Job(2, 0, 4);
  slow.sharing = false;
  std::vector<GateInput> jobs{fast, slow};
  const auto d = gate.Decide(jobs, At(0));
  EXPECT_EQ(d[0], GateDecision::kProduce);
  EXPECT_EQ(d[1], GateDecision::kFull);
  EXPECT_FALSE(gate.any_held());
}

TEST(ProductionGate, StarvingJobIsProducedAtOnceWhateverItsPeers) {
  ProductionGate gate(Options(100));
  std::vector<GateInput> jobs{Job(1, 4, 0), Job(2, 0, 4), Job(3, 0, 0)};
  const auto d = gate.Decide(jobs, At(0));
  EXPECT_EQ(d[0], GateDecision::kProduce);
  EXPECT_EQ(d[1], GateDecision::kFull);
  EXPECT_EQ(d[2], GateDecision::kFull);
}

TEST(ProductionGate, ThinlyBufferedJobIsHeldAFewMillisecondsAtATimeWithinTheBudget) {
  ProductionGate gate(Options(12, 5));
  std::vector<GateInput> jobs{Job(1, 4, 0), Job(2, 0, 4)};
  // The peer's consumer takes a batch at `t` (a wave refills its ring) and
  // its ring is found full again at `t` + 10.
  auto peer_takes_a_batch = [&](int t) {
    jobs[1].ring.free = 1;
    EXPECT_EQ(gate.Decide(jobs, At(t))[0], GateDecision::kProduce);
    jobs[1].ring.free = 0;
  };
  EXPECT_EQ(gate.Decide(jobs, At(0))[0], GateDecision::kHold);
  ASSERT_TRUE(gate.next_deadline());
  EXPECT_EQ(*gate.next_deadline(), At(5));
  EXPECT_EQ(gate.Decide(jobs, At(4))[0], GateDecision::kHold);
  EXPECT_EQ(gate.Decide(jobs, At(5))[0], GateDecision::kProduce);
  // Each time the peer is found full anew the job may be held again, until
  // the epoch's budget is spent.
  peer_takes_a_batch(10);
  EXPECT_EQ(gate.Decide(jobs, At(20))[0], GateDecision::kHold);
  EXPECT_EQ(gate.Decide(jobs, At(25))[0], GateDecision::kProduce);
  peer_takes_a_batch(30);
  EXPECT_EQ(gate.Decide(jobs, At(40))[0], GateDecision::kHold);
  ASSERT_TRUE(gate.next_deadline());
  EXPECT_EQ(*gate.next_deadline(), At(42));  // 2 ms of the budget left
  EXPECT_EQ(gate.Decide(jobs, At(42))[0], GateDecision::kProduce);
  peer_takes_a_batch(50);
  EXPECT_EQ(gate.Decide(jobs, At(60))[0], GateDecision::kProduce);
  EXPECT_EQ(gate.Times(1, At(60)).held_this_epoch, milliseconds(12));
}

TEST(ProductionGate, WellBufferedJobIsHeldFreeOfChargeUntilPeerFreesASlot) {
  ProductionGate gate(Options(100, 10));
  std::vector<GateInput> jobs{Job(1, 1, 3), Job(2, 0, 4)};
  EXPECT_EQ(gate.Decide(jobs, At(0))[0], GateDecision::kHold);
  EXPECT_TRUE(gate.any_held());
  // Its consumer has half its ring or more: no deadline, nothing charged.
  EXPECT_FALSE(gate.next_deadline());
  EXPECT_EQ(gate.Decide(jobs, At(500))[0], GateDecision::kHold);
  // The peer's consumer releases a slot: both are produced in one wave.
  jobs[1].ring.free = 1;
  jobs[1].ring.ready = 3;
  const auto d = gate.Decide(jobs, At(507));
  EXPECT_EQ(d[0], GateDecision::kProduce);
  EXPECT_EQ(d[1], GateDecision::kProduce);
  EXPECT_EQ(gate.Times(1, At(600)).held, milliseconds(0));
}

TEST(ProductionGate, PeerFullForPeerStallIsNotWaitedFor) {
  ProductionGate gate(Options(100, 10));
  // Job 3 took a batch and stopped: from 1 s on (GateOptions::peer_stall)
  // nobody is held for it, while jobs 1 and 2 still hold for each other.
  std::vector<GateInput> jobs{Job(1, 1, 3), Job(2, 1, 3), Job(3, 0, 4)};
  EXPECT_EQ(gate.Decide(jobs, At(0))[0], GateDecision::kHold);
  EXPECT_EQ(gate.Decide(jobs, At(999))[0], GateDecision::kHold);
  auto d = gate.Decide(jobs, At(1000));
  EXPECT_EQ(d[0], GateDecision::kProduce);
  EXPECT_EQ(d[1], GateDecision::kProduce);
  EXPECT_EQ(d[2], GateDecision::kFull);
  // Job 2's consumer is slower than job 1's: job 1 waits for it again, free
  // of charge, and the two share the wave in which job 2 frees a slot.
  jobs[1].ring.free = 0;
  jobs[1].ring.ready = 4;
  EXPECT_EQ(gate.Decide(jobs, At(1100))[0], GateDecision::kHold);
  jobs[1].ring.free = 1;
  jobs[1].ring.ready = 3;
  d = gate.Decide(jobs, At(1150));
  EXPECT_EQ(d[0], GateDecision::kProduce);
  EXPECT_EQ(d[1], GateDecision::kProduce);
  EXPECT_EQ(gate.Times(1, At(1200)).held, milliseconds(0));
}

TEST(ProductionGate, HeldJobIsProducedForWhenItsBufferThinsWithoutThinHolds) {
  ProductionGate gate(Options(100, 0));
  std::vector<GateInput> jobs{Job(1, 2, 2), Job(2, 0, 4)};
  EXPECT_EQ(gate.Decide(jobs, At(0))[0], GateDecision::kHold);
  jobs[0].ring.ready = 1;  // the consumer took a batch: below half the ring
  EXPECT_EQ(gate.Decide(jobs, At(3))[0], GateDecision::kProduce);
  EXPECT_FALSE(gate.any_held());
  EXPECT_EQ(gate.Times(1, At(3)).held, milliseconds(0));
}

TEST(ProductionGate, StalledPeerCostsOneThinHold) {
  ProductionGate gate(Options(100, 10));
  // Job 2 never frees a slot (SIGSTOP). Job 1's consumer has nothing
  // buffered and is looked at every 2 ms: held for the first 10 ms of the
  // peer's full stretch (a consumer descheduled for a moment would have
  // taken a batch by then), then produced for at every look, this epoch
  // and the next.
  std::vector<GateInput> jobs{Job(1, 4, 0), Job(2, 0, 4)};
  int held_looks = 0;
  for (int t = 0; t <= 400; t += 2) {
    if (gate.Decide(jobs, At(t))[0] == GateDecision::kHold) ++held_looks;
  }
  EXPECT_EQ(held_looks, 5);
  EXPECT_EQ(gate.Times(1, At(400)).held_this_epoch, milliseconds(10));
  jobs[0].epoch = 1;
  EXPECT_EQ(gate.Decide(jobs, At(700))[0], GateDecision::kProduce);
  EXPECT_EQ(gate.Times(1, At(900)).held, milliseconds(10));
  EXPECT_EQ(gate.Times(1, At(900)).held_this_epoch, milliseconds(0));
  EXPECT_EQ(gate.Times(1, At(900)).holds, 1u) << "one hold, however many looks it lasted";
  EXPECT_EQ(gate.Times(2, At(900)).holds, 0u);
}

TEST(ProductionGate, PeerThatKeepsFillingCostsAtMostTheBudgetPerEpoch) {
  ProductionGate gate(Options(100, 10));
  // Job 2's consumer takes a batch every 20 ms and its ring is full again at
  // once: each fresh full stretch may hold job 1 for 10 ms, until the
  // epoch's 100 ms are spent.
  std::vector<GateInput> jobs{Job(1, 4, 0), Job(2, 0, 4)};
  int last_hold = -1;
  for (int t = 0; t <= 1000; t += 2) {
    jobs[1].ring.free = t % 20 == 0 ? 1 : 0;
    if (gate.Decide(jobs, At(t))[0] == GateDecision::kHold) last_hold = t;
  }
  EXPECT_EQ(gate.Times(1, At(1000)).held_this_epoch, milliseconds(100));
  EXPECT_EQ(gate.Times(1, At(1000)).holds, 10u) << "one 10 ms hold per full stretch";
  EXPECT_LT(last_hold, 300);
}

TEST(ProductionGate, SeekRestartsTheBudget) {
  ProductionGate gate(Options(10, 10));
  std::vector<GateInput> jobs{Job(1, 4, 0), Job(2, 0, 4)};
  EXPECT_EQ(gate.Decide(jobs, At(0))[0], GateDecision::kHold);
  EXPECT_EQ(gate.Decide(jobs, At(10))[0], GateDecision::kProduce);
  jobs[1].ring.free = 1;  // the peer takes a batch and is full again at 20
  EXPECT_EQ(gate.Decide(jobs, At(15))[0], GateDecision::kProduce);
  jobs[1].ring.free = 0;
  EXPECT_EQ(gate.Decide(jobs, At(20))[0], GateDecision::kProduce);  // budget spent
  jobs[0].generation = 1;
  EXPECT_EQ(gate.Decide(jobs, At(25))[0], GateDecision::kHold);
}

TEST(ProductionGate, HeldJobsJoinAWaveThatRunsAnyway) {
  static const int kOther = 0;
  ProductionGate gate(Options(100, 10));
  // Jobs 1 (thin) and 2 (buffered) would be held for job 3, whose ring is
  // full; job 4, on another dataset, is produced for, so a wave runs: they
  // join it rather than wait for it to end.
  std::vector<GateInput> jobs{Job(1, 4, 0), Job(2, 1, 3), Job(3, 0, 4), Job(4, 4, 0, &kOther)};
  const auto d = gate.Decide(jobs, At(0));
  EXPECT_EQ(d[0], GateDecision::kProduce);
  EXPECT_EQ(d[1], GateDecision::kProduce);
  EXPECT_EQ(d[2], GateDecision::kFull);
  EXPECT_EQ(d[3], GateDecision::kProduce);
  EXPECT_FALSE(gate.any_held());
  EXPECT_FALSE(gate.next_deadline());
  EXPECT_EQ(gate.Times(1, At(50)).held, milliseconds(0));
}

TEST(ProductionGate, ZeroBudgetNeverHolds) {
  ProductionGate gate(Options(0));
  std::vector<GateInput> jobs{Job(1, 1, 3), Job(2, 0, 4)};
  EXPECT_EQ(gate.Decide(jobs, At(0))[0], GateDecision::kProduce);
}

TEST(ProductionGate, PeersOnOtherDatasetsDoNotHold) {
  static const int kOther = 0;
  ProductionGate gate(Options(100));
  std::vector<GateInput> jobs{Job(1, 1, 3, &kDatasetA), Job(2, 0, 4, &kOther)};
  EXPECT_EQ(gate.Decide(jobs, At(0))[0], GateDecision::kProduce);
}

TEST(ProductionGate, PeerWhoseConsumerIsNotWaitingDoesNotHold) {
  ProductionGate gate(Options(100));
  GateInput peer = Job(2, 0, 4);
  peer.consumer_ready = false;  // opened long ago, never asked for a batch
  std::vector<GateInput> jobs{Job(1, 1, 3), peer};
  const auto d = gate.Decide(jobs, At(0));
  EXPECT_EQ(d[0], GateDecision::kProduce);
  EXPECT_EQ(d[1], GateDecision::kIdle);
}

TEST(ProductionGate, StartGraceWaitsOnceForPeersAboutToStart) {
  ProductionGate gate(Options(100));
  GateInput first = Job(1, 4, 0);
  first.started = false;
  first.opened_at = At(0);
  GateInput second = Job(2, 4, 0);
  second.started = false;
  second.consumer_ready = false;
  second.opened_at = At(10);
  std::vector<GateInput> jobs{first, second};
  // The grace counts from the first wave that finds the job's consumer
  // waiting, however long ago its peers were opened (a barrier in the
  // training scripts can come long after the opens).
  EXPECT_EQ(gate.Decide(jobs, At(20))[0], GateDecision::kAwaitStart);
  ASSERT_TRUE(gate.next_deadline());
  EXPECT_EQ(*gate.next_deadline(), At(120));
  // The peer's consumer asks: both start in the same wave.
  jobs[1].consumer_ready = true;
  auto d = gate.Decide(jobs, At(30));
  EXPECT_EQ(d[0], GateDecision::kProduce);
  EXPECT_EQ(d[1], GateDecision::kProduce);
  // A peer that never asks delays the start by the grace only.
  jobs[1].consumer_ready = false;
  EXPECT_EQ(gate.Decide(jobs, At(119))[0], GateDecision::kAwaitStart);
  EXPECT_EQ(gate.Decide(jobs, At(120))[0], GateDecision::kProduce);
  // A job that has started is never held for a late peer's start.
  jobs[0].started = true;
  jobs[1].opened_at = At(200);
  EXPECT_EQ(gate.Decide(jobs, At(210))[0], GateDecision::kProduce);
}

TEST(ProductionGate, RingFullTimeCountsSlowConsumerIncludingOngoingStretch) {
  ProductionGate gate(Options(100));
  // Job 1's consumer is slower than galleyd: its ring is full although it
  // has batches ready (the case the old scheduler never timed).
  std::vector<GateInput> jobs{Job(1, 0, 4)};
  EXPECT_EQ(gate.Decide(jobs, At(0))[0], GateDecision::kFull);
  EXPECT_EQ(gate.Times(1, At(30)).ring_full, milliseconds(30));  // still full
  jobs[0].ring.free = 1;
  EXPECT_EQ(gate.Decide(jobs, At(40))[0], GateDecision::kProduce);
  jobs[0].ring.free = 0;
  gate.Decide(jobs, At(50));
  jobs[0].ring.free = 2;
  gate.Decide(jobs, At(55));
  EXPECT_EQ(gate.Times(1, At(1000)).ring_full, milliseconds(45));
}

TEST(ProductionGate, FinishedJobIsIdleAndNeverHoldsOthers) {
  ProductionGate gate(Options(100));
  GateInput done = Job(2, 0, 4);
  done.finished = true;
  std::vector<GateInput> jobs{Job(1, 1, 3), done};
  const auto d = gate.Decide(jobs, At(0));
  EXPECT_EQ(d[0], GateDecision::kProduce);
  EXPECT_EQ(d[1], GateDecision::kIdle);
}

TEST(ProductionGate, ForgetDropsTimes) {
  ProductionGate gate(Options(100));
  std::vector<GateInput> jobs{Job(1, 0, 4)};
  gate.Decide(jobs, At(0));
  gate.Forget(1);
  EXPECT_EQ(gate.Times(1, At(10)).ring_full, milliseconds(0));
}

}  // namespace
}  // namespace galley
