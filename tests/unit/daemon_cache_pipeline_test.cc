// The daemon's use of the cache: ItemPipeline really skips reads and decodes
// on tier hits (its counters prove it), the augmented tier shares only
// identical samples, and the scheduler keeps the demand counts exact when a
// job leaves mid-epoch and counts once each batch no consumer took. Runs on a
// small JPEG ImageFolder written per test.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <random>
#include <thread>
#include <vector>

#include "galley/cache/tiered_cache.h"
#include "galley/daemon/item_pipeline.h"
#include "galley/image/max_resolution.h"
#include "galley/image/pixel_codec.h"
#include "galley/remote/remote_cache.h"
#include "galley/scheduling/scheduler.h"
#include "galley/scheduling/served_job.h"
#include "tests/unit/served_job_for_test.h"
#include "wire/segment_layout.h"

namespace galley {
namespace {

namespace fs = std::filesystem;

constexpr int kClasses = 3;
constexpr int kPerClass = 4;
constexpr int kItems = kClasses * kPerClass;

class DaemonCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "galley_daemon_cache_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    cv::RNG rng(7);
    for (int c = 0; c < kClasses; ++c) {
      fs::create_directories(root_ / ("class" + std::to_string(c)));
      for (int i = 0; i < kPerClass; ++i) {
        // Different sizes, so a mixed-up cache entry would show.
        cv::Mat image(60 + 7 * i, 80 + 5 * c, CV_8UC3);
        rng.fill(image, cv::RNG::UNIFORM, 0, 255);
        std::vector<uint8_t> bytes;
        ASSERT_TRUE(cv::imencode(".jpg", image, bytes));
        std::ofstream out(
            root_ / ("class" + std::to_string(c)) / ("img" + std::to_string(i) + ".jpg"),
            std::ios::binary);
        out.write(reinterpret_cast<const char*>(bytes.data()),
                  static_cast<std::streamsize>(bytes.size()));
      }
    }
    auto dataset = Dataset::Open(root_, {});
    ASSERT_TRUE(dataset.ok()) << dataset.status().ToString();
    dataset_ = *dataset;
    ASSERT_EQ(dataset_->size(), size_t{kItems});
  }

  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // A job over the whole dataset with a RandomResizedCrop(32) + flip pipeline
  // (or `ops`), its images kept at `max_resolution` (0: their own size).
  std::shared_ptr<ServedJob> MakeJob(uint64_t id, uint64_t seed, uint32_t batch_size,
                                     uint32_t prefetch, uint32_t max_resolution = 0,
                                     const char* ops = nullptr) {
    testing::ServedJobOptions options{.id = id,
                                      .seed = seed,
                                      .batch_size = batch_size,
                                      .slots = prefetch,
                                      .max_resolution = max_resolution};
    options.ops = ops != nullptr ? ops
                                 : R"({"ops": [{"op": "RandomResizedCrop", "size": 32}, )"
                                   R"({"op": "RandomHorizontalFlip"}]})";
    return testing::MakeServedJob(dataset_, options);
  }

  // Prepares every item once for `job` in `epoch`, as one wave with one
  // batch, with the job's max_resolution; returns the batch's tensor bytes.
  std::vector<std::byte> RunPass(ItemPipeline& pipeline, const std::shared_ptr<ServedJob>& job,
                                 uint64_t epoch) {
    auto slot = job->ring->Claim();
    EXPECT_TRUE(slot.has_value());
    SlotPlan plan;
    plan.job = job;
    plan.slot = *slot;
    plan.epoch = epoch;
    std::vector<ItemTask> tasks;
    for (ItemId item = 0; item < kItems; ++item) {
      tasks.push_back(ItemTask{job->plan.get(), item, {{&plan, item}}});
      plan.items.push_back(item);
    }
    plan.ResetOutcomes();
    pipeline.Run(tasks);
    for (const std::string& error : plan.errors) EXPECT_EQ(error, "");
    const auto& g = job->ring->geometry();
    const std::byte* tensor = wire::SlotTensor(job->ring->slot(*slot), g);
    std::vector<std::byte> out(tensor, tensor + g.sample_bytes * kItems);
    job->ring->Unclaim(*slot);
    return out;
  }

  static std::unique_ptr<cache::TieredCache> MakeCache(cache::Split split) {
    cache::CacheOptions options;
    options.cache_bytes = uint64_t{64} << 20;  // every tier holds the whole dataset
    options.split = split;
    auto cache = cache::TieredCache::Create(options);
    EXPECT_TRUE(cache.ok()) << cache.status().ToString();
    return cache.ok() ? std::move(cache).value() : nullptr;
  }

  // What the scheduler does when the job starts an epoch and receives every
  // item: demand added, then consumed before the pipeline offers the items.
  static void AddAndConsumeDemand(cache::TieredCache& cache) {
    std::vector<cache::Key> keys;
    for (ItemId item = 0; item < kItems; ++item) keys.push_back(cache::MakeKey(0, item));
    cache.demand().AddDemand(keys);
    for (cache::Key key : keys) ASSERT_TRUE(cache.demand().ConsumeDemand(key));
  }

  fs::path root_;
  std::shared_ptr<const Dataset> dataset_;
};

struct Counts {
  uint64_t reads, decodes, augments, decoded_hits, encoded_hits, augmented_hits;
};

Counts Snapshot(const ItemPipeline& pipeline) {
  const PipelineCounters& c = pipeline.counters();
  return {c.file_reads.load(),   c.decodes.load(),      c.augments.load(),
          c.decoded_hits.load(), c.encoded_hits.load(), c.augmented_hits.load()};
}

TEST_F(DaemonCacheTest, DecodedTierSkipsReadAndDecodeInTheSecondEpoch) {
  auto cache = MakeCache({0, 100, 0});
  ItemPipeline pipeline(PipelineOptions{.worker_threads = 2}, cache.get());
  auto job = MakeJob(1, 5, kItems, 1);

  AddAndConsumeDemand(*cache);
  RunPass(pipeline, job, 0);
  const Counts first = Snapshot(pipeline);
  EXPECT_EQ(first.reads, uint64_t{kItems});
  EXPECT_EQ(first.decodes, uint64_t{kItems});
  EXPECT_EQ(cache->decoded().Stats().entries, uint64_t{kItems});
  EXPECT_EQ(cache->encoded().Stats().entries, 0u);
  // The entries' pixels are in the decoded tier's arena.
  ASSERT_TRUE(cache->Stats().decoded_arena.has_value());
  EXPECT_EQ(cache->Stats().decoded_arena->blocks, uint64_t{kItems});

  AddAndConsumeDemand(*cache);
  const std::vector<std::byte> cached = RunPass(pipeline, job, 1);
  const Counts second = Snapshot(pipeline);
  EXPECT_EQ(second.reads, first.reads);
  EXPECT_EQ(second.decodes, first.decodes);
  EXPECT_EQ(second.decoded_hits, uint64_t{kItems});
  EXPECT_EQ(second.augments, 2u * kItems);

  // Cached pixels give exactly the samples a fresh read and decode gives.
  ItemPipeline uncached(PipelineOptions{.worker_threads = 2}, nullptr);
  EXPECT_EQ(RunPass(uncached, job, 1), cached);
}

// A wave's decoded-tier hits are served even when a miss of the same wave,
// offered first, pushes their entries out: the pipeline looks up every item
// of the wave before it prepares any. Here the tier has room for one image;
// item 0 is resident and no job needs it any more, item 1 is still needed
// by another job, so item 1's offer evicts item 0. One worker prepares the
// wave's items in order, item 1 first: item 0 must still be a hit. (The
// pipeline starts with a Resize: one that starts with a crop would decode
// only the crop's region of item 1 while the tier is full, and offer
// nothing.)
TEST_F(DaemonCacheTest, AWavesHitsAreServedBeforeItsMissesAreOffered) {
  cache::CacheOptions options;
  options.cache_bytes = 20'000;  // one decoded 80 x 60 or 80 x 67 image (14-16 kB), not two
  options.split = {0, 100, 0};
  auto cache = cache::TieredCache::Create(options).value();
  ItemPipeline pipeline(PipelineOptions{.worker_threads = 1}, cache.get());
  auto job =
      MakeJob(1, 5, 2, 1, 0,
              R"({"ops": [{"op": "Resize", "size": 32}, {"op": "CenterCrop", "size": 32}]})");
  auto run = [&](std::vector<ItemId> items) {
    auto slot = job->ring->Claim();
    ASSERT_TRUE(slot.has_value());
    SlotPlan plan;
    plan.job = job;
    plan.slot = *slot;
    std::vector<ItemTask> tasks;
    for (uint32_t position = 0; position < items.size(); ++position) {
      tasks.push_back(ItemTask{job->plan.get(), items[position], {{&plan, position}}});
      plan.items.push_back(items[position]);
    }
    plan.ResetOutcomes();
    pipeline.Run(tasks);
    for (const std::string& error : plan.errors) EXPECT_EQ(error, "");
    job->ring->Unclaim(*slot);
  };
  run({0});
  ASSERT_TRUE(cache->decoded().Contains(cache::MakeKey(0, 0)));
  const std::vector<cache::Key> still_needed = {cache::MakeKey(0, 1)};
  cache->demand().AddDemand(still_needed);

  const Counts before = Snapshot(pipeline);
  run({1, 0});
  const Counts after = Snapshot(pipeline);
  EXPECT_EQ(after.decoded_hits - before.decoded_hits, 1u);
  EXPECT_EQ(after.reads - before.reads, 1u);
  EXPECT_EQ(after.decodes - before.decodes, 1u);
  // The newcomer took the room: the tier holds item 1 now.
  EXPECT_TRUE(cache->decoded().Contains(cache::MakeKey(0, 1)));
  EXPECT_FALSE(cache->decoded().Contains(cache::MakeKey(0, 0)));
}

// A job whose transforms start with a crop gets only the crop's rectangle
// decoded when the decoded tier would not keep the whole image; when the
// tier is full but would make room for the item (it is worth more than what
// it would push out), the image is decoded whole and kept. The tier has room
// for one image: item 0 fills it, no job needs it any more; item 1, still
// needed by another job, displaces it; item 2, needed by no job, does not
// displace item 1 and is decoded over the crop's rectangle only.
TEST_F(DaemonCacheTest, AFullTierStillGetsTheItemsItWouldKeep) {
  cache::CacheOptions options;
  options.cache_bytes = 20'000;  // one decoded 80 x 60 or 80 x 67 image (14-16 kB), not two
  options.split = {0, 100, 0};
  auto cache = cache::TieredCache::Create(options).value();
  ItemPipeline pipeline(PipelineOptions{.worker_threads = 1}, cache.get());
  auto job = MakeJob(1, 5, 1, 1);  // RandomResizedCrop(32) + flip
  auto run = [&](ItemId item) {
    auto slot = job->ring->Claim();
    ASSERT_TRUE(slot.has_value());
    SlotPlan plan;
    plan.job = job;
    plan.slot = *slot;
    plan.items = {item};
    std::vector<ItemTask> tasks = {ItemTask{job->plan.get(), item, {{&plan, 0}}}};
    plan.ResetOutcomes();
    pipeline.Run(tasks);
    EXPECT_EQ(plan.errors[0], "");
    job->ring->Unclaim(*slot);
  };
  auto region_decodes = [&] { return pipeline.counters().region_decodes.load(); };
  run(0);
  EXPECT_EQ(region_decodes(), 0u);  // room: decoded whole and kept
  ASSERT_TRUE(cache->decoded().Contains(cache::MakeKey(0, 0)));

  const std::vector<cache::Key> still_needed = {cache::MakeKey(0, 1)};
  cache->demand().AddDemand(still_needed);
  EXPECT_TRUE(cache->decoded().WouldAdmit(cache::MakeKey(0, 1), 15'000));
  run(1);
  EXPECT_EQ(region_decodes(), 0u);
  EXPECT_TRUE(cache->decoded().Contains(cache::MakeKey(0, 1)));
  EXPECT_FALSE(cache->decoded().Contains(cache::MakeKey(0, 0)));

  EXPECT_FALSE(cache->decoded().WouldAdmit(cache::MakeKey(0, 2), 15'000));
  run(2);
  EXPECT_EQ(region_decodes(), 1u);
  EXPECT_TRUE(cache->decoded().Contains(cache::MakeKey(0, 1)));
  EXPECT_FALSE(cache->decoded().Contains(cache::MakeKey(0, 2)));
  EXPECT_EQ(pipeline.counters().decodes.load(), 3u);
}

TEST_F(DaemonCacheTest, EncodedTierSkipsOnlyTheRead) {
  auto cache = MakeCache({100, 0, 0});
  ItemPipeline pipeline(PipelineOptions{.worker_threads = 2}, cache.get());
  auto job = MakeJob(1, 5, kItems, 1);

  AddAndConsumeDemand(*cache);
  RunPass(pipeline, job, 0);
  AddAndConsumeDemand(*cache);
  const std::vector<std::byte> cached = RunPass(pipeline, job, 1);
  const Counts c = Snapshot(pipeline);
  EXPECT_EQ(c.reads, uint64_t{kItems});
  EXPECT_EQ(c.decodes, 2u * kItems);
  EXPECT_EQ(c.encoded_hits, uint64_t{kItems});
  EXPECT_EQ(c.decoded_hits, 0u);
  EXPECT_EQ(cache->encoded().Stats().entries, uint64_t{kItems});

  ItemPipeline uncached(PipelineOptions{.worker_threads = 2}, nullptr);
  EXPECT_EQ(RunPass(uncached, job, 1), cached);
}

TEST_F(DaemonCacheTest, EncodedEntryIsPromotedToTheDecodedTier) {
  auto cache = MakeCache({100, 0, 0});
  ItemPipeline pipeline(PipelineOptions{.worker_threads = 2}, cache.get());
  auto job = MakeJob(1, 5, kItems, 1);
  AddAndConsumeDemand(*cache);
  RunPass(pipeline, job, 0);
  ASSERT_EQ(cache->encoded().Stats().entries, uint64_t{kItems});

  // The admin moves the budget to decoded pixels: the next pass decodes
  // from the encoded tier once more, and the items move over.
  ASSERT_TRUE(cache->SetSplit({50, 50, 0}).ok());
  AddAndConsumeDemand(*cache);
  RunPass(pipeline, job, 1);
  EXPECT_EQ(cache->decoded().Stats().entries, uint64_t{kItems});
  EXPECT_EQ(cache->encoded().Stats().entries, 0u);
  AddAndConsumeDemand(*cache);
  RunPass(pipeline, job, 2);
  const Counts c = Snapshot(pipeline);
  EXPECT_EQ(c.reads, uint64_t{kItems});
  EXPECT_EQ(c.decodes, 2u * kItems);
  EXPECT_EQ(c.decoded_hits, uint64_t{kItems});
}

TEST_F(DaemonCacheTest, WithoutACacheEveryPassReadsAndDecodes) {
  ItemPipeline pipeline(PipelineOptions{.worker_threads = 2}, nullptr);
  auto job = MakeJob(1, 5, kItems, 1);
  RunPass(pipeline, job, 0);
  RunPass(pipeline, job, 1);
  const Counts c = Snapshot(pipeline);
  EXPECT_EQ(c.reads, 2u * kItems);
  EXPECT_EQ(c.decodes, 2u * kItems);
  EXPECT_EQ(c.decoded_hits + c.encoded_hits + c.augmented_hits, 0u);
  EXPECT_FALSE(pipeline.Snapshot().cache);
}

// The images are 80..90 x 60..81 px: at max_resolution 40 each is shrunk, and
// the decoded tier keeps (and charges) the shrunk pixels, which serve later
// epochs the samples a fresh read, decode and shrink gives.
TEST_F(DaemonCacheTest, TheDecodedTierKeepsTheShrunkPixels) {
  auto cache = MakeCache({0, 100, 0});
  ItemPipeline pipeline(PipelineOptions{.worker_threads = 2}, cache.get());
  auto job = MakeJob(1, 5, kItems, 1, /*max_resolution=*/40);
  AddAndConsumeDemand(*cache);
  RunPass(pipeline, job, 0);
  uint64_t shrunk_bytes = 0;
  for (ItemId item = 0; item < kItems; ++item) {
    cache::BlobPtr entry = cache->decoded().Get(cache::MakeKey(0, item));
    ASSERT_NE(entry, nullptr);
    const int width = 80 + 5 * int(item / kPerClass), height = 60 + 7 * int(item % kPerClass);
    const image::ImageSize size = image::MaxResolutionSize(width, height, 40);
    EXPECT_EQ(std::max(size.width, size.height), 40);
    EXPECT_EQ(entry->width, uint32_t(size.width));
    EXPECT_EQ(entry->height, uint32_t(size.height));
    EXPECT_EQ(entry->payload().size(), size_t(3) * size.width * size.height);
    shrunk_bytes += 3 * uint64_t(size.width) * size.height + cache::kEntryOverheadBytes;
  }
  EXPECT_EQ(cache->decoded().Stats().bytes, shrunk_bytes);
  // The decoded tier took every item: nothing was packed.
  EXPECT_EQ(pipeline.counters().packs.load(), 0u);
  EXPECT_EQ(cache->encoded().Stats().entries, 0u);

  AddAndConsumeDemand(*cache);
  const std::vector<std::byte> cached = RunPass(pipeline, job, 1);
  EXPECT_EQ(Snapshot(pipeline).decoded_hits, uint64_t{kItems});
  ItemPipeline uncached(PipelineOptions{.worker_threads = 2}, nullptr);
  EXPECT_EQ(RunPass(uncached, job, 1), cached);
  // The encoded tier keeps them packed, never the file's bytes: the next
  // epoch unpacks the very same pixels and decodes nothing.
  auto encoded = MakeCache({100, 0, 0});
  ItemPipeline from_packed(PipelineOptions{.worker_threads = 2}, encoded.get());
  AddAndConsumeDemand(*encoded);
  RunPass(from_packed, job, 0);
  EXPECT_EQ(from_packed.counters().packs.load(), uint64_t{kItems});
  for (ItemId item = 0; item < kItems; ++item) {
    cache::BlobPtr entry = encoded->encoded().Get(cache::MakeKey(0, item));
    ASSERT_NE(entry, nullptr);
    auto pixels = image::UnpackPixels(entry->payload(), image::DecodeOptions{});
    ASSERT_TRUE(pixels.ok()) << pixels.status().ToString();
    EXPECT_EQ(std::max(pixels->width, pixels->height), 40);
  }
  AddAndConsumeDemand(*encoded);
  EXPECT_EQ(RunPass(from_packed, job, 1), cached);
  const Counts packed = Snapshot(from_packed);
  EXPECT_EQ(packed.encoded_hits, uint64_t{kItems});
  EXPECT_EQ(packed.reads, uint64_t{kItems});
  EXPECT_EQ(packed.decodes, uint64_t{kItems}) << "the second epoch decodes nothing";
  EXPECT_EQ(from_packed.counters().unpacks.load(), uint64_t{kItems});
  EXPECT_EQ(from_packed.counters().unpack_failures.load(), 0u);
  // And the exact path's samples are other ones.
  EXPECT_NE(RunPass(uncached, MakeJob(1, 5, kItems, 1), 1), cached);
}

// A crop of a shrunk image reads shrunk pixels, so such an image is decoded
// whole, never only over the crop's rectangle; within the limit it is.
TEST_F(DaemonCacheTest, AnImageToShrinkIsDecodedWhole) {
  auto job = MakeJob(1, 5, kItems, 1);
  ItemPipeline exact(PipelineOptions{.worker_threads = 2}, nullptr);
  RunPass(exact, job, 0);
  EXPECT_EQ(exact.counters().region_decodes.load(), uint64_t{kItems});
  ItemPipeline shrunk(PipelineOptions{.worker_threads = 2}, nullptr);
  RunPass(shrunk, MakeJob(1, 5, kItems, 1, /*max_resolution=*/40), 0);
  EXPECT_EQ(shrunk.counters().decodes.load(), uint64_t{kItems});
  EXPECT_EQ(shrunk.counters().region_decodes.load(), 0u);
  // Within the limit, the exact path: region decodes, the same samples.
  ItemPipeline within(PipelineOptions{.worker_threads = 2}, nullptr);
  const std::vector<std::byte> samples =
      RunPass(within, MakeJob(1, 5, kItems, 1, /*max_resolution=*/90), 0);
  EXPECT_EQ(within.counters().region_decodes.load(), uint64_t{kItems});
  // Unless a tier may keep them: their packed pixels need the whole image,
  // and serve the same samples.
  auto cache = MakeCache({100, 0, 0});
  ItemPipeline kept(PipelineOptions{.worker_threads = 2}, cache.get());
  const auto within_job = MakeJob(1, 5, kItems, 1, /*max_resolution=*/90);
  AddAndConsumeDemand(*cache);
  EXPECT_EQ(RunPass(kept, within_job, 0), samples);
  EXPECT_EQ(kept.counters().region_decodes.load(), 0u);
  EXPECT_EQ(kept.counters().packs.load(), uint64_t{kItems});
  AddAndConsumeDemand(*cache);
  EXPECT_EQ(RunPass(kept, within_job, 0), samples);
  EXPECT_EQ(kept.counters().unpacks.load(), uint64_t{kItems});
  EXPECT_EQ(RunPass(exact, job, 0), samples);
}

// A remote tier in memory, standing for the memcached pool every node
// shares: what the pipeline looks up and writes back, recorded.
class FakeRemoteCache final : public RemoteCache {
 public:
  explicit FakeRemoteCache(const ContentFingerprint& dataset) : dataset_(dataset) {}

  RemoteLookup Get(const ContentFingerprint& dataset, ItemId item) override {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(dataset, dataset_) << "the key names the dataset by its content";
    ++lookups;
    RemoteLookup found;
    if (auto it = entries_.find({item, RemoteForm::kDecoded}); it != entries_.end()) {
      found.decoded = std::make_shared<cache::Blob>(*it->second);
    } else if (auto bytes = entries_.find({item, RemoteForm::kEncoded}); bytes != entries_.end()) {
      found.encoded = std::make_shared<cache::Blob>(*bytes->second);
    }
    return found;
  }
  void Put(const ContentFingerprint& dataset, ItemId item, RemoteForm form,
           cache::BlobPtr blob) override {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(dataset, dataset_);
    ++puts[form];
    entries_[{item, form}] = std::move(blob);
  }
  bool Fits(uint64_t payload_bytes) const override { return payload_bytes <= max_payload; }
  void set_write_form(RemoteForm form) override { form_ = form; }
  RemoteForm write_form() const override { return form_; }
  RemoteTierSnapshot Snapshot() const override { return {}; }

  // The entry stored as `form` for `item`, or null.
  cache::BlobPtr Find(ItemId item, RemoteForm form) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find({item, form});
    return it == entries_.end() ? nullptr : it->second;
  }
  // Replaces an entry, as a damaged server would.
  void Replace(ItemId item, RemoteForm form, cache::BlobPtr blob) {
    std::lock_guard<std::mutex> lock(mu_);
    entries_[{item, form}] = std::move(blob);
  }

  uint64_t lookups = 0;
  std::map<RemoteForm, uint64_t> puts;
  uint64_t max_payload = uint64_t{1} << 30;

 private:
  const ContentFingerprint dataset_;
  std::mutex mu_;
  std::map<std::pair<ItemId, RemoteForm>, cache::BlobPtr> entries_;
  std::atomic<RemoteForm> form_{RemoteForm::kEncoded};
};

// Node A reads from storage and writes the file's bytes back; node B, on the
// same tier, reads nothing and decodes those bytes into the same samples.
TEST_F(DaemonCacheTest, TheRemoteTierGetsWhatOneNodeReadAndServesItToAnother) {
  FakeRemoteCache remote(dataset_->content_fingerprint());
  auto job = MakeJob(1, 5, kItems, 1);
  ItemPipeline node_a(PipelineOptions{.worker_threads = 2}, nullptr, &remote);
  const std::vector<std::byte> first = RunPass(node_a, job, 0);
  EXPECT_EQ(Snapshot(node_a).reads, uint64_t{kItems});
  EXPECT_EQ(remote.lookups, uint64_t{kItems});
  EXPECT_EQ(remote.puts[RemoteForm::kEncoded], uint64_t{kItems});
  EXPECT_EQ(remote.puts[RemoteForm::kDecoded], 0u);

  ItemPipeline node_b(PipelineOptions{.worker_threads = 2}, nullptr, &remote);
  EXPECT_EQ(RunPass(node_b, job, 0), first);
  EXPECT_EQ(Snapshot(node_b).reads, 0u);
  EXPECT_EQ(Snapshot(node_b).decodes, uint64_t{kItems});
  EXPECT_EQ(remote.puts[RemoteForm::kEncoded], uint64_t{kItems}) << "nothing new to write";
}

// The disk tier is written only with what this galleyd read from storage:
// items another node put in the remote tier are served from there and not
// written; items read from the files are, and a later pipeline on the same
// folder reads none of them again.
TEST_F(DaemonCacheTest, TheDiskTierKeepsOnlyWhatWasReadFromStorage) {
  auto job = MakeJob(1, 5, kItems, 1);
  FakeRemoteCache remote(dataset_->content_fingerprint());
  ItemPipeline other_node(PipelineOptions{.worker_threads = 2}, nullptr, &remote);
  const std::vector<std::byte> first = RunPass(other_node, job, 0);

  cache::DiskTierOptions options;
  options.dir = root_ / "disk-tier";
  {
    auto disk = cache::DiskTier::Open(options);
    ASSERT_TRUE(disk.ok()) << disk.status().ToString();
    ItemPipeline with_remote(PipelineOptions{.worker_threads = 2}, nullptr, &remote, nullptr,
                             disk->get());
    EXPECT_EQ(RunPass(with_remote, job, 0), first);
    EXPECT_EQ(Snapshot(with_remote).reads, 0u);
    (*disk)->WaitForWrites();
    EXPECT_EQ((*disk)->Stats().writes, 0u) << "nothing from the remote tier is written";

    ItemPipeline from_files(PipelineOptions{.worker_threads = 2}, nullptr, nullptr, nullptr,
                            disk->get());
    EXPECT_EQ(RunPass(from_files, job, 0), first);
    EXPECT_EQ(Snapshot(from_files).reads, uint64_t{kItems});
    (*disk)->WaitForWrites();
    EXPECT_EQ((*disk)->Stats().writes, uint64_t{kItems});
  }
  auto disk = cache::DiskTier::Open(options);
  ASSERT_TRUE(disk.ok()) << disk.status().ToString();
  ItemPipeline after_restart(PipelineOptions{.worker_threads = 2}, nullptr, nullptr, nullptr,
                             disk->get());
  EXPECT_EQ(RunPass(after_restart, job, 0), first);
  EXPECT_EQ(Snapshot(after_restart).reads, 0u);
  EXPECT_EQ(Snapshot(after_restart).decodes, uint64_t{kItems});
  EXPECT_EQ((*disk)->Stats().hits, uint64_t{kItems});
  EXPECT_EQ(after_restart.Snapshot().disk->hits, uint64_t{kItems});
}

// Shrunk pixels go to the remote tier under a name of their own, which no
// exact job and no job at another limit looks up.
TEST_F(DaemonCacheTest, TheRemoteTierKeysShrunkItemsApart) {
  const ContentFingerprint content = dataset_->content_fingerprint();
  EXPECT_EQ(RemoteFingerprint(*dataset_, 0), content);
  EXPECT_NE(RemoteFingerprint(*dataset_, 40), content);
  EXPECT_NE(RemoteFingerprint(*dataset_, 40), RemoteFingerprint(*dataset_, 41));
  EXPECT_EQ(RemoteFingerprint(*dataset_, 40), RemoteFingerprint(*dataset_, 40));

  FakeRemoteCache remote(RemoteFingerprint(*dataset_, 40));  // any other name fails
  remote.set_write_form(RemoteForm::kDecoded);
  auto job = MakeJob(1, 5, kItems, 1, /*max_resolution=*/40);
  ItemPipeline node_a(PipelineOptions{.worker_threads = 2}, nullptr, &remote);
  const std::vector<std::byte> first = RunPass(node_a, job, 0);
  EXPECT_EQ(remote.puts[RemoteForm::kDecoded], uint64_t{kItems});
  ItemPipeline node_b(PipelineOptions{.worker_threads = 2}, nullptr, &remote);
  EXPECT_EQ(RunPass(node_b, job, 0), first);
  EXPECT_EQ(Snapshot(node_b).reads + Snapshot(node_b).decodes, 0u);
}

// At a max_resolution an item is the same pixels whichever tier serves it:
// uncached, a decoded-tier hit, a packed encoded-tier hit, and the remote
// tier's decoded and packed encoded forms, on a node that read nothing.
TEST_F(DaemonCacheTest, EveryTierServesTheSamePixelsOfAShrunkItem) {
  auto job = MakeJob(1, 5, kItems, 1, /*max_resolution=*/40);
  ItemPipeline uncached(PipelineOptions{.worker_threads = 2}, nullptr);
  const std::vector<std::byte> reference = RunPass(uncached, job, 1);

  for (const cache::Split split : {cache::Split{0, 100, 0}, cache::Split{100, 0, 0}}) {
    auto local = MakeCache(split);
    ItemPipeline node(PipelineOptions{.worker_threads = 2}, local.get());
    AddAndConsumeDemand(*local);
    EXPECT_EQ(RunPass(node, job, 1), reference);
    AddAndConsumeDemand(*local);
    EXPECT_EQ(RunPass(node, job, 1), reference);
    EXPECT_EQ(Snapshot(node).decoded_hits + Snapshot(node).encoded_hits, uint64_t{kItems});
  }

  for (const RemoteForm form : {RemoteForm::kEncoded, RemoteForm::kDecoded}) {
    FakeRemoteCache remote(RemoteFingerprint(*dataset_, 40));
    remote.set_write_form(form);
    ItemPipeline writer(PipelineOptions{.worker_threads = 2}, nullptr, &remote);
    EXPECT_EQ(RunPass(writer, job, 1), reference);
    EXPECT_EQ(remote.puts[form], uint64_t{kItems});
    if (form == RemoteForm::kEncoded) {
      // Packed pixels, not the file's bytes.
      EXPECT_EQ(writer.counters().packs.load(), uint64_t{kItems});
      for (ItemId item = 0; item < kItems; ++item) {
        cache::BlobPtr value = remote.Find(item, RemoteForm::kEncoded);
        ASSERT_NE(value, nullptr);
        EXPECT_TRUE(image::UnpackPixels(value->payload(), image::DecodeOptions{}).ok());
      }
    }
    // A node with a local encoded tier reads nothing, decodes nothing, and
    // keeps the remote tier's packed values as they are.
    auto local = MakeCache({100, 0, 0});
    AddAndConsumeDemand(*local);
    ItemPipeline reader(PipelineOptions{.worker_threads = 2}, local.get(), &remote);
    EXPECT_EQ(RunPass(reader, job, 1), reference);
    EXPECT_EQ(Snapshot(reader).reads + Snapshot(reader).decodes, 0u);
    if (form == RemoteForm::kEncoded) {
      EXPECT_EQ(reader.counters().unpacks.load(), uint64_t{kItems});
      EXPECT_EQ(reader.counters().packs.load(), 0u);
      EXPECT_EQ(local->encoded().Stats().entries, uint64_t{kItems});
    }
  }
}

// Damage, random and repeated: a packed entry that does not unpack is a
// miss (the file is read again and packed anew), never wrong pixels and
// never a failed sample.
TEST_F(DaemonCacheTest, ADamagedPackedEntryIsAMiss) {
  auto job = MakeJob(1, 5, kItems, 1, /*max_resolution=*/40);
  ItemPipeline uncached(PipelineOptions{.worker_threads = 2}, nullptr);
  const std::vector<std::byte> reference = RunPass(uncached, job, 1);
  auto cache = MakeCache({100, 0, 0});
  ItemPipeline pipeline(PipelineOptions{.worker_threads = 2}, cache.get());
  AddAndConsumeDemand(*cache);
  RunPass(pipeline, job, 0);

  std::mt19937 random(38);
  for (int round = 0; round < 8; ++round) {
    for (ItemId item = 0; item < kItems; ++item) {
      const cache::Key key = cache::MakeKey(0, item);
      cache::BlobPtr entry = cache->encoded().Get(key);
      ASSERT_NE(entry, nullptr);
      auto damaged = std::make_shared<cache::Blob>(*entry);
      if (random() % 3 == 0) {
        damaged->bytes.resize(random() % damaged->bytes.size());
      } else {
        for (uint32_t e = 0, edits = 1 + random() % 3; e < edits; ++e) {
          damaged->bytes[random() % damaged->bytes.size()] ^= uint8_t(1 + random() % 255);
        }
      }
      ASSERT_TRUE(cache->encoded().Erase(key));
      ASSERT_TRUE(cache->encoded().Put(key, std::move(damaged)));
    }
    const uint64_t reads = Snapshot(pipeline).reads;
    const uint64_t failures = pipeline.counters().unpack_failures.load();
    AddAndConsumeDemand(*cache);
    EXPECT_EQ(RunPass(pipeline, job, 1), reference) << "round " << round;
    // Each entry that did not unpack cost one read, and only those did.
    EXPECT_EQ(Snapshot(pipeline).reads - reads,
              pipeline.counters().unpack_failures.load() - failures);
    EXPECT_EQ(cache->encoded().Stats().entries, uint64_t{kItems}) << "packed anew";
  }
  EXPECT_GE(pipeline.counters().unpack_failures.load(), uint64_t{7 * kItems});
  EXPECT_EQ(pipeline.counters().failures.load(), 0u);
}

// A remote value under the dataset's packed name that does not unpack is
// a miss too: the node reads the file and writes a sound value back.
TEST_F(DaemonCacheTest, ADamagedPackedRemoteValueIsReadAgainAndReplaced) {
  auto job = MakeJob(1, 5, kItems, 1, /*max_resolution=*/40);
  FakeRemoteCache remote(RemoteFingerprint(*dataset_, 40));
  ItemPipeline writer(PipelineOptions{.worker_threads = 2}, nullptr, &remote);
  const std::vector<std::byte> reference = RunPass(writer, job, 1);
  for (ItemId item = 0; item < kItems; ++item) {
    auto damaged = std::make_shared<cache::Blob>(*remote.Find(item, RemoteForm::kEncoded));
    damaged->bytes[damaged->bytes.size() / 2] ^= 0x5A;
    remote.Replace(item, RemoteForm::kEncoded, std::move(damaged));
  }
  ItemPipeline reader(PipelineOptions{.worker_threads = 2}, nullptr, &remote);
  EXPECT_EQ(RunPass(reader, job, 1), reference);
  EXPECT_EQ(reader.counters().unpack_failures.load(), uint64_t{kItems});
  EXPECT_EQ(Snapshot(reader).reads, uint64_t{kItems});
  EXPECT_EQ(remote.puts[RemoteForm::kEncoded], 2u * kItems);
  ItemPipeline third(PipelineOptions{.worker_threads = 2}, nullptr, &remote);
  EXPECT_EQ(RunPass(third, job, 1), reference);
  EXPECT_EQ(Snapshot(third).reads, 0u);
  EXPECT_EQ(third.counters().unpack_failures.load(), 0u);
}

// With decoded as the write form and a full decode, the pixels go to the
// tier: the next node neither reads nor decodes, and keeps them locally.
TEST_F(DaemonCacheTest, PixelsInTheRemoteTierSpareTheNextNodeItsDecodes) {
  FakeRemoteCache remote(dataset_->content_fingerprint());
  remote.set_write_form(RemoteForm::kDecoded);
  auto job = MakeJob(1, 5, kItems, 1);
  auto local_a = MakeCache({0, 100, 0});  // room for pixels: full decodes
  AddAndConsumeDemand(*local_a);
  ItemPipeline node_a(PipelineOptions{.worker_threads = 2}, local_a.get(), &remote);
  const std::vector<std::byte> first = RunPass(node_a, job, 0);
  EXPECT_EQ(remote.puts[RemoteForm::kDecoded], uint64_t{kItems});
  EXPECT_EQ(remote.puts[RemoteForm::kEncoded], 0u);

  auto local_b = MakeCache({0, 100, 0});
  AddAndConsumeDemand(*local_b);
  ItemPipeline node_b(PipelineOptions{.worker_threads = 2}, local_b.get(), &remote);
  EXPECT_EQ(RunPass(node_b, job, 0), first);
  EXPECT_EQ(Snapshot(node_b).reads, 0u);
  EXPECT_EQ(Snapshot(node_b).decodes, 0u);
  EXPECT_EQ(local_b->decoded().Stats().entries, uint64_t{kItems}) << "kept for the next epoch";
}

// Pixels are written when they fit the servers' entries; otherwise the
// file's bytes go. A crop that would decode only its region decodes the
// whole image when the pixels are to be written, with or without a local
// cache.
TEST_F(DaemonCacheTest, PixelsThatDoNotFitGoAsTheFilesBytesAndACropDecodesWholeForPixels) {
  auto job = MakeJob(1, 5, kItems, 1);
  FakeRemoteCache too_small(dataset_->content_fingerprint());
  too_small.set_write_form(RemoteForm::kDecoded);
  too_small.max_payload = 100;
  auto local = MakeCache({0, 100, 0});
  AddAndConsumeDemand(*local);
  ItemPipeline full(PipelineOptions{.worker_threads = 2}, local.get(), &too_small);
  RunPass(full, job, 0);
  EXPECT_EQ(too_small.puts[RemoteForm::kEncoded], uint64_t{kItems});
  EXPECT_EQ(too_small.puts[RemoteForm::kDecoded], 0u);

  // No local cache: the crop's region would do for the job, but the remote
  // tier takes the whole image's pixels.
  FakeRemoteCache pixels(dataset_->content_fingerprint());
  pixels.set_write_form(RemoteForm::kDecoded);
  ItemPipeline whole(PipelineOptions{.worker_threads = 2}, nullptr, &pixels);
  RunPass(whole, job, 0);
  EXPECT_EQ(whole.counters().region_decodes.load(), 0u);
  EXPECT_EQ(pixels.puts[RemoteForm::kDecoded], uint64_t{kItems});
  EXPECT_EQ(pixels.puts[RemoteForm::kEncoded], 0u);

  // Pixels the entries cannot hold go as bytes anyway: the region is enough.
  FakeRemoteCache small_entries(dataset_->content_fingerprint());
  small_entries.set_write_form(RemoteForm::kDecoded);
  small_entries.max_payload = 100;
  ItemPipeline cropped(PipelineOptions{.worker_threads = 2}, nullptr, &small_entries);
  RunPass(cropped, job, 0);
  EXPECT_EQ(cropped.counters().region_decodes.load(), uint64_t{kItems});
  EXPECT_EQ(small_entries.puts[RemoteForm::kEncoded], uint64_t{kItems});
  EXPECT_EQ(small_entries.puts[RemoteForm::kDecoded], 0u);
}

// An encoded remote hit needs no read; when decoded is the write form, the
// pixels it was decoded to are written back, so the next node skips the
// decode too.
TEST_F(DaemonCacheTest, AnEncodedRemoteHitIsUpgradedToPixelsWhenPixelsAreTheWriteForm) {
  FakeRemoteCache remote(dataset_->content_fingerprint());
  auto job = MakeJob(1, 5, kItems, 1);
  ItemPipeline writer(PipelineOptions{.worker_threads = 2}, nullptr, &remote);
  RunPass(writer, job, 0);
  ASSERT_EQ(remote.puts[RemoteForm::kEncoded], uint64_t{kItems});

  remote.set_write_form(RemoteForm::kDecoded);
  auto local = MakeCache({0, 100, 0});
  AddAndConsumeDemand(*local);
  ItemPipeline upgrader(PipelineOptions{.worker_threads = 2}, local.get(), &remote);
  RunPass(upgrader, job, 0);
  EXPECT_EQ(Snapshot(upgrader).reads, 0u);
  EXPECT_EQ(remote.puts[RemoteForm::kDecoded], uint64_t{kItems});
  EXPECT_EQ(remote.puts[RemoteForm::kEncoded], uint64_t{kItems}) << "the bytes were there already";
}

TEST_F(DaemonCacheTest, AugmentedTierServesOnlyIdenticalPipelineAndSeed) {
  auto cache = MakeCache({0, 0, 100});
  ItemPipeline pipeline(PipelineOptions{.worker_threads = 2}, cache.get());
  auto producer = MakeJob(1, 5, kItems, 1);
  auto twin = MakeJob(2, 5, kItems, 1);        // same pipeline and seed
  auto other_seed = MakeJob(3, 6, kItems, 1);  // same pipeline, other seed

  const std::vector<std::byte> produced = RunPass(pipeline, producer, 0);
  const Counts after_producer = Snapshot(pipeline);
  EXPECT_EQ(after_producer.decodes, uint64_t{kItems});
  EXPECT_EQ(cache->augmented().Stats().tier.entries, uint64_t{kItems});

  // The twin's whole epoch comes from the tier: no read, no decode, and the
  // very samples the producer made.
  EXPECT_EQ(RunPass(pipeline, twin, 0), produced);
  const Counts after_twin = Snapshot(pipeline);
  EXPECT_EQ(after_twin.augmented_hits, uint64_t{kItems});
  EXPECT_EQ(after_twin.reads, after_producer.reads);
  EXPECT_EQ(after_twin.decodes, after_producer.decodes);

  // Another seed, and another epoch, never reuse.
  RunPass(pipeline, other_seed, 0);
  RunPass(pipeline, producer, 1);
  const Counts end = Snapshot(pipeline);
  EXPECT_EQ(end.augmented_hits, uint64_t{kItems});
  EXPECT_EQ(end.decodes, 3u * kItems);
}

// Waits until the scheduler has published `batches` batches for `job`.
bool WaitForBatches(const ServedJob& job, uint64_t batches) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // a hang
  while (std::chrono::steady_clock::now() < give_up) {
    if (job.counters.batches.load() >= batches) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

TEST_F(DaemonCacheTest, SchedulerDropsTheRemainingDemandOfAJobThatLeaves) {
  auto cache = MakeCache({50, 50, 0});
  ItemPipeline pipeline(PipelineOptions{.worker_threads = 2}, cache.get());
  Scheduler scheduler(SchedulerOptions{}, &pipeline, cache.get());
  // Two slots of 3 items: each job receives 6 of its 12 items, then its ring
  // is full (nobody consumes) and the scheduler waits.
  auto a = MakeJob(1, 5, 3, 2);
  auto b = MakeJob(2, 9, 3, 2);
  ASSERT_TRUE(scheduler.OnJobOpened(a).ok());
  ASSERT_TRUE(scheduler.OnJobOpened(b).ok());
  scheduler.OnConsumerReady(a->id);
  scheduler.OnConsumerReady(b->id);
  scheduler.Start();
  ASSERT_TRUE(WaitForBatches(*a, 2));
  ASSERT_TRUE(WaitForBatches(*b, 2));
  EXPECT_EQ(cache->demand().TotalDemand(), uint64_t{2 * (kItems - 6)});

  // The keys b still needs: every item minus the six it received.
  std::vector<bool> b_received(kItems, false);
  for (uint32_t s = 0; s < 2; ++s) {
    wire::SlotHeader* slot = b->ring->slot(s);
    const uint64_t* ids = wire::SlotItemIds(slot);
    for (uint32_t i = 0; i < slot->sample_count; ++i) b_received[ids[i]] = true;
  }

  scheduler.OnJobClosed(a->id);
  EXPECT_EQ(cache->demand().TotalDemand(), uint64_t{kItems - 6});
  EXPECT_EQ(cache->demand().KeysWithDemand(), size_t{kItems - 6});
  for (ItemId item = 0; item < kItems; ++item) {
    EXPECT_EQ(cache->demand().Demand(cache::MakeKey(0, item)), b_received[item] ? 0u : 1u)
        << "item " << item;
  }

  // A seek leaves the epoch too; with b's ring still full nothing re-enters.
  ASSERT_TRUE(scheduler.OnJobSought(*b, {.epoch = 1, .generation = 1}).ok());
  EXPECT_EQ(cache->demand().TotalDemand(), 0u);
  scheduler.OnJobClosed(b->id);
  scheduler.Stop();
  EXPECT_EQ(cache->demand().TotalDemand(), 0u);
}

TEST_F(DaemonCacheTest, BatchesNoConsumerTookAreCountedOnceAsUnread) {
  ItemPipeline pipeline(PipelineOptions{.worker_threads = 2});
  Scheduler scheduler(SchedulerOptions{}, &pipeline);
  // Two slots of 3 items, and no consumer: the ring fills, then waits.
  auto job = MakeJob(1, 5, 3, 2);
  ASSERT_TRUE(scheduler.OnJobOpened(job).ok());
  scheduler.OnConsumerReady(job->id);
  scheduler.Start();
  ASSERT_TRUE(WaitForBatches(*job, 2));
  EXPECT_EQ(scheduler.Totals().unread, 0u);

  // A seek leaves both published batches unread: the consumer drops them.
  const JobSeek seek{.epoch = 1, .generation = 1};
  ASSERT_TRUE(scheduler.OnJobSought(*job, seek).ok());
  EXPECT_EQ(job->counters.unread.load(), 2u);
  EXPECT_EQ(scheduler.Totals().unread, 2u);
  // As the client does: the dropped slots go back, and the new epoch fills them.
  for (uint32_t s = 0; s < 2; ++s) {
    job->ring->slot(s)->state.store(static_cast<uint32_t>(wire::SlotState::kFree));
  }
  scheduler.OnSlotReleased(job->id);
  ASSERT_TRUE(WaitForBatches(*job, 4));
  for (uint32_t s = 0; s < 2; ++s) EXPECT_EQ(job->ring->slot(s)->generation, seek.generation);

  // Closing counts what is still in the ring, and the dropped ones not again.
  scheduler.OnJobClosed(job->id);
  scheduler.Stop();
  const BatchTotalsSnapshot totals = scheduler.Totals();
  EXPECT_EQ(totals.prepared, 4u);
  EXPECT_EQ(totals.unread, 4u);
  EXPECT_EQ(job->counters.batches.load(), 4u);
}

}  // namespace
}  // namespace galley
