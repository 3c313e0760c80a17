// The SamplingPolicy contract that does not need statistics: the factory,
// argument errors, and the shape of a round.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <span>
#include <vector>

#include "galley/sampler/sampling_policy.h"

namespace galley {
namespace {

// Every policy galley knows (galley/sampling_policies.h).
std::vector<std::string> PolicyNames() {
  std::vector<std::string> names;
  for (const SamplingPolicyName& policy : kSamplingPolicies) names.emplace_back(policy.name);
  return names;
}
const std::vector<std::string> kPolicies = PolicyNames();

std::unique_ptr<SamplingPolicy> Make(const std::string& name, uint64_t seed = 1) {
  Result<std::unique_ptr<SamplingPolicy>> policy = MakeSamplingPolicy({name, seed});
  EXPECT_TRUE(policy.ok()) << policy.status().ToString();
  return std::move(policy).value();
}

bool AllReady(JobId) { return true; }

TEST(SamplingPolicyTest, FactoryKnowsEveryPolicyByName) {
  for (const SamplingPolicyName& policy : kSamplingPolicies) {
    EXPECT_EQ(Make(std::string(policy.name))->name(), policy.name);
    EXPECT_EQ(ParseSamplingPolicy(policy.name), policy.kind);
    EXPECT_EQ(SamplingPolicyNameOf(policy.kind), policy.name);
  }
  EXPECT_EQ(Make("dsa")->name(), SamplerOptions{}.policy);
  // The names users see in messages and flags: every policy but the order
  // of shuffle=false.
  EXPECT_EQ(RandomOrderPolicyList(), "dsa, dsa-chain, independent, lockstep or ods");
  EXPECT_FALSE(IsRandomOrderPolicy("sequential"));
  EXPECT_FALSE(ParseSamplingPolicy("DSA").has_value());
}

TEST(SamplingPolicyTest, FactoryRejectsUnknownName) {
  Result<std::unique_ptr<SamplingPolicy>> policy = MakeSamplingPolicy({"random", 0});
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.status().code(), StatusCode::kInvalidArgument);
}

TEST(SamplingPolicyTest, RejectsDuplicateIdsAndJobsWithoutSideEffects) {
  for (const std::string& name : kPolicies) {
    SCOPED_TRACE(name);
    auto policy = Make(name);
    const std::vector<ItemId> good = {1, 2, 3};
    const std::vector<ItemId> twice = {4, 5, 4};
    ASSERT_TRUE(policy->AddJob(7, good).ok());
    EXPECT_EQ(policy->AddJob(7, good).code(), StatusCode::kInvalidArgument);
    if (name == "sequential") {
      // The walk of a given order (a client's list) takes an item twice, at
      // each of its places; a job of its own shows it.
      auto walk = Make(name);
      ASSERT_TRUE(walk->AddJob(8, twice).ok());
      std::vector<ItemId> walked;
      Round round;
      while (walk->Next(AllReady, &round)) walked.push_back(round.deliveries.at(0).item);
      EXPECT_EQ(walked, twice);
    } else {
      EXPECT_EQ(policy->AddJob(8, twice).code(), StatusCode::kInvalidArgument);
    }
    EXPECT_EQ(policy->Remaining(8), 0u);
    EXPECT_EQ(policy->Remaining(7), 3u);
    // The failed job left nothing behind: only job 7's items come out.
    Round round;
    std::vector<ItemId> seen;
    while (policy->Next(AllReady, &round)) {
      ASSERT_EQ(round.deliveries.size(), 1u);
      EXPECT_EQ(round.deliveries[0].receivers, std::vector<JobId>{7});
      seen.push_back(round.deliveries[0].item);
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, good);
  }
}

TEST(SamplingPolicyTest, RefusesMoreThanMaxJobs) {
  for (const std::string& name : kPolicies) {
    SCOPED_TRACE(name);
    auto policy = Make(name);
    const std::vector<ItemId> items = {0, 1};
    for (JobId job = 0; job < kMaxJobsPerDataset; ++job)
      ASSERT_TRUE(policy->AddJob(job, items).ok());
    EXPECT_EQ(policy->AddJob(1000, items).code(), StatusCode::kResourceExhausted);
    policy->RemoveJob(3);
    EXPECT_TRUE(policy->AddJob(1000, items).ok());
  }
}

TEST(SamplingPolicyTest, EveryReadyJobGetsExactlyOneItemPerRound) {
  for (const std::string& name : kPolicies) {
    SCOPED_TRACE(name);
    auto policy = Make(name);
    std::vector<ItemId> a(100), b(60);
    std::iota(a.begin(), a.end(), 0);
    std::iota(b.begin(), b.end(), 70);
    ASSERT_TRUE(policy->AddJob(1, a).ok());
    ASSERT_TRUE(policy->AddJob(2, b).ok());
    ASSERT_TRUE(policy->AddJob(3, {}).ok());
    Round round;
    // Job 2 masked: only job 1 may appear.
    ASSERT_TRUE(policy->Next([](JobId job) { return job != 2; }, &round));
    ASSERT_EQ(round.requests(), 1u);
    EXPECT_EQ(round.deliveries[0].receivers, std::vector<JobId>{1});
    EXPECT_EQ(policy->Remaining(2), 60u);
    ASSERT_TRUE(policy->Next(AllReady, &round));
    EXPECT_EQ(round.requests(), 2u);
    EXPECT_FALSE(policy->Next([](JobId job) { return job == 3; }, &round));
    EXPECT_TRUE(round.deliveries.empty());
  }
}

TEST(SamplingPolicyTest, EqualSeedsGiveEqualDecisions) {
  for (const std::string& name : kPolicies) {
    SCOPED_TRACE(name);
    std::vector<std::vector<ItemId>> runs;
    for (int run = 0; run < 2; ++run) {
      auto policy = Make(name, 99);
      std::vector<ItemId> a(50), b(50);
      std::iota(a.begin(), a.end(), 0);
      std::iota(b.begin(), b.end(), 25);
      ASSERT_TRUE(policy->AddJob(1, a).ok());
      ASSERT_TRUE(policy->AddJob(2, b).ok());
      Round round;
      std::vector<ItemId> items;
      while (policy->Next(AllReady, &round)) {
        for (const Delivery& d : round.deliveries) items.push_back(d.item);
      }
      runs.push_back(items);
    }
    EXPECT_EQ(runs[0], runs[1]);
  }
}

// One job's order for an epoch, drawn alone.
std::vector<ItemId> AloneOrder(SamplingPolicy& policy, JobId job, std::span<const ItemId> items,
                               uint64_t job_seed) {
  JobSamplingOptions options;
  options.seed = job_seed;
  EXPECT_TRUE(policy.AddJob(job, items, options).ok());
  Round round;
  std::vector<ItemId> order;
  while (policy.Next(AllReady, &round)) {
    for (const Delivery& d : round.deliveries) order.push_back(d.item);
  }
  policy.RemoveJob(job);
  return order;
}

TEST(SamplingPolicyTest, AJobAlonesOrderIsAFunctionOfItsOwnSeed) {
  // Whatever the policy's seed, the job id and what the policy did before:
  // the daemon's seed, the job ids and the history differ across restarts.
  std::vector<ItemId> items(40);
  std::iota(items.begin(), items.end(), 100);
  for (const std::string& name : RandomOrderPolicyNames()) {
    SCOPED_TRACE(name);
    auto first = Make(name, 1);
    auto second = Make(name, 2);
    AloneOrder(*second, 9, items, 5);  // some history
    const auto a = AloneOrder(*first, 1, items, 7);
    const auto b = AloneOrder(*second, 3, items, 7);
    const auto c = AloneOrder(*second, 3, items, 8);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    std::vector<ItemId> sorted = a;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, items);
  }
}

TEST(SamplingPolicyTest, SequentialWalksTheGivenOrderAndSharesIt) {
  auto policy = Make("sequential");
  const std::vector<ItemId> order = {5, 1, 9, 3, 7};
  ASSERT_TRUE(policy->AddJob(1, order).ok());
  ASSERT_TRUE(policy->AddJob(2, order).ok());
  Round round;
  std::vector<ItemId> items;
  while (policy->Next(AllReady, &round)) {
    ASSERT_EQ(round.deliveries.size(), 1u);  // both jobs take the same item: one load
    EXPECT_EQ(round.deliveries[0].receivers.size(), 2u);
    items.push_back(round.deliveries[0].item);
  }
  EXPECT_EQ(items, order);
}

// Each job's order when jobs 1 and 2 with these seeds draw side by side over
// the same items; with `masks`, one of them is masked every third round
// (first one, then the other). *loads: the items loaded.
std::map<JobId, std::vector<ItemId>> SideBySideOrders(SamplingPolicy& policy,
                                                      std::span<const ItemId> items,
                                                      uint64_t seed_a, uint64_t seed_b, bool masks,
                                                      size_t* loads) {
  JobSamplingOptions a, b;
  a.seed = seed_a;
  b.seed = seed_b;
  EXPECT_TRUE(policy.AddJob(1, items, a).ok());
  EXPECT_TRUE(policy.AddJob(2, items, b).ok());
  std::map<JobId, std::vector<ItemId>> orders;
  Round round;
  *loads = 0;
  for (int step = 0;; ++step) {
    auto ready = [&](JobId job) { return !masks || step % 3 != 0 || job == JobId(2 - step % 2); };
    if (!policy.Next(ready, &round)) break;
    *loads += round.deliveries.size();
    for (const Delivery& d : round.deliveries) {
      for (JobId job : d.receivers) orders[job].push_back(d.item);
    }
  }
  return orders;
}

// The policies that say so keep each job on its own seeded order beside
// peers, masked or not: a seed sweep run at once gets a different order per
// seed, each the order its seed gives alone, while equal seeds give one
// order, loaded once. The coupled policies give one order whatever the
// seeds, loaded once.
TEST(SamplingPolicyTest, OrdersFollowJobSeedsBesidePeersWhereThePolicySaysSo) {
  std::vector<ItemId> items(60);
  std::iota(items.begin(), items.end(), 0);
  for (const std::string& name : RandomOrderPolicyNames()) {
    SCOPED_TRACE(name);
    size_t loads = 0;
    auto policy = Make(name, 1);
    if (policy->OrdersFollowJobSeeds()) {
      auto orders = SideBySideOrders(*policy, items, 7, 8, /*masks=*/true, &loads);
      EXPECT_EQ(orders[1], AloneOrder(*Make(name, 2), 1, items, 7));
      EXPECT_EQ(orders[2], AloneOrder(*Make(name, 3), 5, items, 8));
      EXPECT_NE(orders[1], orders[2]);
      orders = SideBySideOrders(*Make(name, 4), items, 7, 8, /*masks=*/false, &loads);
      EXPECT_GT(loads, items.size()) << "different orders meet only by chance";
      orders = SideBySideOrders(*Make(name, 4), items, 7, 7, /*masks=*/false, &loads);
      EXPECT_EQ(orders[1], orders[2]);
      EXPECT_EQ(orders[1], AloneOrder(*Make(name, 2), 1, items, 7));
      EXPECT_EQ(loads, items.size());
    } else {
      auto orders = SideBySideOrders(*policy, items, 7, 8, /*masks=*/false, &loads);
      EXPECT_EQ(orders[1], orders[2]);
      EXPECT_EQ(loads, items.size());
    }
  }
  EXPECT_TRUE(Make("independent")->OrdersFollowJobSeeds());
  EXPECT_TRUE(Make("lockstep")->OrdersFollowJobSeeds());
  EXPECT_TRUE(Make("sequential")->OrdersFollowJobSeeds());
  EXPECT_FALSE(Make("dsa")->OrdersFollowJobSeeds());
  EXPECT_FALSE(Make("dsa-chain")->OrdersFollowJobSeeds());
  EXPECT_FALSE(Make("ods")->OrdersFollowJobSeeds());
}

}  // namespace
}  // namespace galley
