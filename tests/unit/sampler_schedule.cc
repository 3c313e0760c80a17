#include "tests/unit/sampler_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <vector>

namespace galley {

RandomSchedule::RandomSchedule(uint64_t seed)
    : random_(seed), universe_(static_cast<ItemId>(1 + random_() % 40)) {}

// A random two thirds of the universe, in random order, as `job`'s new epoch.
void RandomSchedule::AddJob(SamplingPolicy& policy, const ScheduleHooks& hooks, JobId job) {
  std::vector<ItemId> subset;
  for (ItemId item = 0; item < universe_; ++item) {
    if (random_() % 3 != 0) subset.push_back(item);
  }
  std::shuffle(subset.begin(), subset.end(), random_);
  const JobSamplingOptions options =
      hooks.epoch_options ? hooks.epoch_options(random_) : JobSamplingOptions{};
  ASSERT_TRUE(policy.AddJob(job, subset, options).ok());
  ModelJob& model = jobs_[job];
  model.remaining = std::set<ItemId>(subset.begin(), subset.end());
  model.received.clear();
  model.subset_size = subset.size();
  model.options = options;
}

// One round with a random mask, checked against the model; then every job
// that finished its epoch may start the next one.
void RandomSchedule::PlayRound(SamplingPolicy& policy, const ScheduleHooks& hooks) {
  std::map<JobId, bool> ready;
  for (const auto& [job, model] : jobs_) ready[job] = random_() % 4 != 0;
  Round round;
  const bool any = policy.Next([&](JobId job) { return ready.at(job); }, &round);
  size_t expected_receivers = 0;
  for (const auto& [job, model] : jobs_) {
    expected_receivers += ready[job] && !model.remaining.empty();
  }
  ASSERT_EQ(any, expected_receivers > 0);
  ASSERT_EQ(round.requests(), expected_receivers);
  std::set<ItemId> items_this_round;
  for (const Delivery& delivery : round.deliveries) {
    ASSERT_FALSE(delivery.receivers.empty());
    ASSERT_TRUE(items_this_round.insert(delivery.item).second) << "item split over deliveries";
    for (JobId job : delivery.receivers) {
      ASSERT_TRUE(jobs_.count(job));
      ASSERT_TRUE(ready[job]) << "masked job received an item";
      ModelJob& model = jobs_[job];
      ASSERT_EQ(model.remaining.erase(delivery.item), 1u) << "item not due to job " << job;
      ASSERT_TRUE(model.received.insert(delivery.item).second);
    }
  }
  for (auto& [job, model] : jobs_) {
    if (model.remaining.empty() && model.subset_size > 0 && random_() % 2 == 0) {
      ASSERT_EQ(model.received.size(), model.subset_size);
      policy.RemoveJob(job);
      AddJob(policy, hooks, job);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

void RandomSchedule::Run(SamplingPolicy& policy, const ScheduleHooks& hooks) {
  JobId next_job = 0;
  const int steps = 20 + static_cast<int>(random_() % 60);
  for (int step = 0; step < steps; ++step) {
    if (hooks.before_step) hooks.before_step(random_);
    const uint64_t action = random_() % 10;
    if (action == 0 && jobs_.size() < 6) {
      AddJob(policy, hooks, next_job++);
    } else if (action == 1 && !jobs_.empty()) {
      // A departure, possibly of the largest job, mid-epoch.
      auto it = std::next(jobs_.begin(), static_cast<long>(random_() % jobs_.size()));
      policy.RemoveJob(it->first);
      EXPECT_EQ(policy.Substitutions(it->first).substitutions, 0u);
      jobs_.erase(it);
    } else {
      PlayRound(policy, hooks);
    }
    if (::testing::Test::HasFatalFailure()) return;
    for (const auto& [job, model] : jobs_) {
      ASSERT_EQ(policy.Remaining(job), model.remaining.size());
      const SubstitutionStats stats = policy.Substitutions(job);
      ASSERT_LE(stats.substitutions, stats.budget);
      ASSERT_LE(stats.substitutions, model.received.size());
    }
    if (hooks.check_step) {
      hooks.check_step(jobs_);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  // Drain: everything left is delivered, once.
  Round round;
  while (policy.Next([](JobId) { return true; }, &round)) {
    for (const Delivery& delivery : round.deliveries) {
      for (JobId job : delivery.receivers) {
        ASSERT_EQ(jobs_[job].remaining.erase(delivery.item), 1u);
        ASSERT_TRUE(jobs_[job].received.insert(delivery.item).second);
      }
    }
  }
  for (const auto& [job, model] : jobs_) {
    EXPECT_TRUE(model.remaining.empty());
    EXPECT_EQ(model.received.size(), model.subset_size);
    const SubstitutionStats stats = policy.Substitutions(job);
    EXPECT_LE(stats.substitutions, stats.budget);
  }
}

void ForEachScheduleSeed(uint64_t count, const std::function<void(uint64_t seed)>& run_one) {
  for (uint64_t seed = 1; seed <= count; ++seed) {
    run_one(seed);
    if (::testing::Test::HasFatalFailure()) {
      ADD_FAILURE() << "schedule seed " << seed;
      return;
    }
  }
}

}  // namespace galley
