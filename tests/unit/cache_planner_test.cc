// The MDP planner reproduces splits computed by hand from the model in
// docs/cache.md, and searches the whole 1% grid.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "galley/cache/partition_planner.h"

namespace galley::cache {
namespace {

// 1,000 items of 100 kB (S), decoded 10x larger (M = 10, 1 MB), finished
// samples of 150 kB. Four cores decode+augment 250 items/s each and augment
// a decoded item at 2,000/s each; memory copies 10 GB/s.
//   augmented rate = 1e10 / 1.5e5 = 66,666.7/s
//   decoded rate   = min(66,666.7, 4 * 2,000) = 8,000/s
//   encoded rate   = min(66,666.7, 4 * 250)   = 1,000/s
PlannerInputs BaseInputs() {
  PlannerInputs in;
  in.decode_augment_per_core_per_s = 250;
  in.augment_per_core_per_s = 2000;
  in.cores = 4;
  in.memory_bytes_per_s = 1e10;
  in.dataset_items = 1000;
  in.encoded_item_bytes = 1e5;
  in.inflation = 10;
  in.augmented_item_bytes = 1.5e5;
  return in;
}

TEST(PlannerModelTest, SourceRates) {
  PlannerInputs in = BaseInputs();
  in.storage_bytes_per_s = 1e7;
  const SourceRates rates = ComputeSourceRates(in);
  EXPECT_NEAR(rates.augmented, 1e10 / 1.5e5, 1e-6);
  EXPECT_DOUBLE_EQ(rates.decoded, 8000);
  EXPECT_DOUBLE_EQ(rates.encoded, 1000);
  EXPECT_DOUBLE_EQ(rates.storage, 100);
  in.jobs_consumption_per_s = 500;  // the jobs cannot take more than this
  const SourceRates bounded = ComputeSourceRates(in);
  EXPECT_DOUBLE_EQ(bounded.augmented, 500);
  EXPECT_DOUBLE_EQ(bounded.decoded, 500);
  EXPECT_DOUBLE_EQ(bounded.storage, 100);
}

// Budget = the encoded dataset (100 MB), storage 10 MB/s (100 items/s).
// All-encoded serves every item at 1,000/s. Moving 1% to decoded caches 1 MB
// = 1 decoded item but loses 10 encoded items to storage: worse.
TEST(PlannerTest, AllEncodedWhenTheBudgetOnlyHoldsEncodedBytes) {
  PlannerInputs in = BaseInputs();
  in.storage_bytes_per_s = 1e7;
  in.cache_bytes = 100'000'000;
  const Plan plan = ModelDrivenPlanner().MakePlan(in);
  EXPECT_EQ(plan.split(), (Split{100, 0, 0}));
  EXPECT_NEAR(plan.predicted_items_per_s, 1000, 1e-6);
  EXPECT_DOUBLE_EQ(plan.fractions.encoded, 1);
  EXPECT_DOUBLE_EQ(plan.fractions.storage, 0);
}

// Budget = the decoded dataset (1 GB), fast storage (10 GB/s), decoding is
// the bottleneck: all-decoded serves everything at 8,000/s; any encoded share
// costs decoded coverage and buys nothing storage does not already give.
TEST(PlannerTest, AllDecodedWhenTheBudgetHoldsTheDecodedDataset) {
  PlannerInputs in = BaseInputs();
  in.storage_bytes_per_s = 1e10;
  in.cache_bytes = 1'000'000'000;
  const Plan plan = ModelDrivenPlanner().MakePlan(in);
  EXPECT_EQ(plan.split(), (Split{0, 100, 0}));
  EXPECT_NEAR(plan.predicted_items_per_s, 8000, 1e-6);
}

// Budget 200 MB, storage 100 items/s. With x_D = d: decoded covers 0.002 d,
// encoded min(1, 0.02 (100 - d)) capped to what is left. Storage is so slow
// that the best split is the largest decoded share that still leaves no item
// to storage: 0.02 (100 - d) >= 1 - 0.002 d  <=>  d <= 55.5, so d = 55:
// decoded 0.11, encoded 0.89, time 0.11/8000 + 0.89/1000 = 9.0375e-4 s.
TEST(PlannerTest, MixedSplitReproducesHandComputation) {
  PlannerInputs in = BaseInputs();
  in.storage_bytes_per_s = 1e7;
  in.cache_bytes = 200'000'000;
  const Plan plan = ModelDrivenPlanner().MakePlan(in);
  EXPECT_EQ(plan.split(), (Split{45, 55, 0}));
  EXPECT_NEAR(plan.fractions.decoded, 0.11, 1e-12);
  EXPECT_NEAR(plan.fractions.encoded, 0.89, 1e-12);
  EXPECT_NEAR(plan.fractions.storage, 0, 1e-12);
  EXPECT_NEAR(plan.predicted_items_per_s, 1 / 9.0375e-4, 1e-6);
  // Neighbours are worse, as computed by hand: d = 56 leaves 0.8% to storage.
  EXPECT_NEAR(EvaluateSplit(in, {44, 56, 0}).predicted_items_per_s, 1 / 9.74e-4, 1e-6);
  EXPECT_LT(EvaluateSplit(in, {46, 54, 0}).predicted_items_per_s, plan.predicted_items_per_s);
}

// Budget = the augmented dataset (150 MB), fast storage, CPU-bound decode.
// With two jobs of one pipeline and reuse limit 1, an augmented entry serves
// half the requests for its item: all-augmented gives 0.5/66,666.7 + 0.5/1,000
// = 5.075e-4 s per item (1,970/s), beating all-decoded (0.15 covered:
// 8.6875e-4 s). With a single job per pipeline the tier serves nothing.
TEST(PlannerTest, AugmentedOnlyPaysWithIdenticalPipelines) {
  PlannerInputs in = BaseInputs();
  in.storage_bytes_per_s = 1e10;
  in.cache_bytes = 150'000'000;
  in.identical_pipeline_jobs = 2;
  in.augmented_reuse_limit = 1;
  const Plan shared = ModelDrivenPlanner().MakePlan(in);
  EXPECT_EQ(shared.split(), (Split{0, 0, 100}));
  EXPECT_NEAR(shared.fractions.augmented, 0.5, 1e-12);
  EXPECT_NEAR(shared.predicted_items_per_s, 1 / 5.075e-4, 1e-6);

  in.identical_pipeline_jobs = 1;
  const Plan alone = ModelDrivenPlanner().MakePlan(in);
  EXPECT_EQ(alone.augmented_pct, 0);
  EXPECT_EQ(alone.split(), (Split{0, 100, 0}));
  EXPECT_NEAR(alone.predicted_items_per_s, 1 / 8.6875e-4, 1e-6);
  EXPECT_DOUBLE_EQ(EvaluateSplit(in, {0, 0, 100}).fractions.augmented, 0);

  // Reuse is bounded by the limit too: 4 identical jobs, limit 1 -> 1/4.
  in.identical_pipeline_jobs = 4;
  EXPECT_NEAR(ComputeHitFractions(in, {0, 0, 100}).augmented, 0.25, 1e-12);
  in.augmented_reuse_limit = 3;
  EXPECT_NEAR(ComputeHitFractions(in, {0, 0, 100}).augmented, 0.75, 1e-12);
}

TEST(PlannerTest, FixedSplitIsScoredByTheModel) {
  PlannerInputs in = BaseInputs();
  in.storage_bytes_per_s = 1e7;
  in.cache_bytes = 200'000'000;
  const Plan plan = FixedSplitPlanner({44, 56, 0}).MakePlan(in);
  EXPECT_EQ(plan.split(), (Split{44, 56, 0}));
  EXPECT_NEAR(plan.predicted_items_per_s, 1 / 9.74e-4, 1e-6);
}

TEST(PlannerTest, NoCacheMeansEverythingFromStorage) {
  PlannerInputs in = BaseInputs();
  in.storage_bytes_per_s = 1e7;
  const Plan plan = ModelDrivenPlanner().MakePlan(in);
  EXPECT_DOUBLE_EQ(plan.fractions.storage, 1);
  EXPECT_NEAR(plan.predicted_items_per_s, 100, 1e-9);
}

// The remote tier (docs/cache.md, "The remote tier"): the base inputs with
// storage at 10 MB/s (100 items/s), a local budget of 20 MB, and a remote
// tier holding 10 GB, read at B_cache over a NIC of B_NIC.
PlannerInputs RemoteInputs(double cache_bytes_per_s, double nic_bytes_per_s) {
  PlannerInputs in = BaseInputs();
  in.storage_bytes_per_s = 1e7;
  in.cache_bytes = 20'000'000;
  in.remote_capacity_bytes = 10'000'000'000;
  in.remote_bytes_per_s = cache_bytes_per_s;
  in.nic_bytes_per_s = nic_bytes_per_s;
  return in;
}

// remote (encoded) = min(encoded, min(B_cache, B_NIC) / S)
// remote (decoded) = min(decoded, min(B_cache, B_NIC) / (S * M))
TEST(PlannerRemoteTest, RemoteRatesAreBoundByTheLinkAndByTheWorkLeft) {
  const PlannerInputs in = RemoteInputs(1e9, 1.25e9);  // 10 GbE: the cache servers bind
  EXPECT_DOUBLE_EQ(ComputeSourceRates(in, RemoteTierForm::kEncoded).remote, 1000);  // CPU
  EXPECT_DOUBLE_EQ(ComputeSourceRates(in, RemoteTierForm::kDecoded).remote, 1000);  // link
  EXPECT_DOUBLE_EQ(ComputeSourceRates(in, RemoteTierForm::kNone).remote, 0);
  const PlannerInputs slow_nic = RemoteInputs(1e10, 2.5e8);  // 2 Gb/s NIC binds
  EXPECT_DOUBLE_EQ(ComputeSourceRates(slow_nic, RemoteTierForm::kEncoded).remote, 1000);
  EXPECT_DOUBLE_EQ(ComputeSourceRates(slow_nic, RemoteTierForm::kDecoded).remote, 250);
  const PlannerInputs fast = RemoteInputs(1e10, 1.25e10);  // 100 GbE
  EXPECT_DOUBLE_EQ(ComputeSourceRates(fast, RemoteTierForm::kDecoded).remote, 8000);
}

// The remote tier serves the share it covers of what the local tiers leave
// to storage: local encoded 20 MB = 20% of the items; a remote tier of
// 50 MB covers half the encoded dataset, so it serves half of the other 80%.
TEST(PlannerRemoteTest, TheRemoteTierServesItsCoverageOfWhatTheLocalTiersLeave) {
  PlannerInputs in = RemoteInputs(1e9, 0);
  in.remote_capacity_bytes = 50'000'000;
  const HitFractions f = ComputeHitFractions(in, Split{100, 0, 0}, RemoteTierForm::kEncoded);
  EXPECT_DOUBLE_EQ(f.encoded, 0.2);
  EXPECT_DOUBLE_EQ(f.remote, 0.4);
  EXPECT_DOUBLE_EQ(f.storage, 0.4);
  // Pixels are ten times larger: the same tier covers 5% of them.
  const HitFractions d = ComputeHitFractions(in, Split{100, 0, 0}, RemoteTierForm::kDecoded);
  EXPECT_DOUBLE_EQ(d.remote, 0.8 * 0.05);
  EXPECT_DOUBLE_EQ(ComputeHitFractions(in, Split{100, 0, 0}).remote, 0);
}

// Without a remote tier slow storage makes the local budget hold as many
// items as it can: encoded, 20% of them (122/s against 102/s all decoded).
// With a remote tier of pixels on 100 GbE, every item not held locally
// comes at 8,000/s, so local encoded entries (1,000/s) would only slow the
// node: the plan turns to all-decoded, and the remote tier to pixels.
TEST(PlannerRemoteTest, WhatTheRemoteTierHoldsChangesTheLocalSplit) {
  PlannerInputs alone = RemoteInputs(0, 0);
  alone.remote_capacity_bytes = 0;
  const Plan local = ModelDrivenPlanner().MakePlan(alone);
  EXPECT_EQ(local.split(), (Split{100, 0, 0}));
  EXPECT_EQ(local.remote_form, RemoteTierForm::kNone);
  EXPECT_NEAR(local.predicted_items_per_s, 1 / (0.2 / 1000 + 0.8 / 100), 1e-6);

  const Plan shared = ModelDrivenPlanner().MakePlan(RemoteInputs(1e10, 1.25e10));
  EXPECT_EQ(shared.split(), (Split{0, 100, 0}));
  EXPECT_EQ(shared.remote_form, RemoteTierForm::kDecoded);
  EXPECT_DOUBLE_EQ(shared.fractions.decoded, 0.02);
  EXPECT_DOUBLE_EQ(shared.fractions.remote, 0.98);
  EXPECT_NEAR(shared.predicted_items_per_s, 8000, 1e-6);

  // On 10 GbE pixels come no faster than bytes (1,000/s either way): the
  // tie goes to the smaller encoded form, the local tier still to pixels.
  const Plan ten_gbe = ModelDrivenPlanner().MakePlan(RemoteInputs(1e9, 1.25e9));
  EXPECT_EQ(ten_gbe.split(), (Split{0, 100, 0}));
  EXPECT_EQ(ten_gbe.remote_form, RemoteTierForm::kEncoded);
  EXPECT_NEAR(ten_gbe.predicted_items_per_s, 1 / (0.02 / 8000 + 0.98 / 1000), 1e-6);
}

TEST(PlannerRemoteTest, TheFormsWeighedFollowTheTierAndTheAdmin) {
  PlannerInputs in = RemoteInputs(1e10, 0);
  EXPECT_EQ(RemoteFormsToWeigh(in),
            (std::vector<RemoteTierForm>{RemoteTierForm::kEncoded, RemoteTierForm::kDecoded}));
  in.remote_max_value_bytes = 1 << 20;  // a 1 MB decoded item fits a 1 MiB entry
  EXPECT_EQ(RemoteFormsToWeigh(in).size(), 2u);
  in.remote_max_value_bytes = 500'000;  // memcached -I 500k: pixels do not fit
  EXPECT_EQ(RemoteFormsToWeigh(in), (std::vector<RemoteTierForm>{RemoteTierForm::kEncoded}));
  in.fixed_remote_form = RemoteTierForm::kDecoded;  // the admin's word wins
  EXPECT_EQ(RemoteFormsToWeigh(in), (std::vector<RemoteTierForm>{RemoteTierForm::kDecoded}));
  EXPECT_EQ(FixedSplitPlanner(Split{50, 50, 0}).MakePlan(in).remote_form, RemoteTierForm::kDecoded);
  in.remote_bytes_per_s = 0;  // not measured: the remote tier is left out of the model
  EXPECT_EQ(RemoteFormsToWeigh(in), (std::vector<RemoteTierForm>{RemoteTierForm::kNone}));
  EXPECT_STREQ(RemoteTierFormName(RemoteTierForm::kDecoded), "decoded");
}

TEST(PlanningGridTest, CoversEveryOnePercentSplitIncludingTheEnds) {
  const std::vector<Split> grid = PlanningGrid();
  EXPECT_EQ(grid.size(), 5151u);  // (101 * 102) / 2 points with x_E + x_D + x_A = 100
  std::set<std::tuple<int, int, int>> seen;
  for (const Split& s : grid) {
    ASSERT_TRUE(s.IsValid());
    ASSERT_EQ(s.encoded_pct + s.decoded_pct + s.augmented_pct, 100);
    seen.emplace(s.encoded_pct, s.decoded_pct, s.augmented_pct);
  }
  EXPECT_EQ(seen.size(), grid.size());
  EXPECT_TRUE(seen.contains({100, 0, 0}));
  EXPECT_TRUE(seen.contains({0, 100, 0}));
  EXPECT_TRUE(seen.contains({0, 0, 100}));
  EXPECT_TRUE(seen.contains({0, 45, 55}));
}

}  // namespace
}  // namespace galley::cache
