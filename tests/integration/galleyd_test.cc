// Integration tests: galleyd's daemon, real JPEG files, the real C++
// client, and raw sockets for misbehaving peers. The daemon is built in the
// test's process (in_process_daemon.h); tests of the process itself (a kill,
// SIGTERM and a restart, SIGSTOP, how a service start measures the node) and
// tests that fork a client run the real galleyd (GalleydProcessTest).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "galley/client.h"
#include "tests/integration/galleyd_process.h"
#include "tests/integration/in_process_daemon.h"
#include "wire/connection.h"
#include "wire/messages.h"

namespace galley {
namespace {

using namespace std::chrono_literals;
using testing::GalleydProcess;
using testing::InProcessGalleyd;
using testing::TempDir;

constexpr const char* kSmallTransform = R"({"ops":[{"op":"Resize","size":[32,32]}]})";

class GalleydTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = tmp_.path() / "data";
    files_ = testing::WriteJpegFolder(data_, 3, 10);
    StartDaemon();
  }
  virtual void StartDaemon() {
    daemon_ = std::make_unique<InProcessGalleyd>(tmp_.path() / "galleyd.sock", ExtraArgs());
    ASSERT_TRUE(daemon_->started()) << daemon_->start_status().ToString();
    options_.socket_path = daemon_->socket();
    options_.request_timeout = 5s;
  }
  virtual std::vector<std::string> ExtraArgs() { return {"--allowed-root", tmp_.path().string()}; }

  JobSpec Spec(uint32_t batch_size = 8) const {
    JobSpec spec;
    spec.dataset = data_.string();
    spec.batch_size = batch_size;
    spec.transform_json = kSmallTransform;
    spec.seed = 7;
    return spec;
  }

  nlohmann::json Query(const std::string& what) {
    auto client = Client::Connect(options_);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    auto text = client->Query(what);
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    return nlohmann::json::parse(*text);
  }

  // Waits until the daemon reports `jobs` open jobs (it learns of a dead
  // client asynchronously).
  bool WaitForJobs(size_t jobs) {
    const auto give_up = std::chrono::steady_clock::now() + 60s;  // bounds a hang only
    while (std::chrono::steady_clock::now() < give_up) {
      if (Query("status")["jobs"].get<size_t>() == jobs) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

  TempDir tmp_;
  std::filesystem::path data_;
  std::vector<std::filesystem::path> files_;
  std::unique_ptr<InProcessGalleyd> daemon_;
  std::unique_ptr<GalleydProcess> process_;  // GalleydProcessTest's
  ClientOptions options_;
};

// The same with the real galleyd, for tests of the process (what its
// clients see when it is killed, stopped or restarted) and for tests that
// fork a client: a child forked while the daemon's threads run in this
// process may inherit a lock one of them held, held for ever in the child.
class GalleydProcessTest : public GalleydTest {
 protected:
  void StartDaemon() override {
    process_ = std::make_unique<GalleydProcess>(tmp_.path() / "galleyd.sock", ExtraArgs());
    ASSERT_TRUE(process_->started()) << "galleyd did not start";
    options_.socket_path = process_->socket();
    options_.request_timeout = 5s;
  }
};

TEST_F(GalleydTest, ServesEveryItemOncePerEpochWithImageFolderLabels) {
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  JobSpec spec = Spec(8);
  spec.epochs = 2;
  auto job = client->OpenJob(spec);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->info().epoch_size, 30u);
  EXPECT_EQ(job->info().batches_per_epoch, 4u);
  EXPECT_EQ(job->info().classes, (std::vector<std::string>{"class0", "class1", "class2"}));
  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    std::multiset<uint64_t> seen;
    bool last = false;
    uint64_t batches = 0;
    while (!last) {
      auto batch = job->Next(10s);
      ASSERT_TRUE(batch.ok()) << batch.status().ToString();
      EXPECT_EQ(batch->epoch(), epoch);
      EXPECT_EQ(batch->batch_index(), batches++);
      EXPECT_EQ(batch->shape(), (std::vector<int64_t>{batch->size(), 3, 32, 32}));
      for (size_t i = 0; i < batch->size(); ++i) {
        seen.insert(batch->item_ids()[i]);
        EXPECT_EQ(batch->labels()[i], static_cast<int64_t>(batch->item_ids()[i] / 10));
      }
      last = batch->last_in_epoch();
    }
    EXPECT_EQ(batches, 4u);
    EXPECT_EQ(seen.size(), 30u);
    EXPECT_EQ(std::set<uint64_t>(seen.begin(), seen.end()).size(), 30u);
  }
  auto after = job->Next(5s);
  EXPECT_EQ(after.status().code(), StatusCode::kEndOfStream);
}

TEST_F(GalleydTest, RefusesBadJobsWithClearErrors) {
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  JobSpec missing = Spec();
  missing.dataset = (tmp_.path() / "nope").string();
  EXPECT_EQ(client->OpenJob(missing).status().code(), StatusCode::kNotFound);

  JobSpec outside = Spec();
  outside.dataset = "/usr/share";
  EXPECT_EQ(client->OpenJob(outside).status().code(), StatusCode::kPermissionDenied);

  JobSpec bad_transform = Spec();
  bad_transform.transform_json = R"({"ops":[{"op":"Spin","degrees":3}]})";
  auto status = client->OpenJob(bad_transform).status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("Spin"), std::string::npos) << status.message();

  JobSpec huge = Spec();
  huge.batch_size = 60000;
  huge.prefetch = 64;
  EXPECT_EQ(client->OpenJob(huge).status().code(), StatusCode::kResourceExhausted);

  JobSpec bad_class = Spec();
  bad_class.classes = {"zebra"};
  EXPECT_EQ(client->OpenJob(bad_class).status().code(), StatusCode::kInvalidArgument);

  EXPECT_EQ(Query("status")["jobs"], 0);
}

// Sends raw bytes on a fresh connection and returns what came back before
// the daemon closed it.
std::vector<wire::Frame> SendRaw(const std::string& socket, const std::string& bytes,
                                 bool read_replies = true) {
  auto fd = wire::Connection::ConnectUnix(socket);
  EXPECT_TRUE(fd.ok());
  wire::Connection connection(std::move(fd).value());
  (void)!::send(connection.fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
  std::vector<wire::Frame> frames;
  while (read_replies) {
    auto frame = connection.ReadFrame(std::chrono::steady_clock::now() + 10s);
    if (!frame.ok()) break;
    frames.push_back(std::move(frame).value());
  }
  return frames;
}

std::string Header(uint16_t type, uint32_t length, uint32_t magic = wire::kFrameMagic,
                   uint16_t version = wire::kProtocolVersion) {
  wire::FrameHeader h;
  h.magic = magic;
  h.version = version;
  h.type = static_cast<wire::MessageType>(type);
  h.payload_length = length;
  auto bytes = wire::EncodeFrameHeader(h);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

TEST_F(GalleydTest, MalformedFramesGetAnErrorAndTheDaemonCarriesOn) {
  const std::string hello_body = R"({"protocol_version":1,"client":"raw"})";
  const std::string hello = Header(1, hello_body.size()) + hello_body;
  const std::vector<std::string> attacks = {
      std::string(16, '\xff'),                    // garbage header
      Header(1, 2, 0xdeadbeef) + "{}",            // wrong magic
      Header(1, 2, wire::kFrameMagic, 9) + "{}",  // future version
      Header(999, 0),                             // unknown type
      Header(1, wire::kMaxPayloadBytes + 1),      // oversized
      Header(1, 5) + "[1,2]",                     // body not an object
      hello + Header(static_cast<uint16_t>(wire::MessageType::kSlotReleased), 0),  // no job yet
      hello + Header(4, 9) + "not json!",  // OpenJob with bad JSON
      hello + Header(4, 2) + "{}",         // OpenJob without fields
  };
  for (const auto& attack : attacks) {
    auto frames = SendRaw(daemon_->socket(), attack);
    ASSERT_FALSE(frames.empty()) << "no reply to attack of " << attack.size() << " bytes";
    EXPECT_EQ(frames.back().header.type, wire::MessageType::kError);
  }
  // Truncated frames and abrupt closes get no answer but must not hurt.
  SendRaw(daemon_->socket(), Header(1, 100) + "{\"a\":", /*read_replies=*/false);
  SendRaw(daemon_->socket(), "GL", /*read_replies=*/false);
  EXPECT_GE(Query("status")["protocol_errors"].get<int>(), 5);

  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  auto job = client->OpenJob(Spec());
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_TRUE(job->Next(10s).ok());
}

TEST_F(GalleydTest, AClientOfThePreviousProtocolGetsTheVersionErrorNotAJob) {
  // Clients of the previous protocol (2 expected an eventfd in JobOpened)
  // get an Error framed in this daemon's protocol, which such a client
  // reports as a version mismatch naming both versions.
  const uint16_t previous = wire::kProtocolVersion - 1;
  const std::string body =
      R"({"protocol_version":)" + std::to_string(previous) + R"(,"client":"old"})";
  auto frames =
      SendRaw(daemon_->socket(), Header(1, body.size(), wire::kFrameMagic, previous) + body);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].header.type, wire::MessageType::kError);
  EXPECT_EQ(frames[0].header.version, wire::kProtocolVersion);
  auto error = wire::ParseObject(frames[0].payload);
  ASSERT_TRUE(error.ok());
  const Status refused = wire::StatusFromErrorJson(*error);
  for (uint16_t version : {previous, wire::kProtocolVersion}) {
    EXPECT_NE(refused.message().find("protocol " + std::to_string(version)), std::string::npos)
        << refused.ToString();
  }
}

TEST_F(GalleydProcessTest, AKilledClientsJobIsRemovedAndOthersContinue) {
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  auto survivor = client->OpenJob(Spec(4));
  ASSERT_TRUE(survivor.ok());

  pid_t child = ::fork();
  if (child == 0) {
    auto c = Client::Connect(options_);
    if (!c.ok()) ::_exit(2);
    auto job = c->OpenJob(Spec(4));
    if (!job.ok()) ::_exit(3);
    auto batch = job->Next(10s);  // hold a slot, then die without cleanup
    ::kill(::getpid(), SIGKILL);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child failed before it was killed: " << WEXITSTATUS(status);
  ASSERT_TRUE(WaitForJobs(1)) << "the dead client's job was not removed";
  auto state = Query("status");
  EXPECT_EQ(state["shm_bytes"].get<uint64_t>(), survivor->info().segment_bytes);

  for (int i = 0; i < 20; ++i) {
    auto batch = survivor->Next(10s);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  }
}

TEST_F(GalleydProcessTest, ClientsLearnQuicklyThatTheDaemonDied) {
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  JobSpec spec = Spec(4);
  spec.prefetch = 1;
  auto job = client->OpenJob(spec);
  ASSERT_TRUE(job.ok());
  {
    auto batch = job->Next(10s);
    ASSERT_TRUE(batch.ok());
  }
  process_->Stop(SIGKILL);
  // The closed connection says so at once: a client that had to wait for
  // its timeout would get DeadlineExceeded instead.
  Status status = Status::Ok();
  for (int i = 0; i < 100 && status.ok(); ++i) status = job->Next(30s).status();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
}

TEST_F(GalleydProcessTest, SigtermEndsJobsWithAClearErrorAndARestartServesAgain) {
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  auto job = client->OpenJob(Spec(4));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(process_->Stop(SIGTERM), 0);
  Status status = Status::Ok();
  for (int i = 0; i < 100 && status.ok(); ++i) status = job->Next(10s).status();
  EXPECT_TRUE(status.code() == StatusCode::kCancelled || status.code() == StatusCode::kUnavailable)
      << status.ToString();

  process_ = std::make_unique<GalleydProcess>(tmp_.path() / "galleyd.sock", ExtraArgs());
  ASSERT_TRUE(process_->started());
  auto again = Client::Connect(options_);
  ASSERT_TRUE(again.ok());
  auto job2 = again->OpenJob(Spec(4));
  ASSERT_TRUE(job2.ok());
  EXPECT_TRUE(job2->Next(10s).ok());
}

// The tests' galleyd is given the node probe's figures and commits its
// cache's memory on first use; a node's service measures the node and
// commits the memory ahead of the first job. The planner says which it got.
TEST_F(GalleydProcessTest, GivenNodeRatesSkipTheProbeWhileAServiceStartMeasuresAndPrefaults) {
  const nlohmann::json given = Query("plan");
  EXPECT_EQ(given["probe_seconds"], 0) << given.dump();
  for (const char* input :
       {"decode_augment_per_core_per_s", "augment_per_core_per_s", "memory_bytes_per_s"}) {
    EXPECT_EQ(given["inputs"][input]["source"], "override") << input << ": " << given.dump();
  }
  // No prefault thread runs, so nothing commits memory before a job.
  EXPECT_EQ(Query("cache")["decoded_arena"]["populated_bytes"], 0);

  ASSERT_EQ(process_->Stop(SIGTERM), 0);
  GalleydProcess::Launch service;
  service.probe_and_prefault = true;
  process_ = std::make_unique<GalleydProcess>(tmp_.path() / "galleyd.sock", ExtraArgs(), service);
  ASSERT_TRUE(process_->started());
  const nlohmann::json measured = Query("plan");
  EXPECT_GT(measured["probe_seconds"].get<double>(), 0) << measured.dump();
  for (const char* input :
       {"decode_augment_per_core_per_s", "augment_per_core_per_s", "memory_bytes_per_s"}) {
    EXPECT_EQ(measured["inputs"][input]["source"], "measured") << input;
    EXPECT_GT(measured["inputs"][input]["value"].get<double>(), 0) << input;
  }
  // The prefault runs at idle priority: its first step comes when a core is
  // free, which the deadline only bounds.
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  uint64_t populated = 0;
  while (populated == 0 && std::chrono::steady_clock::now() < deadline) {
    populated = Query("cache")["decoded_arena"]["populated_bytes"].get<uint64_t>();
    if (populated == 0) std::this_thread::sleep_for(20ms);
  }
  EXPECT_GT(populated, 0u) << "no memory committed ahead of the first job";
}

TEST_F(GalleydTest, ASecondDaemonOnTheSameSocketRefusesToStart) {
  const int code = testing::RunGalleydToExit(
      {"--socket", daemon_->socket(), "--allowed-root", tmp_.path().string()});
  EXPECT_EQ(code, 1);
  EXPECT_TRUE(Client::Connect(options_).ok());
}

TEST_F(GalleydTest, CorruptEmptyAndTruncatedFilesAreSkippedAndCounted) {
  { std::ofstream(data_ / "class0" / "900.jpg", std::ios::binary) << "this is not a jpeg"; }
  { std::ofstream(data_ / "class1" / "901.jpg", std::ios::binary); }
  {
    std::ifstream in(files_[0], std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(data_ / "class2" / "902.jpg", std::ios::binary)
        << bytes.substr(0, bytes.size() / 2);
  }
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  auto job = client->OpenJob(Spec(8));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->info().epoch_size, 33u);
  EXPECT_EQ(job->info().batches_per_epoch, 5u);
  uint64_t samples = 0, skipped = 0, batches = 0;
  std::set<uint64_t> distinct;
  bool last = false;
  std::string first_error;
  while (!last) {
    auto batch = job->Next(10s);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    // Failed samples are replaced by substitutes: every batch but the last is full.
    if (!batch->last_in_epoch()) {
      EXPECT_EQ(batch->size(), 8u);
    }
    ++batches;
    samples += batch->size();
    skipped += batch->skipped();
    for (uint64_t id : batch->item_ids()) distinct.insert(id);
    if (batch->skipped() && first_error.empty()) first_error = batch->first_error();
    last = batch->last_in_epoch();
  }
  EXPECT_EQ(batches, 5u);
  EXPECT_EQ(samples, 33u);
  EXPECT_EQ(distinct.size(), 30u);  // the good files, each once; 3 substitutes repeat some
  EXPECT_EQ(skipped, 3u);
  EXPECT_NE(first_error.find(".jpg"), std::string::npos) << first_error;
}

TEST_F(GalleydTest, SeekRestartsAtTheRequestedEpoch) {
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  auto job = client->OpenJob(Spec(8));
  ASSERT_TRUE(job.ok());
  {
    auto first = job->Next(10s);
    ASSERT_TRUE(first.ok());
    EXPECT_EQ(first->epoch(), 0u);
  }
  ASSERT_TRUE(job->SeekEpoch(5).ok());
  std::set<uint64_t> seen;
  bool last = false;
  while (!last) {
    auto batch = job->Next(10s);
    ASSERT_TRUE(batch.ok());
    EXPECT_EQ(batch->epoch(), 5u);
    for (auto id : batch->item_ids()) EXPECT_TRUE(seen.insert(id).second);
    last = batch->last_in_epoch();
  }
  EXPECT_EQ(seen.size(), 30u);
}

// Whether thread `tid` of this process sleeps in poll(2) (x86-64's poll or
// ppoll); elsewhere, whether it is in a system call at all.
bool InPoll(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/syscall");
  std::string call;
  in >> call;
#if defined(__x86_64__)
  return call == "7" || call == "271";
#else
  return !call.empty() && call != "running";
#endif
}

TEST_F(GalleydProcessTest, CloseFromAnotherThreadEndsAWaitingNext) {
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  auto job = client->OpenJob(Spec(8));
  ASSERT_TRUE(job.ok());
  // A stopped daemon sends nothing: Next() waits until the job is closed.
  ASSERT_EQ(::kill(process_->pid(), SIGSTOP), 0);
  std::atomic<pid_t> consumer_tid{0};
  std::atomic<bool> returned{false};
  Status waited;
  std::thread consumer([&] {
    consumer_tid = ::gettid();
    waited = job->Next(60s).status();
    returned = true;
  });
  while (!returned && (consumer_tid == 0 || !InPoll(consumer_tid))) std::this_thread::yield();
  EXPECT_FALSE(returned) << "Next() returned before Close: " << waited.ToString();
  job->Close();
  consumer.join();
  ::kill(process_->pid(), SIGCONT);
  EXPECT_EQ(waited.code(), StatusCode::kCancelled) << waited.ToString();
  EXPECT_EQ(job->Next(1s).status().code(), StatusCode::kCancelled);
  EXPECT_EQ(job->info().batches_per_epoch, 4u);  // the channel outlives Close
  EXPECT_TRUE(WaitForJobs(0));
}

}  // namespace
}  // namespace galley

namespace galley {
namespace {

using testing::FreePort;
using testing::HttpGet;

class GalleydMetricsTest : public GalleydTest {
 protected:
  std::vector<std::string> ExtraArgs() override {
    port_ = FreePort();
    return {"--allowed-root", tmp_.path().string(), "--metrics-port", std::to_string(port_)};
  }
  uint16_t port_ = 0;
};

TEST_F(GalleydMetricsTest, ServesPrometheusTextOnLoopback) {
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  auto job = client->OpenJob(Spec(4));
  ASSERT_TRUE(job.ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(job->Next(10s).ok());
  const std::string metrics = HttpGet(port_, "/metrics");
  EXPECT_NE(metrics.find("200 OK"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("galley_jobs 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("galley_job_samples_total{job=\""), std::string::npos);
  EXPECT_NE(metrics.find("galley_sampler_loads_per_request{dataset="), std::string::npos);
  EXPECT_NE(metrics.find("galley_cache_hits_total{tier=\"decoded\"}"), std::string::npos);
  EXPECT_NE(HttpGet(port_, "/other").find("404"), std::string::npos);
}

// metrics_address: the admin opens the endpoint beyond loopback.
class GalleydMetricsAddressTest : public GalleydTest {
 protected:
  std::vector<std::string> ExtraArgs() override {
    port_ = FreePort();
    return {"--allowed-root", tmp_.path().string(), "--metrics-address",
            "0.0.0.0:" + std::to_string(port_)};
  }
  uint16_t port_ = 0;
};

TEST_F(GalleydMetricsAddressTest, ServesOnEveryInterfaceWhenAskedAndStopsCleanly) {
  const std::string metrics = HttpGet(port_, "/metrics");
  EXPECT_NE(metrics.find("200 OK"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("galley_jobs 0"), std::string::npos) << metrics;
  // Bound to every interface, galleyd still wakes its own accept to stop.
  EXPECT_TRUE(daemon_->Stop()) << "the daemon did not stop";
}

TEST_F(GalleydMetricsTest, ASlowSenderCannotHoldTheEndpoint) {
  // A peer that trickles its request one byte per 500 ms once held /metrics
  // for as long as it liked (the limit was per byte, not per request).
  int slow = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port_);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(slow, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  std::atomic<bool> done{false}, trickle_over{false};
  std::atomic<int> trickled{0};
  std::thread trickle([&] {
    const std::string request = "GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Pad: ";
    for (size_t i = 0; !done && i < 40; ++i) {
      (void)!::send(slow, &request[i % request.size()], 1, MSG_NOSIGNAL);
      ++trickled;
      std::this_thread::sleep_for(500ms);
    }
    trickle_over = true;
  });
  // The slow peer is connected (first in galleyd's accept queue) and has
  // begun its request before the scrape connects.
  while (trickled.load() == 0) std::this_thread::yield();
  std::string metrics;
  std::thread scrape([&] { metrics = HttpGet(port_, "/metrics"); });
  scrape.join();  // returns once the slow peer is dropped (2 s for the whole head)
  EXPECT_FALSE(trickle_over) << "the scrape waited for the slow peer to give up";
  done = true;
  trickle.join();
  ::close(slow);
  EXPECT_NE(metrics.find("200 OK"), std::string::npos) << metrics;
}

}  // namespace
}  // namespace galley

namespace galley {
namespace {

class GalleydDatasetPolicyTest : public GalleydTest {
 protected:
  std::vector<std::string> ExtraArgs() override {
    return {"--allowed-root", tmp_.path().string(), "--dataset-policy",
            (tmp_.path() / "data").string() + "=independent"};
  }
};

TEST_F(GalleydDatasetPolicyTest, ADatasetsConfiguredPolicyAppliesToJobsThatNameNone) {
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  auto configured = client->OpenJob(Spec());
  ASSERT_TRUE(configured.ok()) << configured.status().ToString();
  JobSpec own = Spec();
  own.policy = "lockstep";
  auto named = client->OpenJob(own);
  ASSERT_TRUE(named.ok());
  const auto jobs = Query("jobs");
  std::map<uint64_t, std::string> policies;
  for (const auto& job : jobs["jobs"]) {
    policies[job["job_id"].get<uint64_t>()] = job["policy"].get<std::string>();
  }
  EXPECT_EQ(policies[configured->info().job_id], "independent");
  EXPECT_EQ(policies[named->info().job_id], "lockstep");
  EXPECT_EQ(testing::RunGalleydToExit({"--socket", (tmp_.path() / "x.sock").string(),
                                       "--dataset-policy", "/data=shuffle"}),
            2);
}

}  // namespace
}  // namespace galley
