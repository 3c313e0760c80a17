// The cache planner's samples of datasets of objects, kept in the disk
// tier's folder: a planner that finds one plans for the prefix without a GET
// and with the storage rate and inflation the first one measured; another
// max_resolution or a damaged file samples the store again. Against a real
// `rclone serve s3` (tests/unit/rclone_s3_server.h).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <utility>
#include <vector>

#include "galley/cache/disk_tier.h"
#include "galley/cache/tiered_cache.h"
#include "galley/daemon/cache_planner.h"
#include "galley/daemon/dataset_sample_store.h"
#include "galley/dataset/dataset.h"
#include "galley/objectstore/s3_client.h"
#include "tests/unit/planner_test_support.h"
#include "tests/unit/rclone_s3_server.h"

namespace galley {
namespace {

namespace fs = std::filesystem;
using testing::RcloneS3Server;

class PlannerSampleStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "galley_samples_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    scratch_ = pattern;
    // 20 JPEGs of 64x48 in two classes.
    cv::RNG rng(7);
    for (int i = 0; i < 20; ++i) {
      cv::Mat image(48, 64, CV_8UC3);
      rng.fill(image, cv::RNG::UNIFORM, 0, 255);
      std::vector<uchar> jpeg;
      ASSERT_TRUE(cv::imencode(".jpg", image, jpeg));
      server_.Put("data", "imgs/c" + std::to_string(i % 2) + "/" + std::to_string(i) + ".jpg",
                  std::string(jpeg.begin(), jpeg.end()));
    }
    const Status started = server_.Start();
    ASSERT_TRUE(started.ok()) << started.ToString();
    auto opened = server_.OpenClient();
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = *opened;

    cache_ = testing::SmallCache();
    ASSERT_NE(cache_, nullptr);
    node_ = testing::FixedNode();

    cache::DiskTierOptions disk;
    disk.dir = scratch_ / "disk";
    disk.budget_bytes = uint64_t{1} << 20;
    auto tier = cache::DiskTier::Open(disk);
    ASSERT_TRUE(tier.ok()) << tier.status().ToString();
    disk_ = std::move(tier).value();
  }
  void TearDown() override {
    disk_.reset();
    std::error_code ignored;
    fs::remove_all(scratch_, ignored);
  }

  // The prefix listed afresh, as a restarted galleyd lists it.
  std::shared_ptr<const Dataset> OpenPrefix() {
    auto dataset =
        Dataset::OpenObjectFolder("s3://data/imgs/", store_, server_.access(), ShardOptions{}, {});
    EXPECT_TRUE(dataset.ok()) << dataset.status().ToString() << "\n" << server_.Log();
    return dataset.ok() ? *dataset : nullptr;
  }

  std::shared_ptr<const JobPlan> Job(std::shared_ptr<const Dataset> dataset,
                                     uint32_t max_resolution = 0) {
    auto job = std::make_shared<JobPlan>();
    job->dataset = std::move(dataset);
    job->spec.max_resolution = max_resolution;
    job->augmentation_signature = "p";
    job->geometry.sample_bytes = 3 * 32 * 32;
    for (ItemId i = 0; i < job->dataset->size(); ++i) job->subset.push_back(i);
    return job;
  }

  // One planner's sample of `dataset`, as its Snapshot shows it, and the
  // store's GETs and bytes it cost.
  struct Planned {
    PlanDatasetSnapshot dataset;
    cache::PlannerInputs inputs;
    uint64_t gets = 0;
    uint64_t bytes = 0;
  };
  Planned Plan(std::shared_ptr<const Dataset> dataset, DatasetSampleStore* samples,
               uint32_t max_resolution = 0) {
    const uint64_t gets = store_->counters().gets.load();
    const uint64_t bytes = store_->counters().bytes.load();
    CachePlanner planner(cache_.get(), node_, 2, PlannerOverrides{}, nullptr, PipelineTimer(),
                         samples);
    planner.RecordJob(1, Job(std::move(dataset), max_resolution));
    planner.ReplanNow();
    const PlanSnapshot snapshot = planner.Snapshot();
    EXPECT_EQ(snapshot.datasets.size(), 1u);
    Planned out;
    if (!snapshot.datasets.empty()) out.dataset = snapshot.datasets[0];
    out.inputs = planner.CurrentInputs();
    out.gets = store_->counters().gets.load() - gets;
    out.bytes = store_->counters().bytes.load() - bytes;
    return out;
  }

  fs::path scratch_;
  RcloneS3Server server_;
  std::shared_ptr<objectstore::ObjectStore> store_;
  std::unique_ptr<cache::TieredCache> cache_;
  NodeMeasurements node_;
  std::unique_ptr<cache::DiskTier> disk_;
};

TEST_F(PlannerSampleStoreTest, ARestartedPlannerTakesTheKeptSampleWithoutAGet) {
  std::shared_ptr<const Dataset> first_listing = OpenPrefix();
  ASSERT_NE(first_listing, nullptr);
  DatasetSampleStore samples(disk_->records_dir());
  const Planned first = Plan(first_listing, &samples);
  ASSERT_TRUE(first.dataset.sampled) << first.dataset.error;
  EXPECT_EQ(first.dataset.sample_source, "storage");
  EXPECT_EQ(first.gets, 16u);  // the heads of 16 of the 20 objects
  EXPECT_GT(first.bytes, 0u);
  EXPECT_EQ(samples.Stats().saves, 1u);
  EXPECT_TRUE(fs::is_regular_file(samples.PathOf(first_listing->content_fingerprint(), 0)));

  // A new store over the same folder, a new listing: a restarted galleyd.
  DatasetSampleStore reopened(disk_->records_dir());
  std::shared_ptr<const Dataset> second_listing = OpenPrefix();
  ASSERT_NE(second_listing, nullptr);
  ASSERT_EQ(second_listing->content_fingerprint(), first_listing->content_fingerprint());
  const Planned again = Plan(second_listing, &reopened);
  ASSERT_TRUE(again.dataset.sampled) << again.dataset.error;
  EXPECT_EQ(again.dataset.sample_source, "disk cache");
  EXPECT_EQ(again.gets, 0u);
  EXPECT_EQ(again.bytes, 0u);
  EXPECT_EQ(reopened.Stats().loads, 1u);
  // The object store's rate and the inflation the first planner measured.
  EXPECT_DOUBLE_EQ(again.inputs.storage_bytes_per_s, first.inputs.storage_bytes_per_s);
  EXPECT_DOUBLE_EQ(again.inputs.inflation, first.inputs.inflation);
  EXPECT_DOUBLE_EQ(again.dataset.storage_bytes_per_s, first.dataset.storage_bytes_per_s);
  EXPECT_EQ(again.dataset.files_sampled, first.dataset.files_sampled);
  EXPECT_EQ(again.dataset.items, second_listing->size());
  EXPECT_DOUBLE_EQ(again.dataset.mean_encoded_bytes,
                   double(second_listing->total_bytes()) / double(second_listing->size()));

  // Without a store (no disk tier) every planner reads the store.
  const Planned bare = Plan(OpenPrefix(), nullptr);
  EXPECT_EQ(bare.dataset.sample_source, "storage");
  EXPECT_EQ(bare.gets, 16u);
}

TEST_F(PlannerSampleStoreTest, AnotherMaxResolutionOrADamagedSampleReadsTheStoreAgain) {
  std::shared_ptr<const Dataset> dataset = OpenPrefix();
  ASSERT_NE(dataset, nullptr);
  DatasetSampleStore samples(disk_->records_dir());
  ASSERT_EQ(Plan(dataset, &samples).gets, 16u);
  // 16 px: the inflation counts the capped size, so the sample is its own.
  const Planned capped = Plan(dataset, &samples, 16);
  EXPECT_EQ(capped.dataset.sample_source, "storage");
  EXPECT_EQ(capped.gets, 16u);
  EXPECT_EQ(Plan(dataset, &samples, 16).gets, 0u);

  // One byte changed: the checksum fails, the file goes, the store is read.
  const fs::path kept = samples.PathOf(dataset->content_fingerprint(), 0);
  {
    std::fstream file(kept, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(50);
    const char byte = static_cast<char>(file.get() ^ 0x01);
    file.seekp(50);
    file.put(byte);
  }
  const Planned after_damage = Plan(dataset, &samples);
  EXPECT_EQ(after_damage.dataset.sample_source, "storage");
  EXPECT_EQ(after_damage.gets, 16u);
  EXPECT_EQ(samples.Stats().damaged, 1u);
  // ... and is kept again, whole.
  EXPECT_EQ(Plan(dataset, &samples).gets, 0u);

  // A short file and a symlink in a sample's place are not samples either.
  fs::resize_file(kept, 40);
  EXPECT_EQ(Plan(dataset, &samples).gets, 16u);
  fs::remove(kept);
  fs::create_symlink(scratch_ / "elsewhere", kept);
  EXPECT_EQ(Plan(dataset, &samples).gets, 16u);
  EXPECT_FALSE(fs::is_symlink(kept));
  EXPECT_EQ(samples.Stats().damaged, 3u);
  EXPECT_EQ(Plan(dataset, &samples).gets, 0u);
}

// Without a disk tier: a planner remembers the sample of a dataset of
// objects after its last job has closed, so a later job's open reads
// nothing; a changed object (another fingerprint) or another
// max_resolution is sampled again.
TEST_F(PlannerSampleStoreTest, APlannerRemembersASampleAfterItsJobsHaveClosed) {
  CachePlanner planner(cache_.get(), node_, 2, PlannerOverrides{}, nullptr, PipelineTimer(),
                       nullptr);
  JobId next_job = 1;
  // A job over a new listing of the prefix, planned, then closed: the GETs
  // its plan made and what the planner showed of it.
  auto plan_and_close = [&](uint32_t max_resolution) {
    std::shared_ptr<const Dataset> listing = OpenPrefix();
    EXPECT_NE(listing, nullptr);
    const uint64_t gets = store_->counters().gets.load();
    const JobId job = next_job++;
    planner.RecordJob(job, Job(listing, max_resolution));
    planner.ReplanNow();
    const PlanSnapshot snapshot = planner.Snapshot();
    planner.OnJobClosed(job);
    EXPECT_EQ(snapshot.datasets.size(), 1u);
    PlanDatasetSnapshot shown =
        snapshot.datasets.empty() ? PlanDatasetSnapshot{} : snapshot.datasets[0];
    return std::make_pair(store_->counters().gets.load() - gets, shown);
  };
  const auto [first_gets, first] = plan_and_close(0);
  EXPECT_EQ(first_gets, 16u);
  EXPECT_EQ(first.sample_source, "storage");
  EXPECT_TRUE(planner.Snapshot().datasets.empty());

  const auto [again_gets, again] = plan_and_close(0);
  EXPECT_EQ(again_gets, 0u);
  ASSERT_TRUE(again.sampled) << again.error;
  EXPECT_EQ(again.sample_source, "memory");
  EXPECT_DOUBLE_EQ(again.storage_bytes_per_s, first.storage_bytes_per_s);
  EXPECT_EQ(again.files_sampled, first.files_sampled);

  EXPECT_EQ(plan_and_close(16).first, 16u);  // its own inflation
  EXPECT_EQ(plan_and_close(16).first, 0u);

  // An object rewritten: the listing's ETag and size differ.
  cv::Mat image(40, 72, CV_8UC3, cv::Scalar(10, 200, 30));
  std::vector<uchar> jpeg;
  ASSERT_TRUE(cv::imencode(".jpg", image, jpeg));
  server_.Put("data", "imgs/c0/0.jpg", std::string(jpeg.begin(), jpeg.end()));
  const auto [changed_gets, changed] = plan_and_close(0);
  EXPECT_EQ(changed_gets, 16u);
  EXPECT_EQ(changed.sample_source, "storage");
  EXPECT_EQ(plan_and_close(0).first, 0u);
}

TEST_F(PlannerSampleStoreTest, ALocalDatasetIsSampledEveryTime) {
  // The same images on disk: sampling them again costs no request, and
  // keeps a local dataset's rate current.
  auto local = Dataset::Open(server_.root() / "data" / "data" / "imgs", {});
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  DatasetSampleStore samples(disk_->records_dir());
  EXPECT_EQ(Plan(*local, &samples).dataset.sample_source, "storage");
  EXPECT_EQ(Plan(*local, &samples).dataset.sample_source, "storage");
  EXPECT_EQ(samples.Stats().saves, 0u);
}

}  // namespace
}  // namespace galley
