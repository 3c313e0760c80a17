// Admission and fairness, against a daemon built in the test's process:
// every limit refuses with ResourceExhausted naming it, checks and counts
// never race, and one user cannot take every slot. A second user is uid
// 65534 (those tests need root, as CI runs them): a galley_client_as
// program the test spawns, which drops to that uid and runs the client
// steps named on its command line, since a child is never forked beside a
// daemon in this process (other_user.h).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "galley/client.h"
#include "tests/integration/galleyd_process.h"
#include "tests/integration/in_process_daemon.h"
#include "tests/integration/other_user.h"
#include "wire/connection.h"
#include "wire/messages.h"
#include "wire/segment_layout.h"

namespace galley {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using testing::ChildAs;
using testing::kNobodyGid;
using testing::kNobodyUid;
using testing::Outcome;
using testing::TempDir;

class AdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = tmp_.path() / "data";
    testing::WriteJpegFolder(data_, 2, 3);
  }

  void Start(std::vector<std::string> flags) {
    flags.insert(flags.end(), {"--allowed-root", tmp_.path().string()});
    auto started =
        testing::StartDaemon(testing::DaemonCommandLine(tmp_.path() / "galleyd.sock", flags));
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    daemon_ = std::move(started).value();
    options_.socket_path = daemon_->options().socket_path;
    options_.request_timeout = 20s;
  }

  JobSpec Spec() const {
    JobSpec spec;
    spec.dataset = data_.string();
    spec.batch_size = 1;
    spec.prefetch = 1;
    spec.transform_json = R"({"ops":[{"op":"Resize","size":[8,8]}]})";
    return spec;
  }

  // Opens `count` jobs at once from as many threads; returns those opened
  // and the refusals.
  void OpenAtOnce(int count, std::vector<Job>* opened, std::vector<Status>* refused) {
    std::mutex mu;
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < count; ++i) {
      threads.emplace_back([&] {
        while (!go.load()) std::this_thread::yield();
        auto client = Client::Connect(options_);
        Result<Job> job = client.ok() ? client->OpenJob(Spec()) : Result<Job>(client.status());
        std::lock_guard lock(mu);
        if (job.ok()) {
          opened->push_back(std::move(job).value());
        } else {
          refused->push_back(job.status());
        }
      });
    }
    go = true;
    for (auto& t : threads) t.join();
  }

  nlohmann::json Query(const std::string& what) const {
    auto client = Client::Connect(options_);
    if (!client.ok()) return {};
    auto text = client->Query(what);
    return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
  }

  TempDir tmp_;
  fs::path data_;
  std::unique_ptr<Daemon> daemon_;
  ClientOptions options_;
};

TEST_F(AdmissionTest, SimultaneousOpensNeverExceedMaxJobs) {
  // One user may take every slot here: only max_jobs refuses.
  Start({"--max-jobs", "8", "--max-jobs-per-uid", "8", "--max-connections-per-uid", "200"});
  std::vector<Job> opened;
  std::vector<Status> refused;
  // Each opener holds two connections (its client's and the OpenJob
  // request's), and galleyd takes at most max_jobs + 16 = 24 at once: 11
  // openers stay within that, so only max_jobs can refuse them.
  OpenAtOnce(11, &opened, &refused);
  std::string why;
  for (const Status& s : refused) why += "\n  " + s.ToString();
  EXPECT_EQ(opened.size(), 8u) << "refusals:" << why;
  ASSERT_EQ(refused.size(), 3u);
  for (const Status& s : refused) {
    EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
    EXPECT_NE(s.message().find("the limit max_jobs (8)"), std::string::npos) << s.ToString();
  }
}

TEST_F(AdmissionTest, TheSamplersJobCapacityIsEnforcedAtAdmission) {
  // Above 64 jobs on one dataset and policy, the sampler once handed the
  // extra jobs empty epochs without an error.
  Start({"--max-jobs", "100", "--max-jobs-per-uid", "100"});
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  std::vector<Job> jobs;
  for (int i = 0; i < 64; ++i) {
    auto job = client->OpenJob(Spec());
    ASSERT_TRUE(job.ok()) << i << ": " << job.status().ToString();
    jobs.push_back(std::move(job).value());
  }
  auto extra = client->OpenJob(Spec());
  ASSERT_FALSE(extra.ok());
  EXPECT_EQ(extra.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(extra.status().message().find("64"), std::string::npos) << extra.status().ToString();
  // Another policy has a sampler of its own.
  JobSpec other = Spec();
  other.policy = "independent";
  auto separate = client->OpenJob(other);
  EXPECT_TRUE(separate.ok()) << separate.status().ToString();
  // Every admitted job gets its items.
  for (int i = 0; i < 64; i += 9) {
    auto batch = jobs[i].Next(20s);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    EXPECT_EQ(batch->size(), 1u);
  }
}

TEST_F(AdmissionTest, PerUidLimitsNameTheLimit) {
  Start({"--max-jobs-per-uid", "2", "--max-connections-per-uid", "4"});
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  auto a = client->OpenJob(Spec());
  auto b = client->OpenJob(Spec());
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = client->OpenJob(Spec());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("max_jobs_per_uid"), std::string::npos)
      << c.status().ToString();

  // Two job connections plus two idle ones fill the user's four.
  // Each completes the handshake, so the daemon has surely accepted and
  // counted it before the next connection is tried.
  // The refused job's connection stops counting once the daemon has read
  // its close, which can lag behind on a loaded machine (a sanitized build
  // running tests in parallel): a refusal of the first idle connection is
  // retried (for at most a minute, which bounds a hang only).
  std::vector<std::unique_ptr<wire::Connection>> idle;
  const std::string hello =
      R"({"protocol_version":)" + std::to_string(wire::kProtocolVersion) + R"(,"client":"idle"})";
  for (int i = 0; i < 2; ++i) {
    std::string last_reply;
    const auto give_up = std::chrono::steady_clock::now() + 60s;
    for (int attempt = 0;
         idle.size() == static_cast<size_t>(i) && std::chrono::steady_clock::now() < give_up;
         ++attempt) {
      if (attempt > 0) std::this_thread::sleep_for(100ms);
      auto fd = wire::Connection::ConnectUnix(options_.socket_path);
      ASSERT_TRUE(fd.ok());
      auto connection = std::make_unique<wire::Connection>(std::move(fd).value());
      ASSERT_TRUE(connection->SendFrame(wire::MessageType::kHello, 0, hello).ok());
      auto welcome = connection->ReadFrame(std::chrono::steady_clock::now() + 10s);
      ASSERT_TRUE(welcome.ok()) << welcome.status().ToString();
      if (welcome->header.type == wire::MessageType::kWelcome) {
        idle.push_back(std::move(connection));
      } else {
        last_reply = welcome->payload;
      }
    }
    ASSERT_EQ(idle.size(), static_cast<size_t>(i + 1)) << "idle connection refused: " << last_reply;
  }
  auto refused = Client::Connect(options_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("max_connections_per_uid"), std::string::npos)
      << refused.status().ToString();
  idle.clear();
  bool reconnected = false;
  const auto give_up = std::chrono::steady_clock::now() + 60s;  // bounds a hang only
  while (!reconnected && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(100ms);
    reconnected = Client::Connect(options_).ok();
  }
  EXPECT_TRUE(reconnected) << "closing connections did not return the user's share";
}

// ---- Each user's share, with a second user ------------------------------------

class AdmissionAcrossUsersTest : public AdmissionTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as a second user";
    AdmissionTest::SetUp();
    // The other user reaches the socket and reads the dataset.
    fs::permissions(tmp_.path(), fs::perms(0755));
    for (const auto& entry : fs::recursive_directory_iterator(data_)) {
      fs::permissions(entry.path(), fs::perms(entry.is_directory() ? 0755 : 0644));
    }
    fs::permissions(data_, fs::perms(0755));
  }

  // The daemon in this process, on a socket the other user reaches: the
  // other user's client is a spawned galley_client_as, never a fork of this
  // process (other_user.h).
  void Start(std::vector<std::string> flags) {
    flags.insert(flags.end(), {"--socket-mode", "0666"});
    AdmissionTest::Start(std::move(flags));
  }

  // The other user's client, running `steps` (other_user.h).
  testing::ClientSteps Other(std::vector<std::string> steps) const {
    return {GALLEY_CLIENT_AS_PATH, options_.socket_path, std::move(steps)};
  }
  static std::string Open(const JobSpec& spec) {
    return "open=" + wire::JobSpecToJson(spec).dump();
  }

  JobSpec Spec() const {
    JobSpec spec = AdmissionTest::Spec();
    spec.batch_size = 2;
    spec.epochs = 1;
    return spec;
  }

  // Items `spec`'s job delivers from its open to its end (an error ends the
  // count early, which the caller's expected count then shows).
  uint64_t ItemsToTheEnd(const JobSpec& spec) const {
    auto client = Client::Connect(options_);
    auto job = client.ok() ? client->OpenJob(spec) : Result<Job>(client.status());
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    uint64_t items = 0;
    if (!job.ok()) return items;
    for (auto batch = job->Next(30s); batch.ok(); batch = job->Next(30s)) items += batch->size();
    return items;
  }
};

TEST_F(AdmissionAcrossUsersTest, AUserAtItsJobShareIsRefusedWhileAnotherUsersJobIsServed) {
  Start({"--max-jobs", "4"});  // a share of 2 jobs per user, derived
  EXPECT_EQ(Query("status")["limits"]["max_jobs_per_uid"], 2);
  // The other user opens two endless jobs and holds them; its third open
  // is refused.
  JobSpec endless = Spec();
  endless.epochs = 0;
  ChildAs other(kNobodyUid, kNobodyGid, {}, Other({Open(endless), Open(endless), Open(endless)}));
  const Outcome refused = other.Report();
  EXPECT_EQ(refused.code, static_cast<int>(StatusCode::kResourceExhausted)) << refused.message;
  EXPECT_NE(refused.message.find("\nstep 3: "), std::string::npos) << refused.message;
  EXPECT_NE(refused.message.find("uid 65534 already has 2 jobs, the limit max_jobs_per_uid (2)"),
            std::string::npos)
      << refused.message;
  // The other user holds its share; root's job is served in full.
  EXPECT_EQ(Query("status")["jobs"], 2);
  EXPECT_EQ(ItemsToTheEnd(Spec()), 6u);
  other.Release();
}

TEST_F(AdmissionAcrossUsersTest, AUserAtItsMemoryShareIsRefusedWhileAnotherUsersJobIsServed) {
  // Each job's ring: 2 slots (prefetch 1) of one 8x8 RGB sample.
  auto geometry = wire::ComputeGeometry(2, 1, 3 * 8 * 8);
  ASSERT_TRUE(geometry.ok());
  const uint64_t ring = geometry->segment_bytes;
  // Five rings in all, so two and a half per user: the third is refused.
  Start({"--max-shm-total", std::to_string(5 * ring)});
  EXPECT_EQ(Query("status")["limits"]["max_shm_per_uid"], 5 * ring / 2);
  JobSpec spec = Spec();
  spec.batch_size = 1;
  // The other user's two jobs have one ring each; its third is refused.
  JobSpec endless = spec;
  endless.epochs = 0;
  ChildAs other(kNobodyUid, kNobodyGid, {}, Other({Open(endless), Open(endless), Open(endless)}));
  const Outcome refused = other.Report();
  EXPECT_EQ(refused.code, static_cast<int>(StatusCode::kResourceExhausted)) << refused.message;
  const std::string opened = "opened: segment_bytes " + std::to_string(ring) + "\n";
  EXPECT_EQ(refused.message.rfind(opened + opened + "step 3: ", 0), 0u) << refused.message;
  EXPECT_NE(refused.message.find("uid 65534 would hold " + std::to_string(3 * ring) +
                                 " bytes of shared memory, over the limit max_shm_per_uid"),
            std::string::npos)
      << refused.message;
  EXPECT_EQ(Query("status")["shm_bytes"], 2 * ring);
  EXPECT_EQ(ItemsToTheEnd(spec), 6u);
  other.Release();
}

}  // namespace
}  // namespace galley
