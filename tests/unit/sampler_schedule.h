// RandomSchedule: drives one SamplingPolicy through a random schedule of job
// arrivals, departures, new epochs and masks, next to a brute-force model of
// what each job is still owed, and checks the policy contract with gtest
// assertions: every round hands each ready job with items exactly one item it
// still needs and nothing to a masked job, no item is split over deliveries,
// Remaining agrees with the model, substitutions stay within their budget, and
// every job receives its whole subset exactly once per epoch.
//
// Tests of one policy hook their own checks and random inputs in through
// ScheduleHooks. The schedule, the hooks' draws included, is a function of the
// seed alone.
//
// Not thread-safe.
#ifndef GALLEY_TESTS_UNIT_SAMPLER_SCHEDULE_H_
#define GALLEY_TESTS_UNIT_SAMPLER_SCHEDULE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "galley/sampler/sampling_policy.h"

namespace galley {

// What the model knows of one registered job's current epoch.
struct ModelJob {
  std::set<ItemId> remaining;
  std::set<ItemId> received;
  size_t subset_size = 0;
  JobSamplingOptions options;  // as registered for this epoch
};

using ModelJobs = std::map<JobId, ModelJob>;

// Optional additions to a schedule; each receives the schedule's random stream
// where it may draw from it.
struct ScheduleHooks {
  // At the start of every step, before the step's action (e.g. to change what
  // the cache holds).
  std::function<void(std::mt19937_64& random)> before_step;
  // The options of a job's new epoch, drawn after its subset. Unset: defaults.
  std::function<JobSamplingOptions(std::mt19937_64& random)> epoch_options;
  // At the end of every step, after the contract checks.
  std::function<void(const ModelJobs& jobs)> check_step;
};

class RandomSchedule {
 public:
  // Draws the universe of ids, [0, universe()), with 1 <= universe() <= 40.
  explicit RandomSchedule(uint64_t seed);

  ItemId universe() const { return universe_; }

  // Plays the schedule against `policy`, which must have no jobs, then drains
  // it with every job ready. Stops at the first fatal failure.
  void Run(SamplingPolicy& policy, const ScheduleHooks& hooks = {});

 private:
  void AddJob(SamplingPolicy& policy, const ScheduleHooks& hooks, JobId job);
  void PlayRound(SamplingPolicy& policy, const ScheduleHooks& hooks);

  std::mt19937_64 random_;
  ItemId universe_;
  ModelJobs jobs_;
};

// Runs `run_one(seed)` for seeds 1..`count` within the current test, stopping
// at the first seed that ends in a fatal failure and naming it.
void ForEachScheduleSeed(uint64_t count, const std::function<void(uint64_t seed)>& run_one);

}  // namespace galley

#endif  // GALLEY_TESTS_UNIT_SAMPLER_SCHEDULE_H_
