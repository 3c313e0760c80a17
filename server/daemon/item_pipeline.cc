#include "server/daemon/item_pipeline.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

namespace galley {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t NsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

}  // namespace

void RecordFailure(ItemTask& task, const std::string& message) {
  for (auto& d : task.deliveries) d.plan->errors[d.position] = message;
}

ItemPipeline::ItemPipeline(const PipelineOptions& options)
    : options_(options),
      threads_(options.worker_threads != 0 ? options.worker_threads
                                            : std::max(1u, std::thread::hardware_concurrency())),
      arena_(std::make_unique<tbb::task_arena>(static_cast<int>(threads_))) {}

ItemPipeline::~ItemPipeline() = default;

void ItemPipeline::Run(std::span<ItemTask> tasks) {
  arena_->execute([&] {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, tasks.size(), 1),
                      [&](const tbb::blocked_range<size_t>& range) {
                        for (size_t i = range.begin(); i != range.end(); ++i) RunOne(tasks[i]);
                      });
  });
}

void ItemPipeline::RunOne(ItemTask& task) {
  auto start = Clock::now();
  auto bytes = task.dataset->Read(task.item);
  counters_.read_ns += NsSince(start);
  if (!bytes.ok()) {
    counters_.failures++;
    const std::string message = task.dataset->path(task.item).string() + ": " + bytes.status().message();
    spdlog::warn("sample {} skipped: {}", task.item, message);
    RecordFailure(task, message);
    return;
  }
  counters_.file_reads++;
  counters_.bytes_read += bytes->size();

  start = Clock::now();
  auto image = image::Decode(*bytes, options_.decode);
  counters_.decode_ns += NsSince(start);
  if (!image.ok()) {
    counters_.failures++;
    const std::string message = task.dataset->path(task.item).string() + ": " + image.status().message();
    spdlog::warn("sample {} skipped: {}", task.item, message);
    RecordFailure(task, message);
    return;
  }
  counters_.decodes++;

  start = Clock::now();
  for (auto& d : task.deliveries) {
    SlotPlan& plan = *d.plan;
    ServedJob& job = *plan.job;
    const auto& g = job.ring->geometry();
    std::byte* dst = wire::SlotTensor(job.ring->slot(plan.slot), g) + g.sample_bytes * d.position;
    Status status = job.pipeline->Apply(*image, job.spec.seed, plan.epoch, task.item,
                                       std::span<std::byte>(dst, g.sample_bytes));
    if (!status.ok()) {
      counters_.failures++;
      plan.errors[d.position] = task.dataset->path(task.item).string() + ": " + status.message();
    }
    counters_.augments++;
  }
  counters_.augment_ns += NsSince(start);
}

nlohmann::json ItemPipeline::Describe() const {
  return {{"threads", threads_},
          {"file_reads", counters_.file_reads.load()},
          {"bytes_read", counters_.bytes_read.load()},
          {"decodes", counters_.decodes.load()},
          {"augments", counters_.augments.load()},
          {"failures", counters_.failures.load()},
          {"read_seconds", counters_.read_ns.load() / 1e9},
          {"decode_seconds", counters_.decode_ns.load() / 1e9},
          {"augment_seconds", counters_.augment_ns.load() / 1e9}};
}

}  // namespace galley
