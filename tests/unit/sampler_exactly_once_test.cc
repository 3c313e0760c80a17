// Property test: under thousands of random schedules of arrivals, departures,
// new epochs and masks, every policy hands each job every item of its subset
// exactly once per epoch, gives every ready job with items exactly one item
// per round, and (for the index-backed policies) keeps the membership index
// consistent with a brute-force model.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "server/sampler/membership_sampler.h"
#include "server/sampler/sampling_policy.h"

namespace galley {
namespace {

struct ModelJob {
  std::set<ItemId> remaining;
  std::set<ItemId> received;
  size_t subset_size = 0;
};

// Compares the index's atoms and overlaps against the model's sets.
void CheckIndex(const MembershipIndex& index, const std::map<JobId, ModelJob>& jobs) {
  std::map<ItemId, SlotMask> expected;
  for (const auto& [job, model] : jobs) {
    const int slot = index.SlotOf(job);
    ASSERT_GE(slot, 0);
    for (ItemId item : model.remaining) expected[item] |= SlotBit(slot);
  }
  std::map<ItemId, SlotMask> actual;
  for (size_t a = 0; a < index.atom_count(); ++a) {
    ASSERT_GT(index.atom_size(a), 0u);
    for (size_t k = 0; k < index.atom_size(a); ++k) {
      ASSERT_TRUE(actual.emplace(index.atom_item(a, k), index.atom_members(a)).second);
    }
  }
  ASSERT_EQ(actual, expected);
  for (const auto& [job_a, model_a] : jobs) {
    for (const auto& [job_b, model_b] : jobs) {
      size_t both = 0;
      for (ItemId item : model_a.remaining) both += model_b.remaining.count(item);
      ASSERT_EQ(index.Overlap(index.SlotOf(job_a), index.SlotOf(job_b)), both);
    }
  }
}

void RunSchedule(const std::string& policy_name, uint64_t seed) {
  std::mt19937_64 schedule(seed);
  auto made = MakeSamplingPolicy({policy_name, seed});
  ASSERT_TRUE(made.ok());
  std::unique_ptr<SamplingPolicy> policy = std::move(made).value();
  const auto* indexed = dynamic_cast<const MembershipSampler*>(policy.get());

  const ItemId universe = 1 + schedule() % 40;
  std::map<JobId, ModelJob> jobs;
  JobId next_job = 0;
  auto add_job = [&](JobId job) {
    std::vector<ItemId> subset;
    for (ItemId item = 0; item < universe; ++item) {
      if (schedule() % 3 != 0) subset.push_back(item);
    }
    std::shuffle(subset.begin(), subset.end(), schedule);
    ASSERT_TRUE(policy->AddJob(job, subset).ok());
    ModelJob& model = jobs[job];
    model.remaining = std::set<ItemId>(subset.begin(), subset.end());
    model.received.clear();
    model.subset_size = subset.size();
  };
  const int steps = 20 + static_cast<int>(schedule() % 60);
  for (int step = 0; step < steps; ++step) {
    const uint64_t action = schedule() % 10;
    if (action == 0 && jobs.size() < 6) {
      add_job(next_job++);
    } else if (action == 1 && !jobs.empty()) {
      // A departure, possibly of the largest job, mid-epoch.
      auto it = std::next(jobs.begin(), static_cast<long>(schedule() % jobs.size()));
      policy->RemoveJob(it->first);
      jobs.erase(it);
    } else {
      std::map<JobId, bool> ready;
      for (const auto& [job, model] : jobs) ready[job] = schedule() % 4 != 0;
      Round round;
      const bool any = policy->Next([&](JobId job) { return ready.at(job); }, &round);
      size_t expected_receivers = 0;
      for (const auto& [job, model] : jobs)
        expected_receivers += ready[job] && !model.remaining.empty();
      ASSERT_EQ(any, expected_receivers > 0);
      ASSERT_EQ(round.requests(), expected_receivers);
      std::set<ItemId> items_this_round;
      for (const Delivery& delivery : round.deliveries) {
        ASSERT_FALSE(delivery.receivers.empty());
        ASSERT_TRUE(items_this_round.insert(delivery.item).second) << "item split over deliveries";
        for (JobId job : delivery.receivers) {
          ASSERT_TRUE(jobs.count(job));
          ASSERT_TRUE(ready[job]) << "masked job received an item";
          ModelJob& model = jobs[job];
          ASSERT_EQ(model.remaining.erase(delivery.item), 1u) << "item not due to job " << job;
          ASSERT_TRUE(model.received.insert(delivery.item).second);
        }
      }
      // A job that finished its epoch starts the next one.
      for (auto& [job, model] : jobs) {
        if (model.remaining.empty() && model.subset_size > 0 && schedule() % 2 == 0) {
          ASSERT_EQ(model.received.size(), model.subset_size);
          policy->RemoveJob(job);
          add_job(job);
        }
      }
    }
    for (const auto& [job, model] : jobs) ASSERT_EQ(policy->Remaining(job), model.remaining.size());
    if (indexed != nullptr) CheckIndex(indexed->index(), jobs);
  }
  // Drain: everything left is delivered, once.
  Round round;
  while (policy->Next([](JobId) { return true; }, &round)) {
    for (const Delivery& delivery : round.deliveries) {
      for (JobId job : delivery.receivers) {
        ASSERT_EQ(jobs[job].remaining.erase(delivery.item), 1u);
        ASSERT_TRUE(jobs[job].received.insert(delivery.item).second);
      }
    }
  }
  for (const auto& [job, model] : jobs) {
    EXPECT_TRUE(model.remaining.empty());
    EXPECT_EQ(model.received.size(), model.subset_size);
  }
}

class ExactlyOnceTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ExactlyOnceTest, RandomSchedules) {
  for (uint64_t seed = 1; seed <= 2000; ++seed) {
    RunSchedule(GetParam(), seed);
    if (HasFatalFailure()) {
      ADD_FAILURE() << "schedule seed " << seed;
      return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, ExactlyOnceTest,
                         ::testing::Values("dsa", "dsa-chain", "independent", "lockstep"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace galley
