// PartitionPlanner: chooses how to split the cache budget between the
// encoded, decoded and augmented tiers (Seneca's model-driven partitioning).
//
// ModelDrivenPlanner scores every split on a 1% grid (x_E + x_D + x_A = 100,
// each 0..100) with a throughput model of the pipeline and returns the best;
// FixedSplitPlanner returns an admin's split, scored by the same model so
// `galleyctl cache` can show what it predicts. docs/cache.md derives the model.
//
// In short: an item served from a source costs 1/rate of that source, where
//   augmented = min(memory_bytes_per_s / augmented_item_bytes, jobs_consumption_per_s)
//   decoded   = min(augmented, cores * augment_per_core_per_s)
//   encoded   = min(augmented, cores * decode_augment_per_core_per_s)
//   storage   = min(encoded,   storage_bytes_per_s / encoded_item_bytes)
// and each tier holds a disjoint slice of the dataset, filled fastest first
// (augmented, decoded, encoded), a tier with share x caching
// min(1, x * cache_bytes / (item_bytes * dataset_items)) of it. Augmented
// entries only serve jobs with the same pipeline, seed and epoch, at most
// reuse_limit times, so of the requests for an item it holds only
// min(g - 1, reuse_limit) / g hit it (g identical-pipeline jobs); the rest go
// to storage. Throughput = 1 / sum_source(fraction / rate).
//
// With a remote tier shared by every node (Seneca's remote cache, with its
// B_cache and B_NIC), the requests the local tiers leave to storage are
// served by the remote tier as far as it covers the dataset, in the form it
// holds:
//   remote (encoded) = min(encoded, min(B_cache, B_NIC) / encoded_item_bytes)
//   remote (decoded) = min(decoded, min(B_cache, B_NIC) / decoded_item_bytes)
// covering min(1, remote_capacity / (item_bytes * dataset_items)). The
// planner then also picks the remote form (unless the admin fixed it).
//
// Planners are stateless; MakePlan is safe to call from any thread.
#ifndef GALLEY_CACHE_PARTITION_PLANNER_H_
#define GALLEY_CACHE_PARTITION_PLANNER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "galley/cache/split.h"

namespace galley::cache {

// What the remote tier holds: nothing (no tier), files' bytes, or pixels.
enum class RemoteTierForm { kNone, kEncoded, kDecoded };

// Measured by the daemon on start and from the registered datasets and jobs;
// the admin may override any of them. Rates <= 0 for memory bandwidth or job
// consumption mean "no limit"; other rates <= 0 mean that source cannot serve.
struct PlannerInputs {
  double storage_bytes_per_s = 0;
  double decode_augment_per_core_per_s = 0;  // items/s one core decodes and augments
  double augment_per_core_per_s = 0;         // items/s one core augments a decoded item
  int cores = 1;
  double memory_bytes_per_s = 0;      // copy bandwidth into the batch rings
  double jobs_consumption_per_s = 0;  // items/s all jobs together can take; 0 = unbounded
  uint64_t dataset_items = 0;
  double encoded_item_bytes = 0;    // S: mean file size
  double inflation = 1;             // M: decoded bytes / encoded bytes
  double augmented_item_bytes = 0;  // one finished sample
  uint64_t cache_bytes = 0;
  int identical_pipeline_jobs = 1;   // g: largest group of jobs with one signature
  size_t augmented_reuse_limit = 1;  // as CacheOptions
  // The remote tier shared by all nodes; capacity 0 means there is none.
  uint64_t remote_capacity_bytes = 0;
  double remote_bytes_per_s = 0;        // B_cache: what this node reads from it; <= 0: unknown
  double nic_bytes_per_s = 0;           // B_NIC; <= 0: unbounded
  uint64_t remote_max_value_bytes = 0;  // largest entry it takes; 0: no limit
  // The admin's choice of form; kNone lets the planner choose.
  RemoteTierForm fixed_remote_form = RemoteTierForm::kNone;
};

// Items/s when every item comes from that source.
struct SourceRates {
  double augmented = 0;
  double decoded = 0;
  double encoded = 0;
  double storage = 0;
  double remote = 0;  // in the plan's remote form; 0 without one
};

// Share of requests each source serves; they add up to 1.
struct HitFractions {
  double augmented = 0;
  double decoded = 0;
  double encoded = 0;
  double storage = 1;
  double remote = 0;
};

struct Plan {
  int encoded_pct = 0;
  int decoded_pct = 0;
  int augmented_pct = 0;
  RemoteTierForm remote_form = RemoteTierForm::kNone;
  double predicted_items_per_s = 0;
  SourceRates rates;
  HitFractions fractions;

  Split split() const { return {encoded_pct, decoded_pct, augmented_pct}; }
};

class PartitionPlanner {
 public:
  virtual ~PartitionPlanner() = default;
  virtual Plan MakePlan(const PlannerInputs& inputs) const = 0;
};

// Searches the whole 1% grid, for each remote form the tier may hold. Ties
// (within a relative 1e-9) go to the smaller augmented share, then to the
// larger decoded share: augmented entries are the most perishable, decoded
// ones spare the most CPU; then to the encoded remote form, the smaller one.
class ModelDrivenPlanner final : public PartitionPlanner {
 public:
  Plan MakePlan(const PlannerInputs& inputs) const override;
};

// Always the given split (an admin override), scored by the model, with
// the remote form that scores best for it (or the admin's).
class FixedSplitPlanner final : public PartitionPlanner {
 public:
  explicit FixedSplitPlanner(const Split& split) : split_(split) {}
  Plan MakePlan(const PlannerInputs& inputs) const override;

 private:
  Split split_;
};

// The model's pieces, exposed for display and tests. `remote` is the form
// the remote tier holds (kNone: no remote tier, whatever the inputs say).
SourceRates ComputeSourceRates(const PlannerInputs& inputs,
                               RemoteTierForm remote = RemoteTierForm::kNone);
HitFractions ComputeHitFractions(const PlannerInputs& inputs, const Split& split,
                                 RemoteTierForm remote = RemoteTierForm::kNone);
Plan EvaluateSplit(const PlannerInputs& inputs, const Split& split,
                   RemoteTierForm remote = RemoteTierForm::kNone);
// The forms the planner weighs for `inputs`: kNone alone without a usable
// remote tier, the admin's form when fixed, else encoded and decoded
// (decoded only when a mean decoded item fits the tier's entries).
std::vector<RemoteTierForm> RemoteFormsToWeigh(const PlannerInputs& inputs);
// "none", "encoded", "decoded".
const char* RemoteTierFormName(RemoteTierForm form);
// Every split the planner considers: all (x_E, x_D, x_A) with sum 100.
std::vector<Split> PlanningGrid();

}  // namespace galley::cache

#endif  // GALLEY_CACHE_PARTITION_PLANNER_H_
