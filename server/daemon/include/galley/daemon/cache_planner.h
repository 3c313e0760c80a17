// CachePlanner: galleyd's side of model-driven partitioning (docs/cache.md):
// gathers the planner's inputs, re-plans the cache split when datasets or jobs
// change, and applies it with TieredCache::SetSplit.
//
// Inputs come from three places, each shown with its source by Snapshot():
//   * the node, measured once at start (MeasureNode): decode+augment and
//     augment-only rates per core, memory copy bandwidth;
//   * the datasets, sampled the first time a job opens one (SampleDataset):
//     storage read rate, item count, mean encoded size, inflation. A dataset
//     of objects is sampled once per content: the planner remembers its
//     sample after its jobs have closed (a later job's open reads nothing
//     from the store) and, with a disk tier, keeps it in the tier's folder
//     (DatasetSampleStore), where a restarted galleyd takes it from;
//   * the remote tier, when there is one: B_cache and its capacity probed at
//     start, B_NIC from the link speed; the plan also chooses the form it
//     holds and sets it as the tier's write form;
//   * the open jobs' plans (JobPlan), as the JobManager announces them (the
//     planner is a JobLifecycleObserver): the largest group of jobs with one
//     augmentation signature on one dataset, the finished-sample size, the
//     items they use, and their pipelines' augment cost, measured once per
//     pipeline (the PipelineTimer: MeasureAugmentRate unless one is given)
//     on the planner's thread: a RandAugment pipeline costs several times
//     RandomResizedCrop's, which lowers the decoded and encoded tiers' rates
//     and so favours the augmented tier.
// Any of the node's and the storage inputs, and the split itself, can be
// overridden by the admin; an override always wins.
//
// A job's opening and close are only recorded, and wake the planner's
// thread, so the JobManager that announces them never waits for a dataset
// sample or a plan.
//
// Thread-safe: mu_ guards the recorded state, plan_mu_ serialises re-plans.
// Lock order: plan_mu_, then mu_; the cache's own locks are taken with
// neither held except plan_mu_.
#ifndef GALLEY_SERVER_DAEMON_CACHE_PLANNER_H_
#define GALLEY_SERVER_DAEMON_CACHE_PLANNER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "galley/cache/partition_planner.h"
#include "galley/cache/tiered_cache.h"
#include "galley/daemon/daemon_options.h"
#include "galley/daemon/dataset_sample_store.h"
#include "galley/daemon/node_probe.h"
#include "galley/dataset/dataset.h"
#include "galley/mutex.h"
#include "galley/remote/remote_cache.h"
#include "galley/scheduling/job_lifecycle_observer.h"
#include "galley/scheduling/job_plan.h"
#include "galley/snapshots/snapshots.h"

namespace galley {

// Admin overrides of the planner's inputs; 0 (or no split) means "measure".
struct PlannerOverrides {
  double storage_bytes_per_s = 0;
  double decode_augment_per_core_per_s = 0;
  double augment_per_core_per_s = 0;
  double memory_bytes_per_s = 0;
  int cores = 0;
  std::optional<cache::Split> split;
  // The remote tier's inputs (B_cache, capacity, B_NIC) and its form
  // (kNone: the planner chooses); its largest entry is configuration.
  double remote_bytes_per_s = 0;
  uint64_t remote_capacity_bytes = 0;
  double nic_bytes_per_s = 0;
  cache::RemoteTierForm remote_form = cache::RemoteTierForm::kNone;
  uint64_t remote_max_value_bytes = 0;

  // The admin's values; a throttled storage (storage_throttle_bytes_per_s)
  // counts as its throttled rate unless storage_bytes_per_s is set, since
  // the page cache would make the throttled files look fast.
  static PlannerOverrides From(const DaemonOptions& options);
};

// The tiered cache's options from galleyd's: its budget, eviction and the
// admin's split (the cache library does not know galleyd's options).
cache::CacheOptions CacheOptionsFrom(const DaemonOptions& options);

// Times one job pipeline: the items/s one core augments with it. galleyd's
// is MeasureAugmentRate (about 50 ms on the probe image); tests give fixed
// costs, so that what the planner makes of them does not depend on the
// machine or its load. Called on the planner's thread, once per pipeline.
using PipelineTimer = std::function<Result<double>(const image::TransformPipeline&)>;

class CachePlanner final : public JobLifecycleObserver {
 public:
  // `cache` must outlive the planner, and so must `remote` when set (the
  // shared tier, whose write form the plan sets). `worker_threads` is the
  // pipeline's thread count: the cores that prepare items, unless overridden.
  // `time_pipeline` (default MeasureAugmentRate) times the jobs' pipelines.
  // `samples`, when set (galleyd's with a disk tier), keeps the samples of
  // datasets of objects across restarts and must outlive the planner.
  CachePlanner(cache::TieredCache* cache, const NodeMeasurements& node, int worker_threads,
               const PlannerOverrides& overrides, RemoteCache* remote = nullptr,
               PipelineTimer time_pipeline = {}, DatasetSampleStore* samples = nullptr);
  ~CachePlanner() override;  // stops the thread
  CachePlanner(const CachePlanner&) = delete;
  CachePlanner& operator=(const CachePlanner&) = delete;

  // Starts the thread that re-plans after changes. Without it, changes are
  // planned only by ReplanNow (what tests do).
  void Start();
  void Stop() EXCLUDES(mu_);

  // Records the job's plan; never refuses.
  Status OnJobOpened(const std::shared_ptr<ServedJob>& job) override EXCLUDES(mu_);
  // A seek changes none of the planner's inputs: accepted, nothing recorded.
  Status OnJobSought(ServedJob& job, const JobSeek& seek) override;
  void OnJobClosed(JobId job_id) override EXCLUDES(mu_);
  // Records an open job's plan (what OnJobOpened records of a ServedJob).
  // The planner reads of it: its dataset and max_resolution (what a sample
  // of the dataset weighs), augmentation signature, ring's sample size,
  // subset, and pipeline (whose augment cost is measured once; the node's
  // probe stands in for a null one).
  void RecordJob(JobId job_id, std::shared_ptr<const JobPlan> job) EXCLUDES(mu_);

  // Samples datasets not sampled yet, plans and applies the split, on the
  // calling thread. Returns the plan applied (the current one when there is
  // nothing to plan for yet: no dataset sampled).
  cache::Plan ReplanNow() EXCLUDES(plan_mu_, mu_);

  // The inputs, where each came from, the split and its predictions (what
  // `galleyctl plan` prints).
  PlanSnapshot Snapshot() const EXCLUDES(mu_);
  // Tier statistics, demand totals, the split and the planner's inputs
  // (what `galleyctl cache` prints, less the pipeline's counters).
  CacheSnapshot SnapshotCache() const EXCLUDES(mu_);

  // The inputs the next plan would use. Requires no lock.
  cache::PlannerInputs CurrentInputs() const EXCLUDES(mu_);
  uint64_t plans_made() const EXCLUDES(mu_);

 private:
  struct DatasetInfo {
    // The plan of an open job that reads the dataset instance: the dataset,
    // and the max_resolution every job of the instance asks for.
    std::shared_ptr<const JobPlan> reader;
    std::optional<DatasetSample> sample;  // empty until sampled, or when sampling failed
    std::string sample_error;
    // "storage"; for a sample read from neither: "disk cache" (the sample
    // store's) or "memory" (this galleyd's, from an earlier job).
    std::string sample_source;
  };
  struct TakenSample {
    Result<DatasetSample> sample;
    const char* source = "storage";  // as DatasetInfo::sample_source
  };
  // A sample of a dataset of objects: its content fingerprint (high, low)
  // and the max_resolution it was taken at.
  using SampleKey = std::tuple<uint64_t, uint64_t, uint32_t>;
  // The most samples of datasets of objects remembered (about 100 bytes
  // each); the oldest is forgotten first.
  static constexpr size_t kRememberedSamples = 1024;

  // The sample of `dataset` at `max_resolution`: for a dataset of objects
  // the one remembered, else the one the sample store keeps, each with the
  // dataset's own item count and mean size; else SampleDataset's, which the
  // store then keeps. Reads files; called without mu_.
  TakenSample Sample(const Dataset& dataset, uint32_t max_resolution) const EXCLUDES(mu_);
  // Remembers a sample of a dataset of objects that SampleDataset or the
  // sample store gave.
  void RememberLocked(const Dataset& dataset, uint32_t max_resolution, const DatasetSample& sample)
      REQUIRES(mu_);

  void Loop() EXCLUDES(mu_);
  cache::PlannerInputs InputsLocked() const REQUIRES(mu_);
  // The inputs of the last plan (the next one's before any), with sources.
  PlannerInputsSnapshot InputsSnapshotLocked() const REQUIRES(mu_);

  cache::TieredCache* const cache_;
  RemoteCache* const remote_;
  const NodeMeasurements node_;
  const int worker_threads_;
  const PlannerOverrides overrides_;
  const PipelineTimer time_pipeline_;
  DatasetSampleStore* const samples_;  // null: every sample reads storage

  Mutex plan_mu_ ACQUIRED_BEFORE(mu_);  // serialises ReplanNow

  mutable Mutex mu_;
  CondVar cv_;  // signalled when stop_ or pending_ is set
  bool stop_ GUARDED_BY(mu_) = false;
  bool pending_ GUARDED_BY(mu_) = false;
  std::map<const Dataset*, DatasetInfo> datasets_ GUARDED_BY(mu_);
  std::map<JobId, std::shared_ptr<const JobPlan>> jobs_ GUARDED_BY(mu_);
  // Samples of datasets of objects taken by this galleyd, kept after their
  // jobs have closed; remembered_order_ oldest first.
  std::map<SampleKey, DatasetSample> remembered_ GUARDED_BY(mu_);
  std::deque<SampleKey> remembered_order_ GUARDED_BY(mu_);
  // Augment items/s per core by pipeline signature; 0 when it failed.
  std::map<std::string, double> pipeline_rates_ GUARDED_BY(mu_);
  std::optional<cache::Plan> plan_ GUARDED_BY(mu_);   // last applied
  cache::PlannerInputs plan_inputs_ GUARDED_BY(mu_);  // what plan_ used
  uint64_t plans_made_ GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_CACHE_PLANNER_H_
