#include "galley/cache/partition_planner.h"

#include <algorithm>
#include <limits>

namespace galley::cache {
namespace {

constexpr double kUnbounded = std::numeric_limits<double>::infinity();

// Items/s a bandwidth allows for items of `item_bytes`; no limit when either
// is unknown (<= 0).
double ItemsPerSecond(double bytes_per_s, double item_bytes) {
  if (bytes_per_s <= 0 || item_bytes <= 0) return kUnbounded;
  return bytes_per_s / item_bytes;
}

double CpuRate(int cores, double per_core) {
  if (cores <= 0 || per_core <= 0) return 0;
  return cores * per_core;
}

// Fraction of the dataset a tier with `pct` percent of the budget can hold.
double Coverage(const PlannerInputs& in, int pct, double item_bytes) {
  if (pct <= 0 || in.dataset_items == 0) return 0;
  const double dataset_bytes = item_bytes * static_cast<double>(in.dataset_items);
  if (dataset_bytes <= 0) return 1;
  const double tier_bytes = pct / 100.0 * static_cast<double>(in.cache_bytes);
  return std::min(1.0, tier_bytes / dataset_bytes);
}

double SecondsPerItem(double fraction, double rate) {
  if (fraction <= 0) return 0;
  if (rate <= 0) return kUnbounded;
  return fraction / rate;  // 0 for an unbounded rate
}

// Bytes of one item in the remote tier's form.
double RemoteItemBytes(const PlannerInputs& in, RemoteTierForm form) {
  return form == RemoteTierForm::kDecoded ? in.encoded_item_bytes * in.inflation
                                          : in.encoded_item_bytes;
}

}  // namespace

const char* RemoteTierFormName(RemoteTierForm form) {
  switch (form) {
    case RemoteTierForm::kEncoded:
      return "encoded";
    case RemoteTierForm::kDecoded:
      return "decoded";
    case RemoteTierForm::kNone:
      break;
  }
  return "none";
}

std::vector<RemoteTierForm> RemoteFormsToWeigh(const PlannerInputs& in) {
  if (in.remote_capacity_bytes == 0 || in.remote_bytes_per_s <= 0) return {RemoteTierForm::kNone};
  if (in.fixed_remote_form != RemoteTierForm::kNone) return {in.fixed_remote_form};
  const bool decoded_fits =
      in.remote_max_value_bytes == 0 || RemoteItemBytes(in, RemoteTierForm::kDecoded) <=
                                            static_cast<double>(in.remote_max_value_bytes);
  if (!decoded_fits) return {RemoteTierForm::kEncoded};
  return {RemoteTierForm::kEncoded, RemoteTierForm::kDecoded};
}

SourceRates ComputeSourceRates(const PlannerInputs& in, RemoteTierForm remote) {
  SourceRates rates;
  // Every item ends as a finished sample copied into a batch ring, so the
  // augmented source's bound applies to all others too.
  const double consumption = in.jobs_consumption_per_s > 0 ? in.jobs_consumption_per_s : kUnbounded;
  rates.augmented =
      std::min(ItemsPerSecond(in.memory_bytes_per_s, in.augmented_item_bytes), consumption);
  rates.decoded = std::min(rates.augmented, CpuRate(in.cores, in.augment_per_core_per_s));
  rates.encoded = std::min(rates.augmented, CpuRate(in.cores, in.decode_augment_per_core_per_s));
  const double storage = in.storage_bytes_per_s <= 0
                             ? 0
                             : ItemsPerSecond(in.storage_bytes_per_s, in.encoded_item_bytes);
  rates.storage = std::min(rates.encoded, storage);
  if (remote != RemoteTierForm::kNone && in.remote_bytes_per_s > 0) {
    // Bytes from the remote tier cross the cache servers and this node's NIC.
    const double link = in.nic_bytes_per_s > 0 ? std::min(in.remote_bytes_per_s, in.nic_bytes_per_s)
                                               : in.remote_bytes_per_s;
    const double next_step = remote == RemoteTierForm::kDecoded ? rates.decoded : rates.encoded;
    rates.remote = std::min(next_step, ItemsPerSecond(link, RemoteItemBytes(in, remote)));
  }
  return rates;
}

HitFractions ComputeHitFractions(const PlannerInputs& in, const Split& split,
                                 RemoteTierForm remote) {
  // Tiers hold disjoint slices of the dataset, the fastest filled first; the
  // slices cannot add up to more than the whole dataset.
  const double augmented_slice = Coverage(in, split.augmented_pct, in.augmented_item_bytes);
  const double decoded_slice = std::min(
      Coverage(in, split.decoded_pct, in.encoded_item_bytes * in.inflation), 1.0 - augmented_slice);
  const double encoded_slice = std::min(Coverage(in, split.encoded_pct, in.encoded_item_bytes),
                                        1.0 - augmented_slice - decoded_slice);
  // Of g jobs sharing one signature, the first to reach an item in an epoch
  // produces it; at most reuse_limit of the other g - 1 are served the entry.
  // The producers' requests for that slice fall through to storage, because
  // the slice is held in no other tier.
  const double jobs = std::max(1, in.identical_pipeline_jobs);
  const double reused = std::min(jobs - 1, static_cast<double>(in.augmented_reuse_limit));
  HitFractions fractions;
  fractions.augmented = augmented_slice * reused / jobs;
  fractions.decoded = std::max(0.0, decoded_slice);
  fractions.encoded = std::max(0.0, encoded_slice);
  fractions.storage =
      std::max(0.0, 1.0 - fractions.augmented - fractions.decoded - fractions.encoded);
  if (remote != RemoteTierForm::kNone && in.remote_capacity_bytes > 0) {
    // The remote tier holds what every node read, so its slice is
    // independent of this node's local slices: it covers the same share of
    // what they leave to storage.
    const double dataset_bytes =
        RemoteItemBytes(in, remote) * static_cast<double>(in.dataset_items);
    const double covered =
        dataset_bytes > 0
            ? std::min(1.0, static_cast<double>(in.remote_capacity_bytes) / dataset_bytes)
            : 1.0;
    fractions.remote = fractions.storage * covered;
    fractions.storage -= fractions.remote;
  }
  return fractions;
}

Plan EvaluateSplit(const PlannerInputs& in, const Split& split, RemoteTierForm remote) {
  Plan plan;
  plan.encoded_pct = split.encoded_pct;
  plan.decoded_pct = split.decoded_pct;
  plan.augmented_pct = split.augmented_pct;
  plan.remote_form = remote;
  plan.rates = ComputeSourceRates(in, remote);
  plan.fractions = ComputeHitFractions(in, split, remote);
  // Hit-weighted harmonic mix: the mean time per item is the sources' times
  // weighted by the share of items each serves.
  const double seconds = SecondsPerItem(plan.fractions.augmented, plan.rates.augmented) +
                         SecondsPerItem(plan.fractions.decoded, plan.rates.decoded) +
                         SecondsPerItem(plan.fractions.encoded, plan.rates.encoded) +
                         SecondsPerItem(plan.fractions.storage, plan.rates.storage) +
                         SecondsPerItem(plan.fractions.remote, plan.rates.remote);
  plan.predicted_items_per_s = seconds > 0 ? 1.0 / seconds : kUnbounded;
  return plan;
}

std::vector<Split> PlanningGrid() {
  // Order matters: the planner keeps the first of equal scores, so smaller
  // augmented shares come first and, within one, larger decoded shares.
  std::vector<Split> grid;
  grid.reserve(101 * 102 / 2);
  for (int augmented = 0; augmented <= 100; ++augmented) {
    for (int decoded = 100 - augmented; decoded >= 0; --decoded) {
      grid.push_back({100 - augmented - decoded, decoded, augmented});
    }
  }
  return grid;
}

namespace {

// The best of `splits` x the remote forms to weigh; the first of equals.
Plan BestPlan(const PlannerInputs& inputs, const std::vector<Split>& splits) {
  Plan best;
  bool have_best = false;
  for (const RemoteTierForm form : RemoteFormsToWeigh(inputs)) {
    for (const Split& split : splits) {
      Plan plan = EvaluateSplit(inputs, split, form);
      if (!have_best || plan.predicted_items_per_s > best.predicted_items_per_s * (1 + 1e-9)) {
        best = plan;
        have_best = true;
      }
    }
  }
  return best;
}

}  // namespace

Plan ModelDrivenPlanner::MakePlan(const PlannerInputs& inputs) const {
  static const std::vector<Split> grid = PlanningGrid();
  return BestPlan(inputs, grid);
}

Plan FixedSplitPlanner::MakePlan(const PlannerInputs& inputs) const {
  return BestPlan(inputs, {split_});
}

}  // namespace galley::cache
