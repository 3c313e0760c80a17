// ServedJob: the daemon's record of one open job.
//
// Created by the JobManager when a client opens a job, shared with the
// scheduler. The spec, dataset, pipeline and ring are fixed at creation.
// Production state (epoch, batch counters) belongs to the scheduler thread;
// counters are atomics readable from any thread for stats and metrics.
#ifndef GALLEY_SERVER_DAEMON_SERVED_JOB_H_
#define GALLEY_SERVER_DAEMON_SERVED_JOB_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "galley/daemon/batch_ring.h"
#include "galley/dataset/dataset.h"
#include "galley/image/transforms.h"
#include "galley/job_spec.h"
#include "galley/mutex.h"
#include "galley/snapshots/snapshots.h"

namespace galley {

struct JobCounters {
  std::atomic<uint64_t> batches{0};  // published
  // Prepared but never taken by the consumer: in the ring, or being
  // prepared, when the job sought to another epoch.
  std::atomic<uint64_t> unread{0};
  std::atomic<uint64_t> samples{0};
  std::atomic<uint64_t> skipped{0};
  std::atomic<uint64_t> epochs_completed{0};
  std::atomic<uint64_t> produce_ns{0};  // time spent preparing this job's batches
  // Time the job's ring had no free slot (its consumer was slower than
  // galleyd, or held its batches), including a stretch in progress; kept
  // by the scheduler.
  std::atomic<uint64_t> blocked_ns{0};
  // Time the scheduler held the job back so that a peer could share a wave
  // (bounded per epoch by GateOptions::hold_budget_per_epoch).
  std::atomic<uint64_t> held_ns{0};
  std::atomic<uint64_t> holds{0};  // how many holds held_ns sums
};

struct ServedJob {
  uint64_t id = 0;
  JobSpec spec;
  uid_t owner_uid = 0;
  pid_t owner_pid = 0;
  std::shared_ptr<const Dataset> dataset;
  // The dataset's number in the DatasetRegistry: the dataset half of the
  // job's cache keys (cache::MakeKey).
  uint32_t dataset_index = 0;
  // For each of spec.fields, its index among the dataset's fields
  // (Dataset::field_names); empty without fields.
  std::vector<uint32_t> field_map;
  std::shared_ptr<const image::TransformPipeline> pipeline;
  std::vector<ItemId> subset;  // sorted, distinct
  uint64_t epoch_size = 0;     // items this rank receives per epoch
  // The ring's layout, decided before the ring exists.
  wire::SegmentGeometry geometry;
  TensorShape shape;
  std::unique_ptr<BatchRing> ring;
  std::string policy;  // the sampling policy actually used
  std::chrono::steady_clock::time_point opened_at = std::chrono::steady_clock::now();

  JobCounters counters;

 private:
  // Substitute's copy of the last DDP shard it needed.
  mutable Mutex substitute_mu_;
  mutable uint64_t substitute_epoch_ GUARDED_BY(substitute_mu_) = 0;
  mutable std::vector<ItemId> substitute_shard_ GUARDED_BY(substitute_mu_);
  // A listed job's latest list (JobSpec::epoch_items, then SeekEpoch's):
  // set from the connection's thread, read by the scheduler's.
  mutable Mutex listed_mu_;
  uint64_t listed_epoch_ GUARDED_BY(listed_mu_) = 0;
  std::shared_ptr<const std::vector<ItemId>> listed_items_ GUARDED_BY(listed_mu_);

 public:
  // Whether the client lists each epoch's items (JobSpec::epoch_items)
  // instead of the daemon's subset and split.
  bool listed() const { return spec.epoch_items.has_value(); }
  // Takes the client's list for `epoch` (a listed job): the whole epoch, or
  // for a resumed start epoch the items from position `from` on, replacing
  // the list of any other epoch. InvalidArgument, naming it, for an id
  // outside the dataset or a list of another length than the epoch's rest.
  Status ListEpoch(uint64_t epoch, std::span<const uint64_t> items, uint64_t from = 0);
  // Whether the items of `epoch` are known: always, unless the job is
  // listed and its client has not listed that epoch.
  bool HasEpochItems(uint64_t epoch) const;
  // The items this rank receives in `epoch`: for a listed job the client's
  // list, in its order (empty for an epoch not listed); otherwise the whole
  // subset, or its shard of the DistributedSampler-style split
  // (JobSpec::rank), sorted by id when the job shuffles (the sampling policy
  // decides the order) and in the sequential order otherwise. With
  // `resuming`, start_epoch's items the job consumed before a restart
  // (JobSpec::resume_consumed) are left out.
  std::vector<ItemId> EpochItems(uint64_t epoch, bool resuming = false) const;
  // Items per epoch for this rank: n, or ceil / floor(n / world_size); for a
  // listed job, what its lists hold.
  uint64_t ShardSize() const;
  uint64_t BatchesPerEpoch() const;
  // How many samples batch `batch_index` of an epoch holds: batch_size, but
  // the epoch's rest for the last batch unless drop_last.
  uint64_t BatchTarget(uint64_t batch_index) const;
  // A documented stand-in for a sample that failed: an item of the job's
  // shard of `epoch` that is not `failed` and not known to fail, chosen
  // uniformly from (seed, epoch, failed, attempt); `failed` itself when the
  // shard has no other candidate.
  ItemId Substitute(uint64_t epoch, ItemId failed, uint32_t attempt,
                    const std::function<bool(ItemId)>& known_to_fail) const;
  JobSnapshot Snapshot() const;
};

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_SERVED_JOB_H_
