// Integration tests of the node-local disk tier: a real galleyd whose memory
// cache is smaller than the dataset and whose disk tier holds all of it,
// reading real JPEG files; galleyd is stopped and started again on the same
// folder to stand for a restart.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <thread>

#include "galley/client.h"
#include "tests/integration/galleyd_process.h"
#include "tests/integration/metadata_clone.h"
#include "tests/integration/other_user.h"

namespace galley {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::GalleydProcess;
using testing::TempDir;

constexpr const char* kTransform = R"({"ops":[{"op":"Resize","size":[32,32]}]})";
constexpr int kItems = 30;

using Samples = testing::SamplesById;

class DiskTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = tmp_.path() / "data";
    files_ = testing::WriteJpegFolder(data_, 3, kItems / 3);
    disk_ = tmp_.path() / "disk-cache";
  }

  // galleyd with a 64 KiB memory cache (a fraction of the set) and, unless
  // `disk` is false, a 64 MiB disk tier in disk_; `extra` flags after those.
  std::unique_ptr<GalleydProcess> Start(bool disk = true, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {
        "--allowed-root", tmp_.path().string(), "--cache-bytes", "64K", "--worker-threads", "2"};
    if (disk) {
      args.insert(args.end(), {"--disk-cache", disk_.string(), "--disk-cache-bytes", "64M"});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    GalleydProcess::Launch launch;
    launch.log = tmp_.path() / ("galleyd-" + std::to_string(starts_++) + ".log");
    auto daemon = std::make_unique<GalleydProcess>(tmp_.path() / "galleyd.sock", args, launch);
    EXPECT_TRUE(daemon->started()) << "galleyd did not start; see " << launch.log;
    return daemon;
  }

  static nlohmann::json Pipeline(const GalleydProcess& daemon) {
    ClientOptions options;
    options.socket_path = daemon.socket();
    auto client = Client::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    if (!client.ok()) return {};
    auto text = client->Query("status");
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    return text.ok() ? nlohmann::json::parse(*text)["pipeline"] : nlohmann::json{};
  }
  static uint64_t FileReads(const GalleydProcess& daemon) {
    return Pipeline(daemon)["file_reads"].get<uint64_t>();
  }
  static nlohmann::json Disk(const GalleydProcess& daemon) { return Pipeline(daemon)["disk"]; }

  // Waits until `pred` holds of the disk tier's counters (its writer and
  // its index run in the background); false after a minute, a bound on a
  // hang only.
  static bool WaitForDisk(const GalleydProcess& daemon,
                          const std::function<bool(const nlohmann::json&)>& pred) {
    const auto give_up = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < give_up) {
      if (pred(Disk(daemon))) return true;
      std::this_thread::sleep_for(25ms);
    }
    return false;
  }
  static bool WaitForAllWritten(const GalleydProcess& daemon, uint64_t writes) {
    return WaitForDisk(daemon, [writes](const nlohmann::json& disk) {
      return disk["writes"].get<uint64_t>() >= writes &&
             disk["write_queue_bytes"].get<uint64_t>() == 0;
    });
  }
  static bool WaitForIndex(const GalleydProcess& daemon) {
    return WaitForDisk(daemon,
                       [](const nlohmann::json& disk) { return disk["indexed"].get<bool>(); });
  }

  // One epoch, every sample by item id; a failed sample fails the test.
  static JobSpec EpochSpec(const fs::path& dataset, uint32_t max_resolution = 0) {
    JobSpec spec;
    spec.dataset = dataset.string();
    spec.batch_size = 3;
    spec.transform_json = kTransform;
    spec.seed = 3;
    spec.epochs = 1;
    spec.on_error = "raise";
    spec.max_resolution = max_resolution;
    return spec;
  }

  Samples RunEpoch(const GalleydProcess& daemon, uint32_t max_resolution = 0) {
    ClientOptions options;
    options.socket_path = daemon.socket();
    options.request_timeout = 10s;
    auto client = Client::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    auto job = client->OpenJob(EpochSpec(data_, max_resolution));
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    Samples samples;
    if (!job.ok()) return samples;
    for (;;) {
      auto batch = job->Next(20s);
      EXPECT_TRUE(batch.ok()) << batch.status().ToString();
      if (!batch.ok()) break;
      EXPECT_EQ(batch->skipped(), 0u) << batch->first_error();
      const size_t sample_bytes = batch->data_bytes() / batch->size();
      const auto* data = static_cast<const uint8_t*>(batch->data());
      for (size_t i = 0; i < batch->size(); ++i) {
        samples[batch->item_ids()[i]] =
            std::vector<uint8_t>(data + i * sample_bytes, data + (i + 1) * sample_bytes);
      }
      if (batch->last_in_epoch()) break;
    }
    EXPECT_EQ(samples.size(), size_t{kItems});
    return samples;
  }

  TempDir tmp_;
  fs::path data_;
  fs::path disk_;
  std::vector<fs::path> files_;
  int starts_ = 0;
};

TEST_F(DiskTierTest, TheSecondEpochAndTheFirstAfterARestartReadNoFile) {
  Samples first;
  {
    auto daemon = Start();
    first = RunEpoch(*daemon);
    EXPECT_EQ(FileReads(*daemon), uint64_t{kItems});
    ASSERT_TRUE(WaitForAllWritten(*daemon, kItems)) << Disk(*daemon).dump();
    // The memory cache holds a fraction of the set: the rest comes from disk.
    EXPECT_EQ(RunEpoch(*daemon), first);
    EXPECT_EQ(FileReads(*daemon), uint64_t{kItems});
    const nlohmann::json disk = Disk(*daemon);
    EXPECT_GT(disk["hits"].get<uint64_t>(), 0u) << disk.dump();
    EXPECT_EQ(disk["entries"].get<uint64_t>(), uint64_t{kItems});
    EXPECT_EQ(disk["damaged"].get<uint64_t>(), 0u);
    EXPECT_EQ(disk["write_drops"].get<uint64_t>(), 0u);
    EXPECT_EQ(daemon->Stop(SIGTERM), 0);
  }
  struct stat info {};
  ASSERT_EQ(::stat(disk_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0700u);

  auto daemon = Start();
  ASSERT_TRUE(WaitForIndex(*daemon));
  EXPECT_EQ(Disk(*daemon)["entries"].get<uint64_t>(), uint64_t{kItems});
  EXPECT_EQ(RunEpoch(*daemon), first);
  EXPECT_EQ(FileReads(*daemon), 0u);
  EXPECT_EQ(Disk(*daemon)["hits"].get<uint64_t>(), uint64_t{kItems});
}

TEST_F(DiskTierTest, AtAMaxResolutionTheDiskKeepsThePackedPixels) {
  Samples first;
  {
    auto daemon = Start();
    first = RunEpoch(*daemon, /*max_resolution=*/48);
    ASSERT_TRUE(WaitForAllWritten(*daemon, kItems)) << Disk(*daemon).dump();
  }
  auto daemon = Start();
  EXPECT_EQ(RunEpoch(*daemon, 48), first);
  const nlohmann::json pipeline = Pipeline(*daemon);
  EXPECT_EQ(pipeline["file_reads"].get<uint64_t>(), 0u);
  // Unpacked, not decoded: no original was read or decoded.
  EXPECT_EQ(pipeline["decodes"].get<uint64_t>(), 0u);
  EXPECT_EQ(pipeline["unpacks"].get<uint64_t>(), uint64_t{kItems});
}

TEST_F(DiskTierTest, AFileChangedBetweenRunsIsReadFromStorageNotServedStale) {
  Samples first;
  {
    auto daemon = Start();
    first = RunEpoch(*daemon);
    ASSERT_TRUE(WaitForAllWritten(*daemon, kItems));
  }
  // Another picture under the same name.
  cv::Mat white(64, 64, CV_8UC3, cv::Scalar::all(255));
  ASSERT_TRUE(cv::imwrite(files_[4].string(), white));

  Samples after;
  {
    auto daemon = Start();
    after = RunEpoch(*daemon);
    EXPECT_EQ(FileReads(*daemon), uint64_t{kItems});
    EXPECT_EQ(Disk(*daemon)["hits"].get<uint64_t>(), 0u);
  }
  EXPECT_NE(after.at(4), first.at(4));
  // What galleyd without a disk tier makes of the files now.
  auto plain = Start(/*disk=*/false);
  EXPECT_EQ(RunEpoch(*plain), after);
}

TEST_F(DiskTierTest, DamagedEntriesAreReadAgainFromStorage) {
  Samples first;
  {
    auto daemon = Start();
    first = RunEpoch(*daemon);
    ASSERT_TRUE(WaitForAllWritten(*daemon, kItems));
  }
  int damaged = 0;
  for (const auto& entry : fs::recursive_directory_iterator(disk_ / "entries-v1")) {
    if (!entry.is_regular_file()) continue;
    std::fstream file(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(100);
    const int byte = file.get();
    file.seekp(100);
    file.put(static_cast<char>(~byte));
    ++damaged;
  }
  ASSERT_EQ(damaged, kItems);
  auto daemon = Start();
  EXPECT_EQ(RunEpoch(*daemon), first);
  EXPECT_EQ(FileReads(*daemon), uint64_t{kItems});
  EXPECT_EQ(Disk(*daemon)["damaged"].get<uint64_t>(), uint64_t{kItems});
  // Written again, sound.
  ASSERT_TRUE(WaitForAllWritten(*daemon, kItems));
}

TEST_F(DiskTierTest, ASecondGalleydOnTheSameFolderIsRefused) {
  auto daemon = Start();
  const testing::GalleydOutput second = testing::RunGalleydForOutput(
      {"--socket", (tmp_.path() / "second.sock").string(), "--allowed-root", tmp_.path().string(),
       "--cache-bytes", "0", "--disk-cache", disk_.string()});
  EXPECT_EQ(second.code, 2);
  EXPECT_NE(second.err.find("in use by another galleyd"), std::string::npos) << second.err;
}

// Another user who may stat root's private files but not read them makes a
// metadata clone of them (same names, sizes and mtimes) under a folder of
// their own, filled with grey, and reads it from a galleyd whose disk tier
// holds root's pixels: they get their own grey, the disk tier finds nothing
// for them, and they cannot open the tier's folder either.
TEST_F(DiskTierTest, AMetadataCloneOfAnotherUsersFilesGetsNoneOfTheirPixels) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as a second user";
  const std::vector<std::string> relative = testing::MakeFilesPrivate(tmp_.path(), data_);
  ASSERT_EQ(relative.size(), size_t{kItems});
  Samples private_samples;
  {
    auto daemon = Start(true, {"--socket-mode", "0666"});
    private_samples = RunEpoch(*daemon);
    ASSERT_TRUE(WaitForAllWritten(*daemon, kItems));
  }
  auto daemon = Start(true, {"--socket-mode", "0666"});
  ASSERT_TRUE(WaitForIndex(*daemon));
  const fs::path clone = tmp_.path() / "clone";
  const testing::Outcome attack = testing::ReadAMetadataCloneAsNobody(
      {.data = data_,
       .relative = relative,
       .clone = clone,
       .socket = daemon->socket(),
       .spec = EpochSpec(clone),
       .private_samples = &private_samples,
       .first = [&]() -> Status {
         if (::open((disk_ / "entries-v1").c_str(), O_RDONLY | O_DIRECTORY) >= 0) {
           return Status::Internal("the disk tier's folder is open to another user");
         }
         return Status::Ok();
       }});
  ASSERT_EQ(attack.code, 0) << attack.message;
  // served, the private set's pixels, the clone's own grey
  EXPECT_EQ(attack.message, std::to_string(kItems) + " 0 " + std::to_string(kItems));
  EXPECT_EQ(Disk(*daemon)["hits"].get<uint64_t>(), 0u);
  EXPECT_EQ(FileReads(*daemon), uint64_t{kItems});
  // root's own set, at its own path: every item from the disk tier.
  EXPECT_EQ(RunEpoch(*daemon), private_samples);
  EXPECT_EQ(FileReads(*daemon), uint64_t{kItems});
  EXPECT_EQ(Disk(*daemon)["hits"].get<uint64_t>(), uint64_t{kItems});
}

}  // namespace
}  // namespace galley
