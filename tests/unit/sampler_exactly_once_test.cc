// Property test: under thousands of random schedules of arrivals, departures,
// new epochs and masks, every policy hands each job every item of its subset
// exactly once per epoch, gives every ready job with items exactly one item
// per round, and (for the index-backed policies) keeps the membership index
// consistent with a brute-force model.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "galley/sampler/membership_sampler.h"
#include "galley/sampler/sampling_policy.h"
#include "tests/unit/sampler_schedule.h"

namespace galley {
namespace {

// Compares the index's atoms and overlaps against the model's sets.
void CheckIndex(const MembershipIndex& index, const ModelJobs& jobs) {
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
  auto made = MakeSamplingPolicy({policy_name, seed});
  ASSERT_TRUE(made.ok());
  std::unique_ptr<SamplingPolicy> policy = std::move(made).value();
  const auto* indexed = dynamic_cast<const MembershipSampler*>(policy.get());
  ScheduleHooks hooks;
  if (indexed != nullptr) {
    hooks.check_step = [&](const ModelJobs& jobs) { CheckIndex(indexed->index(), jobs); };
  }
  RandomSchedule(seed).Run(*policy, hooks);
}

class ExactlyOnceTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ExactlyOnceTest, RandomSchedules) {
  ForEachScheduleSeed(2000, [&](uint64_t seed) { RunSchedule(GetParam(), seed); });
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
