// JobPlan: what one job is, decided once when it is opened and never changed.
//
// The client's JobSpec and everything galleyd derives from it before the job
// produces anything: its owner, the dataset instance it reads and that
// instance's number (the dataset half of its cache keys), its items and
// their split, its sampling policy, its transform and augmentation
// signature, its fields and its ring's layout. The JobManager builds it
// (JobManager::Open) before it admits the job, then hands it to the job's
// ServedJob, which holds it as a std::shared_ptr<const JobPlan>.
//
// Every component reads a job's values here, through that reference, and
// keeps only its own changing state keyed by the job's id (the scheduler's
// position in the epoch, the gate's times, the ledger's demand, the
// planner's samples); none copies a value of the plan into a struct of its
// own. So a new per-job value the pipeline needs is a field of the JobSpec
// (and of the OpenJob body), read from the plan where it is used.
//
// Thread-safety: immutable once shared, so any thread may read it without a
// lock. The job's changing state (ring, counters, a listed job's latest
// list) is ServedJob's.
#ifndef GALLEY_SERVER_SCHEDULING_JOB_PLAN_H_
#define GALLEY_SERVER_SCHEDULING_JOB_PLAN_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "galley/dataset/dataset.h"
#include "galley/image/transforms.h"
#include "galley/job_spec.h"
#include "galley/scheduling/batch_ring.h"
#include "galley/status.h"
#include "wire/segment_layout.h"

namespace galley {

struct JobPlan {
  JobSpec spec;  // as the client sent it
  uid_t owner_uid = 0;
  pid_t owner_pid = 0;
  std::chrono::steady_clock::time_point opened_at = std::chrono::steady_clock::now();
  // The dataset instance the job reads: jobs that ask for the same listing
  // and the same max_resolution share it (DatasetRegistry).
  std::shared_ptr<const Dataset> dataset;
  // The instance's number in the DatasetRegistry: the dataset half of the
  // job's cache keys (cache::MakeKey).
  uint32_t dataset_index = 0;
  std::vector<ItemId> subset;  // sorted, distinct
  uint64_t epoch_size = 0;     // items this rank receives per epoch
  std::string policy;          // the sampling policy actually used
  // For each of spec.fields, its index among the dataset's fields
  // (Dataset::field_names); empty without fields.
  std::vector<uint32_t> field_map;
  std::shared_ptr<const image::TransformPipeline> pipeline;
  // What the augmented tier keys the job's samples by
  // (AugmentationSignature of the pipeline and the seed).
  std::string augmentation_signature;
  // The ring's layout, decided before the ring exists, and its samples'
  // shape.
  wire::SegmentGeometry geometry;
  TensorShape shape;

  // Whether the client lists each epoch's items (JobSpec::epoch_items)
  // instead of the daemon's subset and split.
  bool listed() const { return spec.epoch_items.has_value(); }
  // Items per epoch for this rank: n, or ceil / floor(n / world_size); for a
  // listed job, what its lists hold.
  uint64_t ShardSize() const;
  uint64_t BatchesPerEpoch() const;
  // How many samples batch `batch_index` of an epoch holds: batch_size, but
  // the epoch's rest for the last batch unless drop_last.
  uint64_t BatchTarget(uint64_t batch_index) const;
  // The items this rank receives in `epoch` of a job that is not listed:
  // the whole subset, or its shard of the DistributedSampler-style split
  // (JobSpec::rank), sorted by id when the job shuffles (the sampling policy
  // decides the order) and in the sequential order otherwise. With
  // `resuming`, start_epoch's items the job consumed before a restart
  // (JobSpec::resume_consumed) are left out.
  std::vector<ItemId> SplitItems(uint64_t epoch, bool resuming = false) const;
  // A listed job's list for `epoch` as item ids: the whole epoch, or for a
  // resumed start epoch the items from position `from` on. InvalidArgument,
  // naming it, for an id outside the dataset or a list of another length
  // than the epoch's rest.
  Result<std::vector<ItemId>> CheckEpochList(uint64_t epoch, std::span<const uint64_t> items,
                                             uint64_t from = 0) const;
};

// The augmented tier's key of a pipeline's samples under `seed`: the
// canonical pipeline and the seed, the two things besides (epoch, item) a
// sample depends on.
std::string AugmentationSignature(const image::TransformPipeline& pipeline, uint64_t seed);

}  // namespace galley

#endif  // GALLEY_SERVER_SCHEDULING_JOB_PLAN_H_
