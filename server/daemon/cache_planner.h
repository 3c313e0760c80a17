// CachePlanner: galleyd's side of model-driven partitioning (docs/cache.md):
// gathers the planner's inputs, re-plans the cache split when datasets or jobs
// change, and applies it with TieredCache::SetSplit.
//
// Inputs come from three places, each shown with its source by Snapshot():
//   * the node, measured once at start (MeasureNode): decode+augment and
//     augment-only rates per core, memory copy bandwidth;
//   * the datasets, sampled the first time a job opens one (SampleDataset):
//     storage read rate, item count, mean encoded size, inflation;
//   * the open jobs: the largest group of jobs with one augmentation
//     signature on one dataset, the finished-sample size, the items they
//     use, and their pipelines' augment cost, measured once per pipeline
//     (MeasureAugmentRate) on the planner's thread: a RandAugment pipeline
//     costs several times RandomResizedCrop's, which lowers the decoded and
//     encoded tiers' rates and so favours the augmented tier.
// Any of the node's and the storage inputs, and the split itself, can be
// overridden by the admin; an override always wins.
//
// JobOpened/JobClosed only record and wake the planner's thread, so the
// scheduler that calls them never waits for a dataset sample or a plan.
//
// Thread-safe: mu_ guards the recorded state, plan_mu_ serialises re-plans.
// Lock order: plan_mu_, then mu_; the cache's own locks are taken with
// neither held except plan_mu_.
#ifndef GALLEY_SERVER_DAEMON_CACHE_PLANNER_H_
#define GALLEY_SERVER_DAEMON_CACHE_PLANNER_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "galley/cache/partition_planner.h"
#include "galley/cache/tiered_cache.h"
#include "server/daemon/node_probe.h"
#include "server/daemon/snapshots.h"
#include "server/dataset/dataset.h"

namespace galley {

// Admin overrides of the planner's inputs; 0 (or no split) means "measure".
struct PlannerOverrides {
  double storage_bytes_per_s = 0;
  double decode_augment_per_core_per_s = 0;
  double augment_per_core_per_s = 0;
  int cores = 0;
  std::optional<cache::Split> split;
};

// What the planner needs to know about one open job.
struct PlannedJob {
  std::shared_ptr<const Dataset> dataset;
  std::string signature;      // augmentation signature (pipeline + seed)
  uint64_t sample_bytes = 0;  // one finished sample
  uint64_t subset_items = 0;  // items the job uses per epoch, over all ranks
  // The job's pipeline: its augment cost is measured once per pipeline (the
  // node's probe pipeline stands in when null).
  std::shared_ptr<const image::TransformPipeline> pipeline;
};

class CachePlanner {
 public:
  // `cache` must outlive the planner. `worker_threads` is the pipeline's
  // thread count: the cores that prepare items, unless overridden.
  CachePlanner(cache::TieredCache* cache, const NodeMeasurements& node, int worker_threads,
               const PlannerOverrides& overrides);
  ~CachePlanner();  // stops the thread
  CachePlanner(const CachePlanner&) = delete;
  CachePlanner& operator=(const CachePlanner&) = delete;

  // Starts the thread that re-plans after changes. Without it, changes are
  // planned only by ReplanNow (what tests do).
  void Start();
  void Stop();

  void JobOpened(uint64_t job_id, PlannedJob job);
  void JobClosed(uint64_t job_id);

  // Samples datasets not sampled yet, plans and applies the split, on the
  // calling thread. Returns the plan applied (the current one when there is
  // nothing to plan for yet: no dataset sampled).
  cache::Plan ReplanNow();

  // The inputs, where each came from, the split and its predictions (what
  // `galleyctl plan` prints).
  PlanSnapshot Snapshot() const;
  // Tier statistics, demand totals, the split and the planner's inputs
  // (what `galleyctl cache` prints, less the pipeline's counters).
  CacheSnapshot SnapshotCache() const;

  // The inputs the next plan would use. Requires no lock.
  cache::PlannerInputs CurrentInputs() const;
  uint64_t plans_made() const;

 private:
  struct DatasetInfo {
    std::shared_ptr<const Dataset> dataset;
    std::optional<DatasetSample> sample;  // empty until sampled, or when sampling failed
    std::string sample_error;
  };

  void Loop();
  cache::PlannerInputs InputsLocked() const;  // requires mu_
  // The inputs of the last plan (the next one's before any), with sources.
  PlannerInputsSnapshot InputsSnapshotLocked() const;  // requires mu_

  cache::TieredCache* const cache_;
  const NodeMeasurements node_;
  const int worker_threads_;
  const PlannerOverrides overrides_;

  std::mutex plan_mu_;  // serialises ReplanNow

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                               // GUARDED_BY(mu_)
  bool pending_ = false;                            // GUARDED_BY(mu_)
  std::map<const Dataset*, DatasetInfo> datasets_;  // GUARDED_BY(mu_)
  std::map<uint64_t, PlannedJob> jobs_;             // GUARDED_BY(mu_)
  // Augment items/s per core by pipeline signature; 0 when it failed.
  std::map<std::string, double> pipeline_rates_;  // GUARDED_BY(mu_)
  std::optional<cache::Plan> plan_;               // GUARDED_BY(mu_); last applied
  cache::PlannerInputs plan_inputs_;              // GUARDED_BY(mu_); what plan_ used
  uint64_t plans_made_ = 0;                       // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_CACHE_PLANNER_H_
