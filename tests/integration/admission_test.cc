// Admission and fairness: every limit refuses with ResourceExhausted naming
// it, checks and counts never race, and one user cannot take every slot.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "galley/client.h"
#include "tests/integration/galleyd_process.h"
#include "wire/connection.h"

namespace galley {
namespace {

using namespace std::chrono_literals;
using testing::GalleydProcess;
using testing::TempDir;

class AdmissionTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> args) {
    data_ = tmp_.path() / "data";
    testing::WriteJpegFolder(data_, 2, 3);
    args.insert(args.end(), {"--allowed-root", tmp_.path().string()});
    daemon_ = std::make_unique<GalleydProcess>(tmp_.path() / "galleyd.sock", args);
    ASSERT_TRUE(daemon_->started()) << "galleyd did not start";
    options_.socket_path = daemon_->socket();
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

  TempDir tmp_;
  std::filesystem::path data_;
  std::unique_ptr<GalleydProcess> daemon_;
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
  // retried for a few seconds.
  std::vector<std::unique_ptr<wire::Connection>> idle;
  const std::string hello =
      R"({"protocol_version":)" + std::to_string(wire::kProtocolVersion) + R"(,"client":"idle"})";
  for (int i = 0; i < 2; ++i) {
    std::string last_reply;
    for (int attempt = 0; attempt < 50 && idle.size() == static_cast<size_t>(i); ++attempt) {
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
  for (int i = 0; i < 50 && !reconnected; ++i) {
    std::this_thread::sleep_for(100ms);
    reconnected = Client::Connect(options_).ok();
  }
  EXPECT_TRUE(reconnected) << "closing connections did not return the user's share";
}

}  // namespace
}  // namespace galley
