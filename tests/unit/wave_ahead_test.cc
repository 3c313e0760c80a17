// A wave of a dataset of objects is prepared while the next one's GETs are
// in flight: the scheduler plans the next wave before it prepares the
// current one, and the ItemPipeline fetches the next wave's items behind
// the current wave's. Runs the real Scheduler and ItemPipeline over JPEGs
// kept one per object in an in-memory store that holds its GETs on demand;
// a local dataset's waves are prepared without a next wave, as before.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "galley/cache/tiered_cache.h"
#include "galley/daemon/item_pipeline.h"
#include "galley/dataset/dataset.h"
#include "galley/scheduling/scheduler.h"
#include "galley/scheduling/served_job.h"
#include "tests/unit/objectstore/in_memory_object_store.h"
#include "tests/unit/objectstore/object_test_support.h"
#include "tests/unit/served_job_for_test.h"
#include "wire/segment_layout.h"

namespace galley {
namespace {

namespace fs = std::filesystem;
using testing::AccessFor;
using testing::InMemoryObjectStore;

constexpr int kClasses = 4;
constexpr int kPerClass = 4;
constexpr ItemId kItems = kClasses * kPerClass;
constexpr uint32_t kBatch = 4;  // four batches to an epoch
constexpr uint32_t kSlots = 4;  // the ring holds one epoch: nothing consumes

// A JPEG of noise, about `height` x `width`.
std::vector<uint8_t> Jpeg(int seed, int height = 40, int width = 48) {
  cv::Mat image(height + seed % 5, width + seed % 3, CV_8UC3);
  cv::RNG rng(static_cast<uint64_t>(seed) + 1);
  rng.fill(image, cv::RNG::UNIFORM, 0, 255);
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(cv::imencode(".jpg", image, bytes));
  return bytes;
}

// One job over the whole dataset, `batch` items a batch, its ring `slots`
// batches.
std::shared_ptr<ServedJob> MakeJob(std::shared_ptr<const Dataset> dataset, uint32_t batch = kBatch,
                                   uint32_t slots = kSlots) {
  return testing::MakeServedJob(std::move(dataset),
                                {.batch_size = batch,
                                 .slots = slots,
                                 .ops = R"({"ops": [{"op": "RandomResizedCrop", "size": 16}]})",
                                 .side = 16});
}

// Polls the job's batch counter; false after a minute (a hang, not a
// bound on how long production takes).
bool WaitForBatches(const ServedJob& job, uint64_t batches) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < give_up) {
    if (job.counters.batches.load() >= batches) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// Polls the store until `gets` GETs are in flight; false after a minute
// (they never will be: a scheduler that fetches nothing ahead).
bool WaitForGetsInFlight(const InMemoryObjectStore& store, uint64_t gets) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < give_up) {
    if (store.counters().in_flight.load() == gets) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// The items of published slot `slot`.
std::vector<ItemId> SlotItems(const ServedJob& job, uint32_t slot) {
  wire::SlotHeader* header = job.ring->slot(slot);
  const uint64_t* ids = wire::SlotItemIds(header);
  return std::vector<ItemId>(ids, ids + header->sample_count);
}

TEST(WaveAheadTest, TheNextWavesGetsAreInFlightBeforeThisWavesTasksFinish) {
  auto store = std::make_shared<InMemoryObjectStore>();
  store->Allow("bucket", "alice");
  for (int c = 0; c < kClasses; ++c) {
    for (int i = 0; i < kPerClass; ++i) {
      store->Put("bucket", "train/c" + std::to_string(c) + "/" + std::to_string(i) + ".jpg",
                 Jpeg(c * kPerClass + i));
    }
  }
  auto dataset = Dataset::OpenObjectFolder("s3://bucket/train/", store, AccessFor("alice"), {}, {});
  ASSERT_TRUE(dataset.ok()) << dataset.status().ToString();
  ASSERT_EQ((*dataset)->size(), size_t{kItems});
  ASSERT_TRUE((*dataset)->reads_objects());

  ItemPipeline pipeline(PipelineOptions{.worker_threads = 2});
  Scheduler scheduler(SchedulerOptions{}, &pipeline);
  auto job = MakeJob(*dataset);
  ASSERT_TRUE(scheduler.OnJobOpened(job).ok());
  scheduler.OnConsumerReady(job->id);
  const uint64_t gets_before = store->counters().gets.load();
  store->Hold();
  scheduler.Start();
  // Every GET is held, so none of the first wave's tasks can finish; yet
  // the second wave's four GETs are in flight beside the first wave's.
  const bool both_waves = WaitForGetsInFlight(*store, 2 * kBatch);
  EXPECT_TRUE(both_waves) << "GETs in flight: " << store->counters().in_flight.load();
  EXPECT_EQ(store->counters().gets.load() - gets_before, 2 * kBatch);
  EXPECT_EQ(job->counters.batches.load(), 0u);
  store->Release();

  // The ring takes one epoch; each item was fetched by exactly one GET, so
  // the items fetched ahead were the ones the next waves read, each once.
  ASSERT_TRUE(WaitForBatches(*job, kSlots));
  scheduler.OnJobClosed(job->id);
  scheduler.Stop();
  std::set<ItemId> served;
  for (uint32_t s = 0; s < kSlots; ++s) {
    for (ItemId item : SlotItems(*job, s)) served.insert(item);
  }
  EXPECT_EQ(served.size(), size_t{kItems});
  EXPECT_EQ(store->counters().gets.load() - gets_before, uint64_t{kItems});
  EXPECT_EQ(pipeline.counters().failures.load(), 0u);
  EXPECT_EQ(pipeline.counters().file_reads.load(), uint64_t{kItems});
}

// What planning the next wave buys when each GET takes a round trip and a
// wave's decodes take longer than one: one job's epoch of 256 JPEGs of
// 480x360 in batches of 16, prepared by two threads, against a store that
// answers each GET 20 ms after it was sent, with and without the next
// wave planned ahead, and with no latency. Every epoch must be whole and
// each item fetched once; the rates are printed, for the record (they
// depend on the machine's load).
TEST(WaveAheadTest, WithARoundTripPerGetTheNextWavesFetchesHideBehindTheDecodes) {
  constexpr ItemId kImages = 256;
  constexpr uint32_t kBigBatch = 16;
  constexpr uint32_t kRingSlots = kImages / kBigBatch;  // one epoch, nothing consumes
  auto store = std::make_shared<InMemoryObjectStore>();
  store->Allow("bucket", "alice");
  for (ItemId i = 0; i < kImages; ++i) {
    store->Put("bucket", "far/c" + std::to_string(i % 4) + "/" + std::to_string(i) + ".jpg",
               Jpeg(static_cast<int>(i), 360, 480));
  }
  auto dataset = Dataset::OpenObjectFolder("s3://bucket/far/", store, AccessFor("alice"), {}, {});
  ASSERT_TRUE(dataset.ok()) << dataset.status().ToString();
  auto epoch_rate = [&](std::chrono::milliseconds latency, bool plan_next_wave) {
    store->set_latency(latency);
    ItemPipeline pipeline(PipelineOptions{.worker_threads = 2});
    SchedulerOptions options;
    options.plan_next_wave = plan_next_wave;
    Scheduler scheduler(options, &pipeline);
    auto job = MakeJob(*dataset, kBigBatch, kRingSlots);
    EXPECT_TRUE(scheduler.OnJobOpened(job).ok());
    const uint64_t gets_before = store->counters().gets.load();
    const auto start = std::chrono::steady_clock::now();
    scheduler.OnConsumerReady(job->id);
    scheduler.Start();
    EXPECT_TRUE(WaitForBatches(*job, kRingSlots));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    scheduler.OnJobClosed(job->id);
    scheduler.Stop();
    EXPECT_EQ(store->counters().gets.load() - gets_before, uint64_t{kImages});
    EXPECT_EQ(pipeline.counters().failures.load(), 0u);
    // The threads' time in reads: what they waited for bytes.
    return std::make_pair(kImages / seconds, pipeline.counters().read_ns.load() / 1e9);
  };
  const auto [one_wave, one_wave_wait] = epoch_rate(std::chrono::milliseconds(20), false);
  const auto [ahead, ahead_wait] = epoch_rate(std::chrono::milliseconds(20), true);
  const auto [quick, quick_wait] = epoch_rate(std::chrono::milliseconds(0), true);
  std::printf(
      "256 JPEGs 480x360, batch 16, 2 threads: %.0f img/s at 0 ms (reads %.2f s); at 20 ms a "
      "GET, %.0f img/s one wave at a time (reads %.2f s), %.0f img/s with the next wave's GETs in "
      "flight (reads %.2f s)\n",
      quick, quick_wait, one_wave, one_wave_wait, ahead, ahead_wait);
}

// Records what the scheduler hands its preparer, and, given the cache's
// demand, the least demand any of the next wave's items has while a wave is
// prepared; prepares nothing (each sample stays as the ring had it).
class RecordingPreparer final : public ItemPreparer {
 public:
  explicit RecordingPreparer(const cache::DemandTracker* demand = nullptr) : demand_(demand) {}
  void Run(std::span<ItemTask> tasks) override { RunBeforeNext(tasks, {}); }
  void RunBeforeNext(std::span<ItemTask> /*tasks*/, std::span<const ItemTask> next) override {
    std::lock_guard<std::mutex> lock(mu_);
    waves_++;
    if (!next.empty()) waves_with_next_++;
    if (demand_ == nullptr) return;
    for (const ItemTask& task : next) {
      const uint32_t demand =
          demand_->Demand(cache::MakeKey(task.job_plan->dataset_index, task.item));
      least_next_demand_ = std::min(least_next_demand_.value_or(demand), demand);
    }
  }
  std::optional<uint32_t> least_next_demand() const {
    std::lock_guard<std::mutex> lock(mu_);
    return least_next_demand_;
  }
  uint64_t waves() const {
    std::lock_guard<std::mutex> lock(mu_);
    return waves_;
  }
  uint64_t waves_with_next() const {
    std::lock_guard<std::mutex> lock(mu_);
    return waves_with_next_;
  }

 private:
  const cache::DemandTracker* const demand_;
  mutable std::mutex mu_;
  uint64_t waves_ = 0;
  uint64_t waves_with_next_ = 0;
  std::optional<uint32_t> least_next_demand_;
};

// One job over `dataset` until its ring is full (one epoch), prepared by
// `preparer`, then closed.
void ServeTheRing(std::shared_ptr<const Dataset> dataset, ItemPreparer* preparer,
                  cache::TieredCache* cache = nullptr) {
  Scheduler scheduler(SchedulerOptions{}, preparer, cache);
  auto job = MakeJob(std::move(dataset));
  ASSERT_TRUE(scheduler.OnJobOpened(job).ok());
  scheduler.OnConsumerReady(job->id);
  scheduler.Start();
  ASSERT_TRUE(WaitForBatches(*job, kSlots));
  scheduler.OnJobClosed(job->id);
  scheduler.Stop();
}

// The tiers rank what a wave reads by the demand left after it: an item the
// next wave reads for a job must still count that job's demand while this
// wave is prepared, or a tier declines it (demand 0) when this wave offers
// it for another job, and the next wave fetches it again. One job, each
// item once an epoch: every item of a next wave is needed once then.
TEST(WaveAheadTest, TheNextWavesItemsKeepTheirDemandWhileThisWaveIsPrepared) {
  auto store = std::make_shared<InMemoryObjectStore>();
  store->Allow("bucket", "alice");
  for (ItemId i = 0; i < kItems; ++i) {
    store->Put("bucket", "d/c" + std::to_string(i % kClasses) + "/" + std::to_string(i) + ".jpg",
               Jpeg(static_cast<int>(i)));
  }
  auto dataset = Dataset::OpenObjectFolder("s3://bucket/d/", store, AccessFor("alice"), {}, {});
  ASSERT_TRUE(dataset.ok()) << dataset.status().ToString();
  cache::CacheOptions cache_options;
  cache_options.cache_bytes = 1 << 20;
  cache_options.decoded_arena = false;
  auto cache = cache::TieredCache::Create(cache_options);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();

  RecordingPreparer preparer(&(*cache)->demand());
  ASSERT_NO_FATAL_FAILURE(ServeTheRing(*dataset, &preparer, cache->get()));
  EXPECT_EQ(preparer.waves_with_next(), uint64_t{kSlots - 1});
  ASSERT_TRUE(preparer.least_next_demand().has_value());
  EXPECT_EQ(*preparer.least_next_demand(), 1u);
  // Closed: every demand the job had is gone.
  EXPECT_EQ((*cache)->demand().TotalDemand(), 0u);
}

TEST(WaveAheadTest, ALocalDatasetsWavesArePreparedWithoutANextWave) {
  testing::ScratchDir dir("galley-wave-ahead");
  for (int c = 0; c < kClasses; ++c) {
    fs::create_directories(dir.path() / ("c" + std::to_string(c)));
    for (int i = 0; i < kPerClass; ++i) {
      const std::vector<uint8_t> bytes = Jpeg(c * kPerClass + i);
      std::ofstream(dir.path() / ("c" + std::to_string(c)) / (std::to_string(i) + ".jpg"),
                    std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()),
                 static_cast<std::streamsize>(bytes.size()));
    }
  }
  auto dataset = Dataset::Open(dir.path(), {});
  ASSERT_TRUE(dataset.ok()) << dataset.status().ToString();
  ASSERT_FALSE((*dataset)->reads_objects());

  RecordingPreparer preparer;
  ASSERT_NO_FATAL_FAILURE(ServeTheRing(*dataset, &preparer));
  EXPECT_EQ(preparer.waves(), uint64_t{kSlots});
  EXPECT_EQ(preparer.waves_with_next(), 0u);
}

}  // namespace
}  // namespace galley
