// Per-user access against a daemon run by root, as a node's service would
// be: jobs of a second user (uid 65534) are served only what that user
// could read themselves, also when the items sit in a cache tier; users see
// and cancel only their own jobs; a dataset changed on disk is seen by the
// next job and never served stale; drain and forget.
//
// The daemon is built in the test's process; the second user's client is
// galley_client_as, spawned, which drops to that user and runs the client
// steps the test names (other_user.h). The drain's exit is the galleyd
// process's own, so that test runs the real galleyd.
//
// Needs root (to act as another uid); CI runs as root.
#include <acl/libacl.h>
#include <gtest/gtest.h>
#include <sys/acl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <thread>
#include <vector>

#include "galley/client.h"
#include "tests/integration/galleyd_process.h"
#include "tests/integration/other_user.h"
#include "tests/integration/two_user_daemon.h"
#include "wire/messages.h"

namespace galley {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using testing::ChildAs;
using testing::Outcome;
using testing::RunAs;

constexpr uid_t kOther = testing::kNobodyUid;
constexpr gid_t kOtherGroup = testing::kNobodyGid;
constexpr gid_t kDataGroup = 4242;  // a group only some tests give the other user

void WriteSolid(const fs::path& path, uint8_t red, uint8_t green, uint8_t blue) {
  cv::Mat image(16, 16, CV_8UC3, cv::Scalar(blue, green, red));
  ASSERT_TRUE(cv::imwrite(path.string(), image, {cv::IMWRITE_JPEG_QUALITY, 100}));
}

// Writes `path` again, in place, until its change time differs from the one
// it had: a write within the clock tick of the last one would keep it, and
// the file would look unchanged.
void RewriteSolid(const fs::path& path, uint8_t red, uint8_t green, uint8_t blue) {
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  struct stat after = before;
  while (after.st_ctim.tv_sec == before.st_ctim.tv_sec &&
         after.st_ctim.tv_nsec == before.st_ctim.tv_nsec) {
    WriteSolid(path, red, green, blue);
    ASSERT_EQ(::stat(path.c_str(), &after), 0);
  }
  ASSERT_EQ(after.st_ino, before.st_ino);
}

class AccessTest : public testing::TwoUserDaemonTest {
 protected:
  // Opens `spec` as root (this process) and reads one whole epoch; the
  // items received, or the first error.
  Result<uint64_t> ReadEpoch(const JobSpec& spec) const {
    GALLEY_ASSIGN_OR_RETURN(auto client, Client::Connect(options_));
    GALLEY_ASSIGN_OR_RETURN(auto job, client.OpenJob(spec));
    uint64_t items = 0;
    while (true) {
      GALLEY_ASSIGN_OR_RETURN(auto batch, job.Next(20s));
      items += batch.size();
      if (batch.last_in_epoch()) return items;
    }
  }

  // A client of another user that runs `steps` (client_as_main.cc).
  testing::ClientSteps OtherClient(std::vector<std::string> steps) const {
    return {GALLEY_CLIENT_AS_PATH, options_.socket_path, std::move(steps)};
  }
  // A step that takes a job body: "<name>=<spec's OpenJob JSON>".
  static std::string Step(const std::string& name, const JobSpec& spec) {
    return name + "=" + wire::JobSpecToJson(spec).dump();
  }
  // `steps` run by the other user with the supplementary `groups`.
  Outcome RunAsOther(std::vector<std::string> steps, const std::vector<gid_t>& groups = {}) const {
    return RunAs(kOther, kOtherGroup, groups, OtherClient(std::move(steps)));
  }

  // The other user reads one epoch of `spec`; Ok when it was whole.
  Outcome ReadEpochAs(const std::vector<gid_t>& groups, const JobSpec& spec) const {
    return RunAsOther({Step("epoch", spec)}, groups);
  }

  // The query's reply to root (this process), or to the other user.
  nlohmann::json Query(const std::string& what) const {
    auto client = Client::Connect(options_);
    if (!client.ok()) return {};
    auto reply = client->Query(what);
    return reply.ok() ? nlohmann::json::parse(*reply) : nlohmann::json();
  }
  nlohmann::json QueryAsOther(const std::string& what) const {
    const Outcome outcome = RunAsOther({"query=" + what});
    return outcome.code == 0 ? nlohmann::json::parse(outcome.message) : nlohmann::json();
  }
};

TEST_F(AccessTest, AReadableDatasetIsServedToTheOtherUser) {
  Start();
  const Outcome outcome = ReadEpochAs({}, Spec());
  EXPECT_EQ(outcome.code, 0) << outcome.message;
}

TEST_F(AccessTest, AClosedDatasetIsRefusedDirectlyAndThroughAWarmCache) {
  fs::permissions(data_, fs::perms(0700));
  Start();
  Outcome outcome = ReadEpochAs({}, Spec());
  EXPECT_EQ(outcome.code, static_cast<int>(StatusCode::kPermissionDenied)) << outcome.message;
  EXPECT_NE(outcome.message.find(data_.string()), std::string::npos) << outcome.message;
  // Root lists it and warms every tier with two epochs.
  ASSERT_TRUE(ReadEpoch(Spec()).ok());
  ASSERT_TRUE(ReadEpoch(Spec()).ok());
  outcome = ReadEpochAs({}, Spec());
  EXPECT_EQ(outcome.code, static_cast<int>(StatusCode::kPermissionDenied)) << outcome.message;
  EXPECT_NE(outcome.message.find(data_.string()), std::string::npos) << outcome.message;
}

TEST_F(AccessTest, OneClosedFileRefusesTheJobNamingItWhileASubsetWithoutItIsServed) {
  const fs::path closed = data_ / "class1" / "002.jpg";
  ASSERT_TRUE(fs::exists(closed));
  fs::permissions(closed, fs::perms(0600));
  Start();
  // Root warms the cache with the closed file in it.
  ASSERT_TRUE(ReadEpoch(Spec()).ok());
  Outcome outcome = ReadEpochAs({}, Spec());
  EXPECT_EQ(outcome.code, static_cast<int>(StatusCode::kPermissionDenied)) << outcome.message;
  EXPECT_NE(outcome.message.find(closed.string()), std::string::npos) << outcome.message;
  JobSpec subset = Spec();
  subset.id_ranges = {{0, 5}};  // the closed file is item 5, the last
  outcome = ReadEpochAs({}, subset);
  EXPECT_EQ(outcome.code, 0) << outcome.message;
}

// The listing request (names and labels, no job) and a job whose client
// lists its epochs are checked as a job over the whole dataset: another
// user learns no name of a file they may not read, nor is served one in a
// later epoch's list.
TEST_F(AccessTest, TheListingAndListedEpochsAreCheckedForTheWholeDataset) {
  Start();
  auto listing_as_other = [&]() { return RunAsOther({Step("listing", Spec())}); };
  Outcome outcome = listing_as_other();
  ASSERT_EQ(outcome.code, 0) << outcome.message;
  EXPECT_EQ(nlohmann::json::parse(outcome.message)["names"].size(), 6u);

  const fs::path closed = data_ / "class1" / "002.jpg";
  fs::permissions(closed, fs::perms(0600));
  {
    auto client = Client::Connect(options_);  // root lists it: a warm listing
    ASSERT_TRUE(client.ok());
    ASSERT_TRUE(client->Listing(Spec(), 0).ok());
  }
  outcome = listing_as_other();
  EXPECT_EQ(outcome.code, static_cast<int>(StatusCode::kPermissionDenied)) << outcome.message;
  EXPECT_NE(outcome.message.find(closed.string()), std::string::npos) << outcome.message;
  JobSpec listed = Spec();
  listed.epoch_items = std::vector<uint64_t>{0, 1, 2};  // not the closed item 5
  outcome = ReadEpochAs({}, listed);
  EXPECT_EQ(outcome.code, static_cast<int>(StatusCode::kPermissionDenied)) << outcome.message;
  auto items = ReadEpoch(listed);  // root: the list, whole
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  EXPECT_EQ(*items, 3u);
}

TEST_F(AccessTest, AClosedDirectoryAboveTheFilesRefuses) {
  fs::permissions(data_ / "class0", fs::perms(0700));
  Start();
  const Outcome outcome = ReadEpochAs({}, Spec());
  EXPECT_EQ(outcome.code, static_cast<int>(StatusCode::kPermissionDenied)) << outcome.message;
  EXPECT_NE(outcome.message.find("class0"), std::string::npos) << outcome.message;
}

TEST_F(AccessTest, TheUsersSupplementaryGroupsCount) {
  // Group-only data: 0750 folders and 0640 files of group kDataGroup.
  for (const auto& entry : fs::recursive_directory_iterator(data_)) {
    ASSERT_EQ(::chown(entry.path().c_str(), 0, kDataGroup), 0);
    fs::permissions(entry.path(), fs::perms(entry.is_directory() ? 0750 : 0640));
  }
  ASSERT_EQ(::chown(data_.c_str(), 0, kDataGroup), 0);
  fs::permissions(data_, fs::perms(0750));
  Start();
  Outcome outcome = ReadEpochAs({}, Spec());
  EXPECT_EQ(outcome.code, static_cast<int>(StatusCode::kPermissionDenied)) << outcome.message;
  outcome = ReadEpochAs({kDataGroup}, Spec());
  EXPECT_EQ(outcome.code, 0) << outcome.message;
}

TEST_F(AccessTest, AnAclThatDeniesTheUserIsHonoured) {
  const fs::path denied = data_ / "class0" / "001.jpg";
  acl_t acl = acl_from_text("u::rw-,u:65534:---,g::r--,m::r--,o::r--");
  ASSERT_NE(acl, nullptr);
  const int set = acl_set_file(denied.c_str(), ACL_TYPE_ACCESS, acl);
  acl_free(acl);
  ASSERT_EQ(set, 0) << "the temp dir's file system refuses ACLs: " << std::strerror(errno);
  Start();
  Outcome outcome = ReadEpochAs({}, Spec());
  EXPECT_EQ(outcome.code, static_cast<int>(StatusCode::kPermissionDenied)) << outcome.message;
  EXPECT_NE(outcome.message.find(denied.string()), std::string::npos) << outcome.message;
  // The same ACL does not stop a third user: "other" still reads.
  outcome = RunAs(65533, 65533, {}, OtherClient({Step("epoch", Spec())}));
  EXPECT_EQ(outcome.code, 0) << outcome.message;
}

TEST_F(AccessTest, TarShardsAreCheckedShardByShard) {
  // Two shards of three samples each (image + .cls label), made by GNU tar;
  // the second is root's only.
  std::vector<std::string> shards;
  for (int shard = 0; shard < 2; ++shard) {
    const fs::path members = tmp_.path() / ("members" + std::to_string(shard));
    fs::create_directories(members);
    for (int i = 0; i < 3; ++i) {
      const std::string key = "s" + std::to_string(shard) + "_" + std::to_string(i);
      WriteSolid(members / (key + ".jpg"), 10, 20, 30);
      std::ofstream(members / (key + ".cls")) << i;
    }
    const fs::path tar = tmp_.path() / ("train-00000" + std::to_string(shard) + ".tar");
    const std::string command =
        "tar --sort=name -cf " + tar.string() + " -C " + members.string() + " .";
    ASSERT_EQ(std::system(command.c_str()), 0);
    fs::permissions(tar, fs::perms(shard == 0 ? 0644 : 0600));
    shards.push_back(tar.string());
  }
  Start();
  JobSpec spec = Spec();
  spec.dataset = (tmp_.path() / "train-*.tar").string();  // the set's name in messages
  spec.shards = shards;
  const auto root_epoch = ReadEpoch(spec);  // root lists and reads both
  ASSERT_TRUE(root_epoch.ok()) << root_epoch.status().ToString();
  Outcome outcome = ReadEpochAs({}, spec);
  EXPECT_EQ(outcome.code, static_cast<int>(StatusCode::kPermissionDenied)) << outcome.message;
  EXPECT_NE(outcome.message.find(shards[1]), std::string::npos) << outcome.message;
  // Items of the open shard only: still refused, since galleyd would index
  // the closed shard on the user's behalf.
  spec.id_ranges = {{0, 3}};
  outcome = ReadEpochAs({}, spec);
  EXPECT_EQ(outcome.code, static_cast<int>(StatusCode::kPermissionDenied)) << outcome.message;
  // The open shard alone is served.
  spec.shards = {shards[0]};
  spec.id_ranges.clear();
  outcome = ReadEpochAs({}, spec);
  EXPECT_EQ(outcome.code, 0) << outcome.message;
}

TEST_F(AccessTest, UsersSeeAndCancelOnlyTheirOwnJobs) {
  Start();
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  auto root_job = client->OpenJob(Spec());
  ASSERT_TRUE(root_job.ok()) << root_job.status().ToString();
  const uint64_t root_job_id = root_job->info().job_id;

  const nlohmann::json theirs = QueryAsOther("jobs");
  ASSERT_TRUE(theirs.contains("jobs")) << theirs.dump();
  EXPECT_TRUE(theirs["jobs"].empty()) << theirs.dump();
  const nlohmann::json mine = Query("jobs");
  ASSERT_EQ(mine["jobs"].size(), 1u) << mine.dump();

  // The other user may not cancel root's job: it does not exist for them.
  Outcome outcome = RunAsOther({"cancel=" + std::to_string(root_job_id)});
  EXPECT_EQ(outcome.code, static_cast<int>(StatusCode::kNotFound)) << outcome.message;
  ASSERT_TRUE(root_job->Next(20s).ok());

  // Root cancels a job of the other user, which reads it until it ends and
  // reports why.
  ChildAs other(kOther, kOtherGroup, {}, OtherClient({Step("open", Spec()), "read_until_error"}));
  bool cancelled = false;
  // A bound on a missing job, not on a slow start: the child's job shows up
  // within a second on an idle machine.
  const auto deadline = std::chrono::steady_clock::now() + 2min;
  while (!cancelled && std::chrono::steady_clock::now() < deadline) {
    auto listed = client->Query("jobs");
    ASSERT_TRUE(listed.ok()) << listed.status().ToString();
    const nlohmann::json reply = nlohmann::json::parse(*listed);
    for (const auto& job : reply["jobs"]) {
      if (job.value("owner_uid", 0u) == kOther) {
        ASSERT_TRUE(client->Cancel(job.value("job_id", uint64_t{0})).ok());
        cancelled = true;
      }
    }
    if (!cancelled) std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(cancelled) << "the other user's job never showed up";
  outcome = other.Report();
  EXPECT_NE(outcome.message.find("cancelled by uid 0"), std::string::npos) << outcome.message;
}

TEST_F(AccessTest, UsersSeeOnlyTheDatasetsAndSamplersTheyMayRead) {
  fs::permissions(data_, fs::perms(0700));
  Start();
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  auto root_job = client->OpenJob(Spec());
  ASSERT_TRUE(root_job.ok()) << root_job.status().ToString();
  ASSERT_TRUE(root_job->Next(20s).ok());

  const nlohmann::json root_status = Query("status");
  EXPECT_TRUE(root_status.value("admin", false)) << root_status.dump();
  EXPECT_EQ(root_status.value("your_jobs", 0), 1) << root_status.dump();
  EXPECT_EQ(root_status["samplers"].size(), 1u) << root_status.dump();
  const nlohmann::json root_datasets = Query("datasets");
  EXPECT_EQ(root_datasets["datasets"].size(), 1u) << root_datasets.dump();
  EXPECT_EQ(root_datasets["samplers"].size(), 1u) << root_datasets.dump();

  // The other user learns that a job runs, not on what.
  const nlohmann::json status = QueryAsOther("status");
  EXPECT_FALSE(status.value("admin", true)) << status.dump();
  EXPECT_EQ(status.value("jobs", 0), 1) << status.dump();
  EXPECT_EQ(status.value("your_jobs", 1), 0) << status.dump();
  ASSERT_TRUE(status.contains("samplers")) << status.dump();
  EXPECT_TRUE(status["samplers"].empty()) << status.dump();
  const nlohmann::json datasets = QueryAsOther("datasets");
  ASSERT_TRUE(datasets.contains("datasets")) << datasets.dump();
  EXPECT_TRUE(datasets["datasets"].empty()) << datasets.dump();
  EXPECT_TRUE(datasets["samplers"].empty()) << datasets.dump();

  // Once they may read it, they see it.
  MakeReadableByAll(data_);
  const nlohmann::json readable = QueryAsOther("datasets");
  EXPECT_EQ(readable["datasets"].size(), 1u) << readable.dump();
  EXPECT_EQ(readable["samplers"].size(), 1u) << readable.dump();
  EXPECT_EQ(QueryAsOther("status")["samplers"].size(), 1u);
}

TEST_F(AccessTest, ANewOrRewrittenFileIsSeenByTheNextJobAndNeverServedStale) {
  const fs::path rewritten = data_ / "class0" / "000.jpg";
  WriteSolid(rewritten, 250, 0, 0);
  Start();
  JobSpec spec = Spec();
  spec.shuffle = false;
  spec.batch_size = 1;
  auto first_pixel = [&](const JobSpec& s, uint64_t* items) -> std::vector<uint8_t> {
    auto client = Client::Connect(options_);
    auto job = client->OpenJob(s);
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    if (!job.ok()) return {};
    *items = job->info().dataset_size;
    auto batch = job->Next(20s);
    EXPECT_TRUE(batch.ok());
    EXPECT_EQ(batch->dtype(), DType::kUInt8);
    const auto* pixels = static_cast<const uint8_t*>(batch->data());
    // The first pixel's channels: adjacent (HWC) or a plane apart (CHW).
    const size_t step = batch->layout() == Layout::kNHWC ? 1 : 8 * 8;
    return {pixels[0], pixels[step], pixels[2 * step]};
  };
  uint64_t items = 0;
  // Two passes so the red version is in every tier.
  ASSERT_TRUE(ReadEpoch(spec).ok());
  const auto red = first_pixel(spec, &items);
  EXPECT_EQ(items, 6u);
  ASSERT_EQ(red.size(), 3u);
  EXPECT_GT(red[0], 200);
  EXPECT_LT(red[2], 50);

  // Rewritten in place: the same inode, so no folder changes.
  RewriteSolid(rewritten, 0, 0, 250);
  const auto blue = first_pixel(spec, &items);
  EXPECT_EQ(items, 6u);
  ASSERT_EQ(blue.size(), 3u);
  EXPECT_LT(blue[0], 50);
  EXPECT_GT(blue[2], 200);
  auto listings = [&] {
    const nlohmann::json datasets = Query("datasets");
    return datasets["datasets"].size() == 1 ? datasets["datasets"][0].value("listings", 0) : -1;
  };
  EXPECT_EQ(listings(), 2);
  // A file added: the next job has it.
  WriteSolid(data_ / "class1" / "999.jpg", 0, 250, 0);
  (void)first_pixel(spec, &items);
  EXPECT_EQ(items, 7u);
  EXPECT_EQ(listings(), 3);
  // Nothing changed: no listing.
  (void)first_pixel(spec, &items);
  EXPECT_EQ(listings(), 3);
}

TEST_F(AccessTest, ForgetMakesTheNextJobListAgain) {
  Start();
  ASSERT_TRUE(ReadEpoch(Spec()).ok());
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(client->Forget(tmp_.path() / "elsewhere").code(), StatusCode::kNotFound);
  // Root, an admin, may forget any listing.
  ASSERT_TRUE(client->Forget(data_.string()).ok());
  EXPECT_TRUE(Query("datasets")["datasets"].empty());
  ASSERT_TRUE(ReadEpoch(Spec()).ok());
  EXPECT_EQ(Query("datasets")["datasets"].size(), 1u);
}

// A listing costs a walk of the whole dataset to make again: a user who may
// read the dataset but has no stake in it may not make galleyd walk it.
TEST_F(AccessTest, AReaderWithNoJobOnTheDatasetMayNotForgetIt) {
  const fs::path closed = tmp_.path() / "closed";
  testing::WriteJpegFolder(closed, 1, 2);
  fs::permissions(closed, fs::perms(0700));
  Start();
  ASSERT_TRUE(ReadEpoch(Spec()).ok());
  JobSpec closed_spec = Spec();
  closed_spec.dataset = closed.string();
  ASSERT_TRUE(ReadEpoch(closed_spec).ok());
  auto listing_of = [&](const fs::path& root) {
    const nlohmann::json datasets = Query("datasets");
    for (const auto& d : datasets["datasets"]) {
      if (d.value("root", "") == root.string()) return d;
    }
    return nlohmann::json();
  };
  const nlohmann::json before = listing_of(data_);
  ASSERT_EQ(before.value("listings", 0), 1) << before.dump();

  auto forget_as_other = [&](const fs::path& root) {
    return RunAsOther({"forget=" + root.string()});
  };
  const Outcome refused = forget_as_other(data_);
  EXPECT_EQ(refused.code, static_cast<int>(StatusCode::kPermissionDenied)) << refused.message;
  EXPECT_NE(
      refused.message.find("only root, galleyd's user, members of admin_group, the owner of " +
                           data_.string() + " and users with a job open on it"),
      std::string::npos)
      << refused.message;
  // A listing the user may not read stays unseen: not found, as if absent.
  const Outcome hidden = forget_as_other(closed);
  EXPECT_EQ(hidden.code, static_cast<int>(StatusCode::kNotFound)) << hidden.message;
  EXPECT_EQ(hidden.message.find("admin_group"), std::string::npos) << hidden.message;

  // Both listings stay, and the next job is served from the same one.
  EXPECT_EQ(listing_of(closed).value("listings", 0), 1);
  ASSERT_TRUE(ReadEpoch(Spec()).ok());
  const nlohmann::json after = listing_of(data_);
  EXPECT_EQ(after.value("listings", 0), 1) << after.dump();
  EXPECT_EQ(after.value("index", -1), before.value("index", -2)) << after.dump();
}

TEST_F(AccessTest, AUserWithAJobOpenOnTheDatasetMayForgetIt) {
  Start();
  ASSERT_TRUE(ReadEpoch(Spec()).ok());
  // The job stays open while the same user forgets the dataset.
  const Outcome outcome = RunAsOther({Step("open", Spec()), "forget=" + data_.string()});
  EXPECT_EQ(outcome.code, 0) << outcome.message;
  EXPECT_TRUE(Query("datasets")["datasets"].empty());
}

TEST_F(AccessTest, TheOwnerOfTheDatasetsRootMayForgetIt) {
  const fs::path theirs = tmp_.path() / "theirs";
  testing::WriteJpegFolder(theirs, 2, 2);
  MakeReadableByAll(theirs);
  for (const auto& entry : fs::recursive_directory_iterator(theirs)) {
    ASSERT_EQ(::chown(entry.path().c_str(), kOther, kOtherGroup), 0);
  }
  ASSERT_EQ(::chown(theirs.c_str(), kOther, kOtherGroup), 0);
  Start();
  JobSpec spec = Spec();
  spec.dataset = theirs.string();
  ASSERT_TRUE(ReadEpoch(spec).ok());  // root's job lists it
  const Outcome outcome = RunAsOther({"forget=" + theirs.string()});
  EXPECT_EQ(outcome.code, 0) << outcome.message;
  EXPECT_TRUE(Query("datasets")["datasets"].empty());
}

// The real galleyd: what is checked last is the process, which exits 0 once
// the drain ends (an in-process daemon only stops serving).
TEST_F(AccessTest, DrainRefusesNewJobsAndExitsWhenTheLastEnds) {
  StartProcess();
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  auto job = client->OpenJob(Spec());
  ASSERT_TRUE(job.ok());
  // Only an admin drains.
  const Outcome refused = RunAsOther({"drain"});
  EXPECT_EQ(refused.code, static_cast<int>(StatusCode::kPermissionDenied)) << refused.message;
  ASSERT_TRUE(client->Drain().ok());
  auto late = client->OpenJob(Spec());
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.status().message().find("draining"), std::string::npos);
  // The running job is still served.
  ASSERT_TRUE(job->Next(20s).ok());
  job->Close();
  // Watched without reaping it: the fixture reaps it.
  siginfo_t exited{};
  const auto give_up = std::chrono::steady_clock::now() + 60s;  // bounds a hang only
  while (std::chrono::steady_clock::now() < give_up) {
    exited.si_pid = 0;
    if (::waitid(P_PID, process_->pid(), &exited, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        exited.si_pid == process_->pid()) {
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(exited.si_pid, process_->pid()) << "galleyd still runs after the drain";
  EXPECT_EQ(exited.si_code, CLD_EXITED);
  EXPECT_EQ(exited.si_status, 0);
}

}  // namespace
}  // namespace galley
