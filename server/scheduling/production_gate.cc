#include "galley/scheduling/production_gate.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace galley {
namespace {

class SteadyClock final : public SchedulerClock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
};

}  // namespace

const SchedulerClock* SchedulerClock::Steady() {
  static const SteadyClock clock;
  return &clock;
}

const char* GateDecisionName(GateDecision decision) {
  switch (decision) {
    case GateDecision::kIdle:
      return "idle";
    case GateDecision::kFull:
      return "full";
    case GateDecision::kAwaitStart:
      return "await-start";
    case GateDecision::kHold:
      return "hold";
    case GateDecision::kProduce:
      return "produce";
  }
  return "?";
}

ProductionGate::ProductionGate(GateOptions options) : options_(options) {}

void ProductionGate::EndHold(JobState& state, SchedulerClock::TimePoint now) {
  if (!state.hold_since) return;
  const auto held = now - *state.hold_since;
  state.held += held;
  state.held_this_epoch += held;
  state.hold_since.reset();
}

void ProductionGate::NoteDeadline(SchedulerClock::TimePoint t) {
  if (!next_deadline_ || t < *next_deadline_) next_deadline_ = t;
}

uint32_t ProductionGate::ReadyThreshold(const GateInput& job) const {
  return std::max<uint32_t>(
      1, static_cast<uint32_t>(std::ceil(options_.hold_min_ready_fraction * job.ring.slots)));
}

bool ProductionGate::MayHoldBuffered(const GateInput& job) const {
  return job.sharing && options_.hold_budget_per_epoch > std::chrono::nanoseconds::zero() &&
         job.ring.ready >= ReadyThreshold(job);
}

bool ProductionGate::MayHoldThin(const GateInput& job, const JobState& state,
                                 SchedulerClock::TimePoint now) const {
  if (!job.sharing || options_.hold_budget_per_epoch <= std::chrono::nanoseconds::zero()) {
    return false;
  }
  const auto ongoing =
      state.hold_since ? now - *state.hold_since : std::chrono::nanoseconds::zero();
  return ongoing < options_.thin_hold &&
         state.held_this_epoch + ongoing < options_.hold_budget_per_epoch;
}

std::vector<GateDecision> ProductionGate::Decide(std::span<const GateInput> jobs,
                                                 SchedulerClock::TimePoint now) {
  next_deadline_.reset();
  any_held_ = false;
  // Per dataset group: is a peer about to start, is a peer unable to take a
  // batch?
  std::unordered_set<const void*> awaiting_start;
  // Peers that are full but not stalled (GateOptions::peer_stall).
  std::unordered_set<const void*> has_full_peer;
  // Peers that became full less than thin_hold ago: a consumer descheduled
  // for a moment. A peer full for longer is slow or stalled, and waiting
  // for it would cost every thin hold of the budget for nothing.
  std::unordered_set<const void*> has_just_full_peer;
  for (const GateInput& job : jobs) {
    JobState& state = states_[job.job];
    if (state.epoch != job.epoch || state.generation != job.generation) {
      EndHold(state, now);
      state.held_this_epoch = std::chrono::nanoseconds::zero();
      state.epoch = job.epoch;
      state.generation = job.generation;
    }
    // Ring-full time: from the first wave that finds no free slot to the
    // first that finds one.
    if (job.started && job.ring.free == 0) {
      if (!state.full_since) state.full_since = now;
    } else if (state.full_since) {
      state.ring_full += now - *state.full_since;
      state.full_since.reset();
    }
    if (job.finished) continue;
    if (!job.consumer_ready) {
      awaiting_start.insert(job.group);
      continue;
    }
    if (job.ring.free == 0) {
      const auto full_for =
          state.full_since ? now - *state.full_since : std::chrono::nanoseconds::zero();
      if (full_for < options_.peer_stall) has_full_peer.insert(job.group);
      if (full_for < options_.thin_hold) has_just_full_peer.insert(job.group);
    }
  }

  std::vector<GateDecision> decisions;
  std::vector<bool> buffered_holds;
  decisions.reserve(jobs.size());
  for (const GateInput& job : jobs) {
    JobState& state = states_[job.job];
    GateDecision decision;
    bool buffered = false;
    if (job.finished || !job.consumer_ready) {
      decision = GateDecision::kIdle;
    } else if (!job.started && awaiting_start.count(job.group) &&
               now - *(state.ready_since ? state.ready_since : (state.ready_since = now)) <
                   options_.start_grace) {
      decision = GateDecision::kAwaitStart;
      NoteDeadline(*state.ready_since + options_.start_grace);
    } else if (job.ring.free == 0) {
      decision = GateDecision::kFull;
    } else if (has_full_peer.count(job.group) && MayHoldBuffered(job)) {
      decision = GateDecision::kHold;
      buffered = true;
    } else if (has_just_full_peer.count(job.group) && MayHoldThin(job, state, now)) {
      decision = GateDecision::kHold;
    } else {
      decision = GateDecision::kProduce;
    }
    decisions.push_back(decision);
    buffered_holds.push_back(buffered);
  }
  // A hold only delays the start of a wave: a job is never left out of a
  // wave that runs anyway (it would wait for that whole wave).
  const bool wave_runs =
      std::find(decisions.begin(), decisions.end(), GateDecision::kProduce) != decisions.end();
  for (size_t i = 0; i < jobs.size(); ++i) {
    JobState& state = states_[jobs[i].job];
    if (decisions[i] == GateDecision::kHold && wave_runs) decisions[i] = GateDecision::kProduce;
    if (decisions[i] != GateDecision::kHold) {
      EndHold(state, now);
      continue;
    }
    any_held_ = true;
    if (buffered_holds[i]) {
      EndHold(state, now);
      continue;
    }
    // The consumer may be waiting: this is what the budget bounds.
    if (!state.hold_since) {
      state.hold_since = now;
      ++state.holds;
    }
    NoteDeadline(*state.hold_since + std::min(options_.thin_hold, options_.hold_budget_per_epoch -
                                                                      state.held_this_epoch));
  }
  return decisions;
}

GateTimes ProductionGate::Times(uint64_t job, SchedulerClock::TimePoint now) const {
  GateTimes times;
  auto it = states_.find(job);
  if (it == states_.end()) return times;
  const JobState& state = it->second;
  const auto holding =
      state.hold_since ? now - *state.hold_since : std::chrono::nanoseconds::zero();
  times.ring_full = state.ring_full +
                    (state.full_since ? now - *state.full_since : std::chrono::nanoseconds::zero());
  times.held = state.held + holding;
  times.held_this_epoch = state.held_this_epoch + holding;
  times.holds = state.holds;
  return times;
}

void ProductionGate::Forget(uint64_t job) { states_.erase(job); }

}  // namespace galley
