// ServedJob: the daemon's record of one open job.
//
// Created by the JobManager when a client opens a job, shared with the
// scheduler and the pipeline (through the slots it fills). What the job is
// (spec, dataset, subset, transform, ring layout) is its JobPlan, fixed
// before the job is admitted and read by every component through `plan`;
// the ServedJob adds what changes while the job runs: its ring, its
// counters and a listed job's latest list. Production state (epoch, batch
// position) is the scheduler's. Counters are atomics readable from any
// thread for stats and metrics.
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
#include "galley/daemon/job_plan.h"
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
  // Items the job drew in rounds it shared while it had no free slot, not
  // yet placed in its batches (the scheduler's drawn-ahead queue), and the
  // most it has held at once.
  std::atomic<uint64_t> drawn_ahead{0};
  std::atomic<uint64_t> drawn_ahead_peak{0};
  // How many items the job's batches are behind the furthest job of its
  // sampler group (positions counted across epochs), at the last wave, and
  // the most it has been.
  std::atomic<uint64_t> lag{0};
  std::atomic<uint64_t> lag_peak{0};
  // RefreshCredentials requests whose credentials were admitted, and those
  // refused (the job kept signing with the ones it had).
  std::atomic<uint64_t> credential_refreshes{0};
  std::atomic<uint64_t> credential_refreshes_refused{0};
};

struct ServedJob {
  // `plan` is never null. `start_list`: a listed job's list of its start
  // epoch, as JobPlan::CheckEpochList gave it (ListEpoch replaces it).
  explicit ServedJob(std::shared_ptr<const JobPlan> plan, std::vector<ItemId> start_list = {});

  // What the job is; the same for its whole life.
  const std::shared_ptr<const JobPlan> plan;
  uint64_t id = 0;  // given when the job is admitted
  std::unique_ptr<BatchRing> ring;
  JobCounters counters;

  // Takes the client's list for `epoch` (a listed job), checked by
  // JobPlan::CheckEpochList, replacing the list of any other epoch.
  Status ListEpoch(uint64_t epoch, std::span<const uint64_t> items, uint64_t from = 0);
  // Whether the items of `epoch` are known: always, unless the job is
  // listed and its client has not listed that epoch.
  bool HasEpochItems(uint64_t epoch) const;
  // The items this rank receives in `epoch`: for a listed job the client's
  // list, in its order (empty for an epoch not listed); otherwise its
  // plan's split (JobPlan::SplitItems).
  std::vector<ItemId> EpochItems(uint64_t epoch, bool resuming = false) const;
  // A documented stand-in for a sample that failed: an item of the job's
  // shard of `epoch` that is not `failed` and not known to fail, chosen
  // uniformly from (seed, epoch, failed, attempt); `failed` itself when the
  // shard has no other candidate.
  ItemId Substitute(uint64_t epoch, ItemId failed, uint32_t attempt,
                    const std::function<bool(ItemId)>& known_to_fail) const;
  JobSnapshot Snapshot() const;

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
};

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_SERVED_JOB_H_
