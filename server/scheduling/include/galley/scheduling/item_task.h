// A wave's work as the Scheduler hands it over: the slots it fills (SlotPlan),
// the items that fill them (ItemTask, one per item with each slot position
// it goes to), what preparing a sampler group's items cost
// (PreparationCosts), and the ItemPreparer that prepares them.
//
// The scheduler plans a wave into these plain records under its lock, then
// hands the tasks to its ItemPreparer without the lock; the daemon's is the
// ItemPipeline (read, decode, transform through the cache tiers), which
// records each position's outcome in the plans. The interface is why the
// scheduler needs nothing of the pipeline's: tests plan waves with none,
// and the scheduling library does not depend on the daemon above it.
//
// Thread-safety: plain records, owned by the wave being planned and
// prepared; a task's plans are written by the thread preparing it, one
// position per delivery. PreparationCosts' counters are atomics.
#ifndef GALLEY_SERVER_SCHEDULING_ITEM_TASK_H_
#define GALLEY_SERVER_SCHEDULING_ITEM_TASK_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "galley/cache/blob.h"
#include "galley/ids.h"
#include "galley/scheduling/job_plan.h"
#include "galley/scheduling/served_job.h"

namespace galley {

// SlotPlan::dataset_changed's reasons for ending a job over a failed sample.
inline constexpr uint8_t kDatasetChanged = 1;
inline constexpr uint8_t kStoreUnreachable = 2;

// One slot being filled in this wave.
struct SlotPlan {
  std::shared_ptr<ServedJob> job;
  uint32_t slot = 0;
  uint64_t epoch = 0;
  uint64_t batch_index = 0;
  uint64_t generation = 0;
  uint32_t flags = 0;
  std::vector<ItemId> items;        // position -> item
  std::vector<std::string> errors;  // position -> failure ("" = prepared)
  // position -> why its failure is no bad file but one no substitute should
  // stand in for, so the job ends: kDatasetChanged (its file is gone, or its
  // shard is no longer the one listed) or kStoreUnreachable (the object
  // store it is kept in stayed unreachable through its retries); 0 for
  // none.
  std::vector<uint8_t> dataset_changed;
  // position -> the sample's field record as the job named its fields
  // (null for a job without fields).
  std::vector<cache::FieldRecord> fields;
  // Samples that failed and were replaced by a substitute, and the first
  // failure's message (reported with the batch).
  uint32_t substituted = 0;
  std::string first_failure;
  // Why the batch cannot go out as its position promises, so the job ends
  // instead (set by the scheduler); "" while it can.
  std::string unservable;

  // Clears every position's outcome before the pipeline runs.
  void ResetOutcomes() {
    errors.assign(items.size(), std::string());
    dataset_changed.assign(items.size(), 0);
    fields.assign(items.size(), nullptr);
  }
};

struct SlotPosition {
  SlotPlan* plan;
  uint32_t position;
};

// What preparing a sampler group's items cost, as the pipeline found it,
// one count per item prepared for its requests: with the requests, what
// tells whether jobs share their reads and decodes (docs/operations.md).
struct PreparationCosts {
  std::atomic<uint64_t> file_reads{0};  // items read from storage
  std::atomic<uint64_t> decodes{0};     // items decoded (an encoded-tier hit included)
  std::atomic<uint64_t> cache_hits{0};  // items neither read nor decoded: a tier had them
};

struct ItemTask {
  // The plan of a job the item is prepared for (one of the receivers').
  // What preparing the item reads of it, the dataset, its number (with
  // `item`, the cache key) and what makes a dataset instance
  // (max_resolution), is the same for every job the item is delivered to:
  // they read one instance (DatasetRegistry). The wave's SlotPlans keep it
  // alive.
  const JobPlan* job_plan = nullptr;
  ItemId item = 0;
  std::vector<SlotPosition> deliveries;
  // Where the pipeline counts what the item cost; null: nowhere (a
  // substitute for a failed sample).
  std::shared_ptr<PreparationCosts> costs;
  // The decoded tier's entry for the item, looked up by Run for every task
  // of the wave before any is prepared (null: the tier did not hold it), so
  // that what another task of the wave offers the tier cannot push it out
  // before this task takes it.
  cache::BlobPtr decoded_entry;
  bool decoded_looked_up = false;
  // Set by the pipeline while it prepares the item.
  bool read_from_storage = false;
  bool decoded = false;
  bool from_cache = false;

  const Dataset& dataset() const { return *job_plan->dataset; }
};

// What prepares a wave's items: every task, its failures recorded per
// position in its plans. Called by one thread (the scheduler's) at a time.
class ItemPreparer {
 public:
  virtual ~ItemPreparer() = default;
  virtual void Run(std::span<ItemTask> tasks) = 0;
  // Run(tasks), knowing that `next` is the wave planned after them: a
  // preparer whose reads wait on the network may start reading the next
  // wave's items while it prepares these. The scheduler passes a next wave
  // only when one of its wave's datasets reads objects.
  virtual void RunBeforeNext(std::span<ItemTask> tasks, std::span<const ItemTask> /*next*/) {
    Run(tasks);
  }
};

}  // namespace galley

#endif  // GALLEY_SERVER_SCHEDULING_ITEM_TASK_H_
