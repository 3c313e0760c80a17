// ItemPipeline: prepares the items of one scheduling wave in parallel.
//
// Each ItemTask is one item of one dataset with the slot positions it must
// be written to (one per receiving job). The item is read and decoded once;
// each receiving job's own transform then writes straight into its slot in
// shared memory. Runs on a TBB arena of `worker_threads`; Run() is called by
// one thread (the scheduler) at a time. Counters are atomics, readable from
// any thread.
#ifndef GALLEY_SERVER_DAEMON_ITEM_PIPELINE_H_
#define GALLEY_SERVER_DAEMON_ITEM_PIPELINE_H_

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "server/daemon/served_job.h"
#include "server/image/decoder.h"
#include <tbb/task_arena.h>

namespace galley {

// One slot being filled in this wave.
struct SlotPlan {
  std::shared_ptr<ServedJob> job;
  uint32_t slot = 0;
  uint64_t epoch = 0;
  uint64_t batch_index = 0;
  uint64_t generation = 0;
  uint32_t flags = 0;
  std::vector<ItemId> items;         // position -> item
  std::vector<std::string> errors;   // position -> failure ("" = prepared)
};

struct SlotPosition {
  SlotPlan* plan;
  uint32_t position;
};

struct ItemTask {
  const Dataset* dataset;
  ItemId item;
  std::vector<SlotPosition> deliveries;
};

struct PipelineCounters {
  std::atomic<uint64_t> file_reads{0};
  std::atomic<uint64_t> bytes_read{0};
  std::atomic<uint64_t> decodes{0};
  std::atomic<uint64_t> augments{0};
  std::atomic<uint64_t> failures{0};
  std::atomic<uint64_t> read_ns{0};
  std::atomic<uint64_t> decode_ns{0};
  std::atomic<uint64_t> augment_ns{0};
};

struct PipelineOptions {
  uint32_t worker_threads = 0;  // 0 = one per core
  image::DecodeOptions decode;
};

class ItemPipeline {
 public:
  explicit ItemPipeline(const PipelineOptions& options);
  ~ItemPipeline();

  // Prepares every task; failures are recorded per position in the plans.
  void Run(std::span<ItemTask> tasks);

  const PipelineCounters& counters() const { return counters_; }
  nlohmann::json Describe() const;
  uint32_t threads() const { return threads_; }

 private:
  void RunOne(ItemTask& task);

  PipelineOptions options_;
  uint32_t threads_;
  std::unique_ptr<tbb::task_arena> arena_;
  PipelineCounters counters_;
};

// Writes one failure per position of `task` into the plans.
void RecordFailure(ItemTask& task, const std::string& message);

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_ITEM_PIPELINE_H_
