// DemandLedger: what each job still needs of its current epoch, kept
// current in the cache's DemandTracker so that the tiers rank entries by
// the jobs that will still ask for them (docs/cache.md, "Demand").
//
// A job's epoch enters the ledger whole when the job enters the sampler for
// it (Enter); each item leaves it when the scheduler places the item in one
// of the job's batches (Consume), which is while the wave is planned, before
// the pipeline offers the item to a tier (an item the job drew ahead keeps
// its demand until then); whatever the job had not received leaves it when the
// job leaves the epoch, at its end or early (Leave: Seek, close, a job that
// cannot go on). The ledger remembers which items each job still needs, so
// that Leave drops exactly those, an item the epoch holds twice counted
// twice, and a Consume the job had no demand for changes nothing.
//
// While the scheduler prepares one wave with the next one planned already
// (SchedulerOptions::plan_next_wave), the next wave's changes wait (Defer,
// then ApplyDeferred once the wave is prepared): the tiers then rank this
// wave's items by the demand they had when it was planned, as without the
// plan-ahead. Had the next wave's deliveries counted at once, an item this
// wave reads for one job and the next one for another would have been
// offered with no demand left and declined, and fetched again.
//
// Cache keys are cache::MakeKey(dataset_index, item), dataset_index being
// the job's DatasetRegistry number (JobPlan::dataset_index).
//
// Not thread-safe: one owner calls it, the Scheduler, under its mutex
// (Scheduler::ledger_ is GUARDED_BY it). The DemandTracker it writes to is
// thread-safe; the tiers read it from the pipeline's threads.
#ifndef GALLEY_SERVER_SCHEDULING_DEMAND_LEDGER_H_
#define GALLEY_SERVER_SCHEDULING_DEMAND_LEDGER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "galley/cache/demand_tracker.h"
#include "galley/ids.h"

namespace galley {

class DemandLedger {
 public:
  // Records into `tracker`, which must outlive the ledger; null (no cache)
  // makes every call a no-op.
  explicit DemandLedger(cache::DemandTracker* tracker) : tracker_(tracker) {}
  DemandLedger(const DemandLedger&) = delete;
  DemandLedger& operator=(const DemandLedger&) = delete;

  // `job` starts an epoch of `dataset_index` (items below `dataset_size`)
  // and needs each of `items` and each of `repeats` once more: an item named
  // twice, in either, is needed twice. Drops first whatever the job still
  // needed of an epoch it had not left. An empty `items` registers nothing.
  void Enter(JobId job, uint32_t dataset_index, size_t dataset_size, std::span<const ItemId> items,
             std::span<const ItemId> repeats = {});
  // `job` received `item`: one copy of it is no longer needed. Nothing
  // changes if the job had no demand left for it.
  void Consume(JobId job, ItemId item);
  // `job` leaves its epoch: the demand it still had is dropped. Safe for a
  // job the ledger does not know.
  void Leave(JobId job);

  // From now until ApplyDeferred, Enter, Consume and Leave are queued, not
  // made. Idempotent.
  void Defer() { deferring_ = true; }
  // Makes the queued changes, in the order they were asked for, and ends
  // the deferral.
  void ApplyDeferred();

  // Copies of items `job` still needs this epoch (0 for a job not in it),
  // deferred changes not counted.
  uint64_t Outstanding(JobId job) const;

 private:
  // A change asked for while deferring.
  struct Change {
    enum class Kind { kEnter, kConsume, kLeave };
    Kind kind;
    JobId job;
    ItemId item = 0;  // kConsume
    // kEnter:
    uint32_t dataset_index = 0;
    size_t dataset_size = 0;
    std::vector<ItemId> items;
    std::vector<ItemId> repeats;
  };

  void EnterNow(JobId job, uint32_t dataset_index, size_t dataset_size,
                std::span<const ItemId> items, std::span<const ItemId> repeats);
  void ConsumeNow(JobId job, ItemId item);
  void LeaveNow(JobId job);

  struct JobDemand {
    uint32_t dataset_index = 0;
    // Indexed by item id: the job still needs the item; the rare item the
    // epoch holds more than once counts its further copies apart.
    std::vector<bool> undelivered;
    std::unordered_map<ItemId, uint32_t> undelivered_again;
    uint64_t outstanding = 0;
  };

  cache::DemandTracker* const tracker_;
  std::unordered_map<JobId, JobDemand> jobs_;  // the jobs with demand
  bool deferring_ = false;
  std::vector<Change> deferred_;
};

}  // namespace galley

#endif  // GALLEY_SERVER_SCHEDULING_DEMAND_LEDGER_H_
