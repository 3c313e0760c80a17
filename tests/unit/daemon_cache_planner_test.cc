// galleyd's cache options and planner: flags and TOML fill the cache
// options, admin overrides win over measurements, the planner applies the
// model's split to the cache, and the node probe measures real rates.
#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <thread>
#include <vector>

#include "galley/cache/partition_planner.h"
#include "galley/daemon/cache_planner.h"
#include "galley/daemon/daemon_options.h"
#include "galley/daemon/node_probe.h"
#include "galley/image/transforms.h"
#include "tests/unit/planner_test_support.h"
#include "tests/unit/tar_writer.h"

namespace galley {
namespace {

namespace fs = std::filesystem;

Result<DaemonOptions> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), {"galleyd", "--allowed-root", "/"});
  GALLEY_ASSIGN_OR_RETURN(LoadedOptions loaded, LoadDaemonOptions(args));
  return loaded.options;
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "galley_planner_XXXXXX").string();
    EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(DaemonCacheOptionsTest, DefaultsLeaveThePlannerInCharge) {
  auto options = Parse({});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->cache_eviction, "refcount");
  EXPECT_TRUE(options->cache_split.empty());
  EXPECT_EQ(options->storage_bytes_per_s, 0);
  EXPECT_EQ(options->cores, 0u);
}

TEST(DaemonCacheOptionsTest, FlagsSetEvictionSplitAndPlannerInputs) {
  auto options =
      Parse({"--cache-eviction", "lru", "--cache-split", "10,20,70", "--storage-bytes-per-s",
             "2.5e8", "--decode-per-core-per-s", "300", "--augment-per-core-per-s", "2000",
             "--memory-bytes-per-s", "5e9", "--cores", "6"});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->cache_eviction, "lru");
  EXPECT_EQ(options->cache_split, (std::vector<int>{10, 20, 70}));
  EXPECT_DOUBLE_EQ(options->storage_bytes_per_s, 2.5e8);
  EXPECT_DOUBLE_EQ(options->decode_per_core_per_s, 300);
  EXPECT_DOUBLE_EQ(options->augment_per_core_per_s, 2000);
  EXPECT_DOUBLE_EQ(options->memory_bytes_per_s, 5e9);
  EXPECT_EQ(options->cores, 6u);
}

TEST(DaemonCacheOptionsTest, BadValuesAreRefused) {
  EXPECT_FALSE(Parse({"--cache-eviction", "fifo"}).ok());
  EXPECT_FALSE(Parse({"--cache-split", "60,50,0"}).ok());
  EXPECT_FALSE(Parse({"--cache-split", "60,40"}).ok());
  EXPECT_FALSE(Parse({"--storage-bytes-per-s", "-1"}).ok());
}

TEST(DaemonCacheOptionsTest, ConfigFileIsReadAndFlagsOverrideIt) {
  TempDir dir;
  const fs::path config = dir.path() / "galleyd.toml";
  std::ofstream(config) << "cache_eviction = \"lru\"\n"
                           "cache_split = [30, 70, 0]\n"
                           "storage_bytes_per_s = 1e9\n"
                           "decode_per_core_per_s = 250\n"
                           "augment_per_core_per_s = 1500\n"
                           "cores = 4\n";
  auto options = Parse({"--config", config.string(), "--cores", "8"});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->cache_eviction, "lru");
  EXPECT_EQ(options->cache_split, (std::vector<int>{30, 70, 0}));
  EXPECT_DOUBLE_EQ(options->storage_bytes_per_s, 1e9);
  EXPECT_DOUBLE_EQ(options->decode_per_core_per_s, 250);
  EXPECT_DOUBLE_EQ(options->augment_per_core_per_s, 1500);
  EXPECT_EQ(options->cores, 8u);

  std::ofstream(config) << "cache_split = [30, 80, 0]\n";
  EXPECT_FALSE(Parse({"--config", config.string()}).ok());
}

class CachePlannerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cv::RNG rng(3);
    for (int c = 0; c < 2; ++c) {
      const fs::path folder = dir_.path() / std::string(1, static_cast<char>('a' + c));
      fs::create_directories(folder);
      for (int i = 0; i < 5; ++i) {
        cv::Mat image(40, 50, CV_8UC3);
        rng.fill(image, cv::RNG::UNIFORM, 0, 255);
        ASSERT_TRUE(cv::imwrite((folder / (std::to_string(i) + ".jpg")).string(), image));
      }
    }
    auto dataset = Dataset::Open(dir_.path(), {});
    ASSERT_TRUE(dataset.ok()) << dataset.status().ToString();
    dataset_ = *dataset;

    cache_ = testing::SmallCache();
    ASSERT_NE(cache_, nullptr);
    node_ = testing::FixedNode();
  }

  // The plan of a job over the whole dataset whose samples the augmented
  // tier keys by `signature`, with no pipeline of its own unless given.
  std::shared_ptr<const JobPlan> Job(
      const std::string& signature,
      std::shared_ptr<const image::TransformPipeline> pipeline = nullptr) {
    auto job = std::make_shared<JobPlan>();
    job->dataset = dataset_;
    job->augmentation_signature = signature;
    job->geometry.sample_bytes = 3 * 32 * 32;
    for (ItemId i = 0; i < dataset_->size(); ++i) job->subset.push_back(i);
    job->pipeline = std::move(pipeline);
    return job;
  }

  TempDir dir_;
  std::shared_ptr<const Dataset> dataset_;
  std::unique_ptr<cache::TieredCache> cache_;
  NodeMeasurements node_;
};

TEST_F(CachePlannerTest, InputsComeFromTheNodeTheDatasetAndTheJobs) {
  CachePlanner planner(cache_.get(), node_, 3, PlannerOverrides{});
  planner.RecordJob(1, Job("p#seed=1"));
  planner.RecordJob(2, Job("p#seed=1"));
  planner.RecordJob(3, Job("p#seed=2"));
  const cache::Plan plan = planner.ReplanNow();

  const cache::PlannerInputs in = planner.CurrentInputs();
  EXPECT_EQ(in.cores, 3);
  EXPECT_DOUBLE_EQ(in.decode_augment_per_core_per_s, 200);
  EXPECT_DOUBLE_EQ(in.augment_per_core_per_s, 1500);
  EXPECT_EQ(in.dataset_items, dataset_->size());
  EXPECT_DOUBLE_EQ(in.encoded_item_bytes, double(dataset_->total_bytes()) / dataset_->size());
  // 50x40 RGB is 6000 decoded bytes per file.
  EXPECT_NEAR(in.inflation, 6000.0 / in.encoded_item_bytes, 1e-9);
  EXPECT_GT(in.storage_bytes_per_s, 0);
  EXPECT_EQ(in.identical_pipeline_jobs, 2);
  EXPECT_EQ(in.cache_bytes, cache_->cache_bytes());

  // The split applied is the model's best for these inputs.
  const cache::Plan expected = cache::ModelDrivenPlanner().MakePlan(in);
  EXPECT_EQ(plan.split(), expected.split());
  EXPECT_EQ(cache_->split(), expected.split());
  EXPECT_EQ(planner.plans_made(), 1u);

  planner.OnJobClosed(2);
  EXPECT_EQ(planner.CurrentInputs().identical_pipeline_jobs, 1);
  const PlanSnapshot described = planner.Snapshot();
  EXPECT_EQ(described.planner, "model-driven");
  EXPECT_EQ(described.inputs.storage_bytes_per_s.source, "measured");
}

TEST_F(CachePlannerTest, AdminOverridesWin) {
  PlannerOverrides overrides;
  overrides.storage_bytes_per_s = 1e6;
  overrides.decode_augment_per_core_per_s = 111;
  overrides.augment_per_core_per_s = 999;
  overrides.memory_bytes_per_s = 3e9;
  overrides.cores = 7;
  overrides.split = cache::Split{20, 30, 50};
  CachePlanner planner(cache_.get(), node_, 2, overrides);
  EXPECT_EQ(cache_->split(), (cache::Split{20, 30, 50}));
  planner.RecordJob(1, Job("p#seed=1"));
  const cache::Plan plan = planner.ReplanNow();
  EXPECT_EQ(plan.split(), (cache::Split{20, 30, 50}));
  EXPECT_EQ(cache_->split(), (cache::Split{20, 30, 50}));
  EXPECT_GT(plan.predicted_items_per_s, 0);

  const cache::PlannerInputs in = planner.CurrentInputs();
  EXPECT_DOUBLE_EQ(in.storage_bytes_per_s, 1e6);
  EXPECT_DOUBLE_EQ(in.decode_augment_per_core_per_s, 111);
  EXPECT_DOUBLE_EQ(in.augment_per_core_per_s, 999);
  EXPECT_DOUBLE_EQ(in.memory_bytes_per_s, 3e9);
  EXPECT_EQ(in.cores, 7);
  const PlanSnapshot described = planner.Snapshot();
  EXPECT_EQ(described.planner, "admin split");
  EXPECT_EQ(described.inputs.storage_bytes_per_s.source, "override");
  EXPECT_EQ(described.inputs.memory_bytes_per_s.source, "override");
  EXPECT_EQ(described.inputs.cores.source, "override");
  EXPECT_DOUBLE_EQ(described.inputs.cores.value, 7);
}

TEST_F(CachePlannerTest, ThePlannerThreadReplansWhenJobsChange) {
  CachePlanner planner(cache_.get(), node_, 2, PlannerOverrides{});
  planner.Start();
  planner.RecordJob(1, Job("p#seed=1"));
  // The thread samples the dataset first; the deadline only bounds a hang.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (planner.plans_made() == 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE(planner.plans_made(), 1u);
  planner.Stop();
}

std::shared_ptr<const image::TransformPipeline> PipelineOf(const nlohmann::json& ops) {
  auto pipeline = image::TransformPipeline::FromJson({{"ops", ops}});
  EXPECT_TRUE(pipeline.ok()) << pipeline.status().ToString();
  return std::make_shared<const image::TransformPipeline>(std::move(pipeline).value());
}

TEST_F(CachePlannerTest, EachPipelinesMeasuredCostReplacesTheProbesAugmentCost) {
  const auto cheap =
      PipelineOf({{{"op", "RandomResizedCrop"}, {"size", 224}}, {{"op", "RandomHorizontalFlip"}}});
  const auto heavy = PipelineOf({{{"op", "RandomResizedCrop"}, {"size", 224}},
                                 {{"op", "RandAugment"}, {"num_ops", 3}},
                                 {{"op", "GaussianBlur"}, {"kernel_size", 23}}});
  // The decode share of the probe (1/200 - 1/1500 s) stays; augment is the
  // pipeline's own: decode_augment = 1 / (decode + augment).
  const double decode_seconds = 1.0 / 200 - 1.0 / 1500;
  // What timing each pipeline gives, fixed (a measurement varies with the
  // machine and its load; what the planner makes of it must not): the cheap
  // pipeline augments in an eighth of a millisecond, the heavy one
  // (RandAugment x3 and a 23-tap blur) takes longer than the decode.
  const std::map<std::string, double> timed_rates = {
      {cheap->Signature(), 8000}, {heavy->Signature(), 1.0 / (1.5 * decode_seconds)}};
  std::map<std::string, int> timings;
  const PipelineTimer timer = [&](const image::TransformPipeline& pipeline) -> Result<double> {
    ++timings[pipeline.Signature()];
    return timed_rates.at(pipeline.Signature());
  };
  auto inputs_for = [&](const std::shared_ptr<const image::TransformPipeline>& pipeline) {
    CachePlanner planner(cache_.get(), node_, 4, PlannerOverrides{}, nullptr, timer);
    for (uint64_t id = 1; id <= 4; ++id) {
      planner.RecordJob(id, Job("same#seed=1", pipeline));
    }
    const cache::Plan plan = planner.ReplanNow();
    EXPECT_EQ(planner.ReplanNow().split(), plan.split());
    const cache::PlannerInputs in = planner.CurrentInputs();
    EXPECT_EQ(plan.split(), cache::ModelDrivenPlanner().MakePlan(in).split());
    return in;
  };
  const cache::PlannerInputs cheap_in = inputs_for(cheap);
  const cache::PlannerInputs heavy_in = inputs_for(heavy);
  // Each pipeline is timed once, for its four jobs and both plans.
  EXPECT_EQ(timings,
            (std::map<std::string, int>{{cheap->Signature(), 1}, {heavy->Signature(), 1}}));
  EXPECT_DOUBLE_EQ(cheap_in.augment_per_core_per_s, timed_rates.at(cheap->Signature()));
  EXPECT_DOUBLE_EQ(heavy_in.augment_per_core_per_s, timed_rates.at(heavy->Signature()));
  for (const auto* in : {&cheap_in, &heavy_in}) {
    EXPECT_NEAR(1.0 / in->decode_augment_per_core_per_s,
                decode_seconds + 1.0 / in->augment_per_core_per_s, 1e-12);
  }
  // Each planner kept its own pipeline's cost: RandAugment x3 + a 23-tap
  // blur, several times RandomResizedCrop's.
  EXPECT_GT(cheap_in.augment_per_core_per_s, 3 * heavy_in.augment_per_core_per_s);

  // What that does to the split, at ImageNet scale (the test's 10 tiny
  // files fit every tier): the model's answer for the planner's rates, two
  // jobs sharing the pipeline, float32 samples (600 KB, more than a decoded
  // image). A decoded entry saves the decode for every request; an
  // augmented one saves decode and augment, but for only half the requests
  // (g = 2) and takes more bytes. So the augmented tier pays only when
  // augmenting costs about as much as decoding: the heavy pipeline moves the
  // split towards it, and the predicted rate falls.
  auto imagenet = [&](cache::PlannerInputs in) {
    in.cores = 16;
    in.dataset_items = 1281167;
    in.encoded_item_bytes = 110e3;
    in.inflation = 5;
    in.augmented_item_bytes = 4 * 3 * 224 * 224;  // float32 output
    in.cache_bytes = uint64_t{64} << 30;
    in.storage_bytes_per_s = 500e6;
    in.memory_bytes_per_s = 10e9;
    in.identical_pipeline_jobs = 2;
    in.augmented_reuse_limit = 1;
    return cache::ModelDrivenPlanner().MakePlan(in);
  };
  const cache::Plan cheap_plan = imagenet(cheap_in);
  const cache::Plan heavy_plan = imagenet(heavy_in);
  std::printf("ImageNet-scale split, cheap pipeline (%.0f/s): %d/%d/%d, predicted %.0f items/s\n",
              cheap_in.augment_per_core_per_s, cheap_plan.encoded_pct, cheap_plan.decoded_pct,
              cheap_plan.augmented_pct, cheap_plan.predicted_items_per_s);
  std::printf("ImageNet-scale split, heavy pipeline (%.0f/s): %d/%d/%d, predicted %.0f items/s\n",
              heavy_in.augment_per_core_per_s, heavy_plan.encoded_pct, heavy_plan.decoded_pct,
              heavy_plan.augmented_pct, heavy_plan.predicted_items_per_s);
  EXPECT_GT(heavy_plan.augmented_pct, cheap_plan.augmented_pct);
  EXPECT_LT(heavy_plan.predicted_items_per_s, cheap_plan.predicted_items_per_s);
}

TEST_F(CachePlannerTest, APipelineThatCannotBeTimedKeepsTheProbesAugmentCost) {
  const auto pipeline = PipelineOf({{{"op", "CenterCrop"}, {"size", 32}}});
  int timings = 0;
  CachePlanner planner(cache_.get(), node_, 2, PlannerOverrides{}, nullptr,
                       [&](const image::TransformPipeline&) -> Result<double> {
                         ++timings;
                         return Status::Internal("no probe image");
                       });
  planner.RecordJob(1, Job("p#seed=1", pipeline));
  planner.ReplanNow();
  planner.ReplanNow();
  EXPECT_EQ(timings, 1) << "a failed timing is not retried at every plan";
  const cache::PlannerInputs in = planner.CurrentInputs();
  EXPECT_DOUBLE_EQ(in.augment_per_core_per_s, node_.augment_per_core_per_s);
  EXPECT_DOUBLE_EQ(in.decode_augment_per_core_per_s, node_.decode_augment_per_core_per_s);
}

TEST(NodeProbeTest, TimesAPipelinesAugmentRate) {
  const auto pipeline =
      PipelineOf({{{"op", "RandomResizedCrop"}, {"size", 224}}, {{"op", "RandomHorizontalFlip"}}});
  auto rate = MeasureAugmentRate(*pipeline, std::chrono::milliseconds(5));
  ASSERT_TRUE(rate.ok()) << rate.status().ToString();
  EXPECT_GT(*rate, 0);
}

TEST(NodeProbeTest, MeasuresPositiveRatesAndAugmentIsCheaperThanDecode) {
  auto node = MeasureNode(std::chrono::milliseconds(30));
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_GT(node->decode_augment_per_core_per_s, 0);
  EXPECT_GT(node->memory_bytes_per_s, 0);
  // Augmenting alone is part of decode + augment, so it is faster; the
  // margin is wide (decoding a 500x375 JPEG costs several crops).
  EXPECT_GT(node->augment_per_core_per_s, node->decode_augment_per_core_per_s);
}

// A one-member ustar archive: header, payload, padding, end blocks.
std::string TarOf(const std::string& name, const std::string& payload) {
  const std::vector<uint8_t> archive = testing::TarWriter().Add(name, payload).Finish();
  return std::string(archive.begin(), archive.end());
}

// The planner's sample of a large member reads its head: enough for the
// header, not a second copy of a member the pipeline may be reading too.
// The inflation still counts the member's whole size.
TEST(NodeProbeTest, SamplingALargeMemberReadsOnlyItsHead) {
  TempDir dir;
  cv::Mat image(40, 50, CV_8UC3, cv::Scalar(10, 200, 30));
  std::vector<uint8_t> jpeg;
  ASSERT_TRUE(cv::imencode(".jpg", image, jpeg));
  std::string member(jpeg.begin(), jpeg.end());
  const size_t size = 8 << 20;
  member.resize(size, '\0');  // other bytes after the image, as a decoder ignores them
  const fs::path shard = dir.path() / "large.tar";
  std::ofstream(shard, std::ios::binary) << TarOf("k0.jpg", member);
  ShardOptions options;
  options.label_key = "";
  auto dataset = Dataset::OpenShards({shard.string()}, options, {});
  ASSERT_TRUE(dataset.ok()) << dataset.status().ToString();
  auto sample = SampleDataset(**dataset, 0);
  ASSERT_TRUE(sample.ok()) << sample.status().ToString();
  EXPECT_EQ(sample->files_sampled, 1u);
  EXPECT_EQ(sample->bytes_read, uint64_t{1} << 20);
  EXPECT_DOUBLE_EQ(sample->inflation, 50.0 * 40 * 3 / size);
}

// The default worker count follows the CPUs the process may run on, not the
// machine's: checked in a thread pinned to one CPU (affinity is per thread on
// Linux, and sched_getaffinity(0) reads the calling thread's).
TEST(NodeProbeTest, UsableCoresFollowsTheAffinityMask) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  const unsigned before = UsableCores();
  EXPECT_GE(before, 1u);
  EXPECT_LE(before, static_cast<unsigned>(CPU_COUNT(&all)));
  unsigned pinned = 0;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &all)) {
        CPU_SET(cpu, &one);
        break;
      }
    }
    if (sched_setaffinity(0, sizeof(one), &one) == 0) pinned = UsableCores();
  }).join();
  EXPECT_EQ(pinned, 1u);
}

// ReadNodeMemory over a made-up /proc and cgroup tree: meminfo's figures,
// bounded by the tightest memory.max (less memory.current) on the way up.
TEST(NodeProbeTest, NodeMemoryIsBoundedByTheCgroupsMemoryLimits) {
  const fs::path root = fs::temp_directory_path() / ("galley-meminfo-" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "proc/self");
  fs::create_directories(root / "cgroup/jobs/galleyd");
  std::ofstream(root / "proc/meminfo") << "MemTotal:       16777216 kB\n"
                                          "MemFree:         1000000 kB\n"
                                          "MemAvailable:    8388608 kB\n";
  const NodeMemory host = ReadNodeMemory(root / "proc", root / "cgroup");
  EXPECT_EQ(host.total_bytes, uint64_t{16} << 30);
  EXPECT_EQ(host.available_bytes, uint64_t{8} << 30);

  std::ofstream(root / "proc/self/cgroup") << "0::/jobs/galleyd\n";
  std::ofstream(root / "cgroup/jobs/galleyd/memory.max") << "max\n";
  std::ofstream(root / "cgroup/jobs/memory.max") << (uint64_t{4} << 30) << "\n";
  std::ofstream(root / "cgroup/jobs/memory.current") << (uint64_t{3} << 30) << "\n";
  const NodeMemory limited = ReadNodeMemory(root / "proc", root / "cgroup");
  EXPECT_EQ(limited.total_bytes, uint64_t{4} << 30);
  EXPECT_EQ(limited.available_bytes, uint64_t{1} << 30);

  EXPECT_EQ(ReadNodeMemory(root / "nowhere", root / "cgroup").total_bytes, 0u);
  fs::remove_all(root);
}

}  // namespace
}  // namespace galley
