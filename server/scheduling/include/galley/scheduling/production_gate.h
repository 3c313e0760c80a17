// ProductionGate: the scheduler's timing decisions, kept apart from rings,
// samplers and threads so that they can be tested deterministically.
//
// Each wave the scheduler describes every job (GateInput: its ring's
// occupancy, its dataset group, whether its consumer has asked for a batch)
// together with the time read from its injected SchedulerClock, and the gate
// answers, per job, whether to produce a batch for it now (GateDecision).
// Jobs are never kept in step: a job with a free slot is produced for at
// once, with two bounded exceptions (docs/sampling.md, "Jobs at different
// speeds"):
//
// - start grace: before its first batch, a job whose consumer is ready waits
//   up to GateOptions::start_grace (counted from its consumer's first
//   request) for open peers on its dataset whose consumers have not asked
//   yet, so that jobs launched together (a sweep, evaluation jobs behind a
//   barrier) start their first epoch together; once per job.
// - hold: a job of a sharing policy (not "independent") may be held while a
//   peer on its dataset has no free slot, so that the next wave serves both.
//   While the job's consumer has at least GateOptions::hold_min_ready_fraction
//   of its ring ready it is held until the peer frees a slot: that costs
//   the consumer nothing (it is not waiting; production resumes as soon as
//   the buffer falls below the threshold). Below the threshold the consumer
//   may be waiting, so a hold lasts at most GateOptions::thin_hold and all
//   such holds of an epoch at most GateOptions::hold_budget_per_epoch; with
//   the budget spent the job is produced for as soon as its buffer is thin.
//   A held job joins any wave that runs anyway (a hold only delays the
//   start of a wave, never leaves a job out of one). A thin hold waits only
//   for a peer found full less than thin_hold ago, and no hold waits for a
//   peer full for GateOptions::peer_stall or longer. So a slower peer costs
//   a job at most that budget per epoch, and a stalled one a single thin
//   hold.
//
// The gate also keeps each job's ring-full time (no free slot: its consumer
// holds or has not taken everything produced), its held time and how many
// holds that time was made of.
//
// Not thread-safe: owned and called by the scheduler under its mutex.
#ifndef GALLEY_SERVER_SCHEDULING_PRODUCTION_GATE_H_
#define GALLEY_SERVER_SCHEDULING_PRODUCTION_GATE_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace galley {

// The time the scheduler decides by. The daemon uses the steady clock;
// tests pass one they move by hand.
class SchedulerClock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~SchedulerClock() = default;
  virtual TimePoint Now() const = 0;
  // The process's steady clock; never null, lives forever.
  static const SchedulerClock* Steady();
};

// How many of a job's ring slots are in each state, as the scheduler sees
// them when it plans a wave.
struct RingOccupancy {
  uint32_t slots = 0;  // slots in the ring (the job's prefetch)
  uint32_t free = 0;   // can be claimed for a new batch
  uint32_t ready = 0;  // published, not taken by the consumer yet
};

struct GateOptions {
  // Most time per epoch a job whose consumer has little buffered may be held
  // so that a peer that cannot take a batch yet shares the next wave. 0
  // disables holding altogether (no coupling at all).
  // Larger values keep jobs of similar speeds in step (more sharing when
  // their consumers are slower than galleyd) at a cost to a faster job of at
  // most this much per epoch.
  std::chrono::nanoseconds hold_budget_per_epoch = std::chrono::milliseconds(100);
  // While at least this fraction of a job's ring (and at least one batch)
  // is ready for its consumer, holding does not make the consumer wait: the
  // job is held, free of charge, until the peer frees a slot.
  double hold_min_ready_fraction = 0.5;
  // Below that, a job is held for at most this long at a time (its consumer
  // may be waiting), charged to the budget: a peer whose consumer was
  // descheduled for a moment frees a slot within milliseconds, and the jobs
  // then go on sharing rounds instead of drifting apart. 0: never.
  std::chrono::nanoseconds thin_hold = std::chrono::milliseconds(10);
  // A peer whose ring has been full this long is stalled (SIGSTOP, a
  // consumer that keeps its batches, one much slower than the rest): no job
  // is held for it at all, so the others keep sharing among themselves
  // rather than each running to its own buffer's threshold.
  std::chrono::nanoseconds peer_stall = std::chrono::seconds(1);
  // How long a job that is ready to start waits for jobs on the same
  // dataset that were opened but whose consumers have not asked for a
  // batch yet.
  std::chrono::nanoseconds start_grace = std::chrono::milliseconds(100);
};

// One job, as the scheduler describes it to the gate for one wave.
struct GateInput {
  uint64_t job = 0;
  const void* group = nullptr;  // jobs with the same group share a sampler
  bool sharing = true;          // the group's policy shares items between jobs
  bool finished = false;        // delivered all its epochs
  bool consumer_ready = false;  // its consumer has asked for a batch
  bool started = false;         // a batch has been planned for it
  SchedulerClock::TimePoint opened_at{};
  // Restarts the per-epoch budget when either changes.
  uint64_t epoch = 0;
  uint64_t generation = 0;
  RingOccupancy ring;
};

enum class GateDecision {
  kIdle,        // finished, or its consumer has not asked for a batch
  kFull,        // no free slot
  kAwaitStart,  // start grace: a peer on its dataset is about to start
  kHold,        // held briefly so that a full peer can share the next wave
  kProduce,     // claim a slot and plan a batch now
};

const char* GateDecisionName(GateDecision decision);

// A job's accumulated times.
struct GateTimes {
  std::chrono::nanoseconds ring_full{0};  // no free slot, including an ongoing stretch
  // Held for peers while the consumer had little buffered (what the budget
  // bounds), over all epochs, including a hold in progress.
  std::chrono::nanoseconds held{0};
  std::chrono::nanoseconds held_this_epoch{0};
  // How many such holds began, over all epochs: a count the clock does not
  // blur (a stalled peer costs a job one, however late the scheduler wakes
  // to end it).
  uint64_t holds = 0;
};

class ProductionGate {
 public:
  explicit ProductionGate(GateOptions options = {});

  const GateOptions& options() const { return options_; }

  // Decides for every job in `jobs` (one decision per input, same order)
  // and updates their times. `now` must not go backwards.
  std::vector<GateDecision> Decide(std::span<const GateInput> jobs, SchedulerClock::TimePoint now);

  // When the last Decide must be repeated even if nothing wakes the
  // scheduler: the earliest end of a start grace or of a held job's budget.
  // A held job is also released when its consumer's buffer falls below the
  // threshold, which nothing signals, so the caller also polls while
  // any_held() is true.
  std::optional<SchedulerClock::TimePoint> next_deadline() const { return next_deadline_; }
  bool any_held() const { return any_held_; }

  // The job's times as of `now`.
  GateTimes Times(uint64_t job, SchedulerClock::TimePoint now) const;
  // Forgets a job that closed.
  void Forget(uint64_t job);

 private:
  struct JobState {
    uint64_t epoch = 0;
    uint64_t generation = 0;
    std::chrono::nanoseconds ring_full{0};
    std::chrono::nanoseconds held{0};
    std::chrono::nanoseconds held_this_epoch{0};
    uint64_t holds = 0;
    std::optional<SchedulerClock::TimePoint> full_since;
    std::optional<SchedulerClock::TimePoint> hold_since;
    // When its consumer first asked for a batch (start grace counts from here).
    std::optional<SchedulerClock::TimePoint> ready_since;
  };

  // Ends a hold in progress and charges it.
  static void EndHold(JobState& state, SchedulerClock::TimePoint now);
  // Ready batches from which holding does not make the consumer wait.
  uint32_t ReadyThreshold(const GateInput& job) const;
  bool MayHoldBuffered(const GateInput& job) const;
  bool MayHoldThin(const GateInput& job, const JobState& state,
                   SchedulerClock::TimePoint now) const;
  void NoteDeadline(SchedulerClock::TimePoint t);

  const GateOptions options_;
  std::unordered_map<uint64_t, JobState> states_;
  std::optional<SchedulerClock::TimePoint> next_deadline_;
  bool any_held_ = false;
};

}  // namespace galley

#endif  // GALLEY_SERVER_SCHEDULING_PRODUCTION_GATE_H_
