// What one local user can take from the node's daemon, run by root: its
// file descriptors (shard sets kept open, and what happens when none is
// left), its memory through frames that cost far more parsed than sent, its
// metrics endpoint (clients that connect and stall), and labels a shard
// makes up. A second user is uid 65534 in a forked
// child. (Each user's share of the job slots and ring memory is
// admission_test.cc's.)
//
// Every figure is read from galleyd (/proc/<pid>/fd, /proc/<pid>/status,
// its status query and /metrics); nothing is inferred from time. A test
// that reads or sets the process's own figures (its descriptors, their
// limit, its resident memory) runs the real galleyd (StartProcess); the
// others a daemon in the test's process.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
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
#include "tests/sanitizers.h"
#include "wire/connection.h"
#include "wire/messages.h"

namespace galley {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using testing::ChildAs;
using testing::ConnectLoopback;
using testing::FreePort;
using testing::HttpGet;
using testing::kNobodyGid;
using testing::kNobodyUid;
using testing::Outcome;

// ---- Reading galleyd from the outside ------------------------------------

// Open descriptors of `pid`.
int DescriptorCount(pid_t pid) {
  int count = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    ++count;
  }
  return count;
}

// A "Vm...:" line of /proc/<pid>/status, in bytes.
uint64_t StatusBytes(pid_t pid, const std::string& field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) * 1024;
  }
  return 0;
}

// Resident memory of `pid` as its page tables say now (smaps_rollup:
// VmRSS is kept per thread and may lag behind by a few MiB).
uint64_t ResidentBytes(pid_t pid) {
  std::ifstream rollup("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string line;
  while (std::getline(rollup, line)) {
    if (line.rfind("Rss:", 0) == 0) return std::stoull(line.substr(4)) * 1024;
  }
  return StatusBytes(pid, "VmRSS");
}

// Sets VmHWM back to the current resident size (Linux 4.0+).
bool ResetPeakMemory(pid_t pid) {
  std::ofstream clear("/proc/" + std::to_string(pid) + "/clear_refs");
  clear << "5";
  return static_cast<bool>(clear.flush());
}

rlimit DescriptorLimit(pid_t pid) {
  rlimit limit{};
  ::prlimit(pid, RLIMIT_NOFILE, nullptr, &limit);
  return limit;
}

// The lowest descriptor number `pid` has free: what its next open gets.
rlim_t LowestFreeDescriptor(pid_t pid) {
  std::vector<rlim_t> used;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    used.push_back(std::stoull(it->path().filename().string()));
  }
  std::sort(used.begin(), used.end());
  rlim_t free = 0;
  for (rlim_t fd : used) {
    if (fd != free) break;
    ++free;
  }
  return free;
}

bool SetDescriptorLimit(pid_t pid, rlim_t soft) {
  rlimit limit = DescriptorLimit(pid);
  limit.rlim_cur = soft;
  return ::prlimit(pid, RLIMIT_NOFILE, &limit, nullptr) == 0;
}

// The value of an unlabelled sample in Prometheus text; -1 when absent.
double MetricValue(const std::string& text, const std::string& name) {
  const std::string key = "\n" + name + " ";
  const size_t at = text.find(key);
  return at == std::string::npos ? -1 : std::stod(text.substr(at + key.size()));
}

// ---- Data ------------------------------------------------------------------

std::string JpegBytes(int seed) {
  cv::Mat image(16, 16, CV_8UC3, cv::Scalar(seed * 7 % 256, seed * 13 % 256, 90));
  std::vector<uchar> bytes;
  cv::imencode(".jpg", image, bytes);
  return std::string(bytes.begin(), bytes.end());
}

void PutOctal(std::string& block, size_t at, size_t width, uint64_t value) {
  std::string text(width - 1, '0');
  for (size_t i = width - 1; i-- > 0 && value > 0; value >>= 3) text[i] = char('0' + (value & 7));
  std::memcpy(block.data() + at, text.data(), text.size());
}

// A POSIX ustar archive of regular members, readable by every user.
void WriteTar(const fs::path& path,
              const std::vector<std::pair<std::string, std::string>>& members) {
  std::string archive;
  for (const auto& [name, payload] : members) {
    std::string header(512, '\0');
    std::memcpy(header.data(), name.data(), std::min<size_t>(name.size(), 99));
    PutOctal(header, 100, 8, 0644);
    PutOctal(header, 108, 8, 0);
    PutOctal(header, 116, 8, 0);
    PutOctal(header, 124, 12, payload.size());
    PutOctal(header, 136, 12, 0);
    header[156] = '0';
    std::memcpy(header.data() + 257,
                "ustar\0"
                "00",
                8);
    std::memset(header.data() + 148, ' ', 8);
    uint64_t sum = 0;
    for (unsigned char c : header) sum += c;
    PutOctal(header, 148, 7, sum);
    archive += header + payload;
    archive.resize((archive.size() + 511) / 512 * 512, '\0');
  }
  archive.resize(archive.size() + 1024, '\0');
  std::ofstream(path, std::ios::binary).write(archive.data(), std::streamsize(archive.size()));
  fs::permissions(path, fs::perms(0644));
}

// What one epoch of a job delivered.
struct Epoch {
  uint64_t items = 0;
  uint64_t skipped = 0;
  std::string first_error;
  std::vector<int64_t> labels;
};

class NodeLimitsTest : public testing::TwoUserDaemonTest {
 protected:
  // The shared spec, for one epoch.
  JobSpec Spec() const {
    JobSpec spec = TwoUserDaemonTest::Spec();
    spec.epochs = 1;
    return spec;
  }

  // One epoch of `spec`, read whole.
  Result<Epoch> ReadEpoch(const JobSpec& spec) const {
    GALLEY_ASSIGN_OR_RETURN(auto client, Client::Connect(options_));
    GALLEY_ASSIGN_OR_RETURN(auto job, client.OpenJob(spec));
    Epoch epoch;
    while (true) {
      GALLEY_ASSIGN_OR_RETURN(auto batch, job.Next(30s));
      epoch.items += batch.size();
      epoch.skipped += batch.skipped();
      if (epoch.first_error.empty()) epoch.first_error = batch.first_error();
      for (int64_t label : batch.labels()) epoch.labels.push_back(label);
      if (batch.last_in_epoch()) return epoch;
    }
  }

  nlohmann::json Query(const std::string& what) const {
    auto client = Client::Connect(options_);
    if (!client.ok()) return {};
    auto text = client->Query(what);
    return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
  }

  // Polls the status query until `done` holds for it, for at most a minute
  // (a bound on a hang, not a measurement).
  bool StatusUntil(const std::function<bool(const nlohmann::json&)>& done) const {
    for (int i = 0; i < 600; ++i) {
      if (done(Query("status"))) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }

  // galleyd's descriptor count once it is at most `target` (connections
  // just closed are closed by galleyd's threads a moment later), or as it
  // is after a minute.
  int SettledDescriptorCount(int target) const {
    int count = DescriptorCount(process_->pid());
    for (int i = 0; i < 600 && count > target; ++i) {
      std::this_thread::sleep_for(100ms);
      count = DescriptorCount(process_->pid());
    }
    return count;
  }
};

// ---- Shard descriptors -------------------------------------------------------

TEST_F(NodeLimitsTest, ThreeHundredShardSetsOpenedAndClosedKeepDescriptorsBounded) {
  // 300 sets of 4 shards of 2 samples: kept open after their jobs, they
  // would hold 1,200 descriptors, far past the 256 galleyd is given here.
  constexpr int kSets = 300, kShards = 4, kSamples = 2;
  const fs::path root = tmp_.path() / "sets";
  std::vector<std::vector<std::string>> sets;
  for (int set = 0; set < kSets; ++set) {
    const fs::path folder = root / std::to_string(set);
    fs::create_directories(folder);
    auto& shards = sets.emplace_back();
    for (int shard = 0; shard < kShards; ++shard) {
      std::vector<std::pair<std::string, std::string>> members;
      for (int sample = 0; sample < kSamples; ++sample) {
        std::string key = "s";
        key += std::to_string(shard) + "_" + std::to_string(sample);
        members.emplace_back(key + ".jpg", JpegBytes(set + shard + sample));
        members.emplace_back(key + ".cls", std::to_string(sample));
      }
      const fs::path tar = folder / ("shard-" + std::to_string(shard) + ".tar");
      WriteTar(tar, members);
      shards.push_back(tar.string());
    }
  }
  StartProcess({"--tar-index-dir", "none", "--cache-bytes", "0"});
  ASSERT_TRUE(SetDescriptorLimit(process_->pid(), 256));
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const int baseline = DescriptorCount(process_->pid());
  int most = baseline;
  for (int set = 0; set < kSets; ++set) {
    JobSpec spec = Spec();
    spec.dataset = "set";
    spec.dataset += std::to_string(set);
    spec.shards = sets[set];
    auto epoch = ReadEpoch(spec);
    ASSERT_TRUE(epoch.ok()) << "set " << set << ": " << epoch.status().ToString();
    ASSERT_EQ(epoch->items, uint64_t{kShards * kSamples})
        << "set " << set << ": " << epoch->first_error;
    most = std::max(most, DescriptorCount(process_->pid()));
  }
  // Each set's descriptors are closed when its job ends; the last ones as
  // soon as galleyd has seen that job close.
  ASSERT_TRUE(StatusUntil([](const nlohmann::json& status) {
    return status["descriptors"]["shards_open"] == 0;
  })) << Query("status")["descriptors"].dump();
  const int after = SettledDescriptorCount(baseline + 2);
  const nlohmann::json descriptors = Query("status")["descriptors"];
  std::printf(
      "galleyd descriptors: %d before, at most %d while 300 shard sets were read, %d after; "
      "shard descriptors released %llu, exhausted %llu\n",
      baseline, most, after,
      static_cast<unsigned long long>(descriptors["shards_released"].get<uint64_t>()),
      static_cast<unsigned long long>(descriptors["exhausted"].get<uint64_t>()));
  RecordProperty("descriptors_before", baseline);
  RecordProperty("descriptors_most", most);
  RecordProperty("descriptors_after", after);
  // One job at a time: its two connections, ring and eventfd, its set's
  // shards, and those of the job before it while that one is being closed;
  // never a figure that grows with the sets read.
  EXPECT_LE(most, baseline + 32);
  EXPECT_LE(after, baseline + 2);
  EXPECT_EQ(descriptors["exhausted"], 0);
  EXPECT_GE(descriptors["shards_released"].get<uint64_t>(), uint64_t{kSets});

  // Another user's ImageFolder job is whole.
  ChildAs other(kNobodyUid, kNobodyGid, {}, [&]() -> Status {
    auto epoch = ReadEpoch(Spec());
    if (!epoch.ok()) return epoch.status();
    if (epoch->items != 6 || epoch->skipped != 0) {
      return Status::DataLoss(std::to_string(epoch->items) + " items, " +
                              std::to_string(epoch->skipped) + " skipped: " + epoch->first_error);
    }
    return Status::Ok();
  });
  const Outcome outcome = other.Report();
  EXPECT_EQ(outcome.code, 0) << outcome.message;
}

TEST_F(NodeLimitsTest, SetsReadAtOnceStayWithinTheNodeWideBound) {
  // 12 jobs on 12 sets of 4 shards, all open together: 48 shards read, at
  // most 16 kept open.
  constexpr int kSets = 12, kShards = 4;
  std::vector<std::vector<std::string>> sets;
  for (int set = 0; set < kSets; ++set) {
    const fs::path folder = tmp_.path() / "held" / std::to_string(set);
    fs::create_directories(folder);
    auto& shards = sets.emplace_back();
    for (int shard = 0; shard < kShards; ++shard) {
      const fs::path tar = folder / ("shard-" + std::to_string(shard) + ".tar");
      WriteTar(tar, {{"k.jpg", JpegBytes(set * kShards + shard)}, {"k.cls", "1"}});
      shards.push_back(tar.string());
    }
  }
  Start({"--tar-index-dir", "none", "--cache-bytes", "0", "--max-open-shards-total", "16"});
  EXPECT_EQ(Query("status")["descriptors"]["shards_limit"], 16);
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  std::vector<Job> jobs;
  uint64_t most = 0;
  for (int set = 0; set < kSets; ++set) {
    JobSpec spec = Spec();
    spec.dataset = "held" + std::to_string(set);
    spec.shards = sets[set];
    spec.batch_size = kShards;
    spec.epochs = 0;  // endless: the job stays open and keeps reading
    auto job = client->OpenJob(spec);
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    auto batch = job->Next(30s);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    EXPECT_EQ(batch->size(), uint32_t{kShards}) << batch->first_error();
    jobs.push_back(std::move(job).value());
    most = std::max(most, Query("status")["descriptors"]["shards_open"].get<uint64_t>());
  }
  std::printf("shard descriptors open with %d sets read at once: at most %llu (bound 16)\n", kSets,
              static_cast<unsigned long long>(most));
  EXPECT_LE(most, 16u);
  EXPECT_GT(Query("status")["descriptors"]["shards_evicted"].get<uint64_t>(), 0u);
  jobs.clear();
  EXPECT_TRUE(StatusUntil(
      [](const nlohmann::json& status) { return status["descriptors"]["shards_open"] == 0; }));
}

TEST_F(NodeLimitsTest, RunningOutOfDescriptorsIsASampleErrorAndACounterNotAQuietGap) {
#ifdef GALLEY_TEST_UNDER_ASAN
  // galleyd is built like this test, and the sanitizers' runtime needs
  // descriptors of its own (UBSan checks a vptr by writing the object to a
  // pipe): with none free it reports errors that are not there. The plain
  // build runs this check.
  GTEST_SKIP() << "the sanitizers' runtime needs file descriptors of its own";
#endif
  const uint16_t port = FreePort();
  StartProcess({"--cache-bytes", "0", "--metrics-port", std::to_string(port)});
  // Warm up: the pipeline's threads and decoders exist before the limit bites.
  ASSERT_TRUE(ReadEpoch(Spec()).ok());
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  JobSpec spec = Spec();
  spec.epochs = 0;  // endless: the job reads on until it meets the limit
  auto job = client->OpenJob(spec);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  // From here galleyd can open nothing: the limit is its lowest free
  // descriptor number (a limit of 0 would make even poll on one descriptor
  // fail). A worker may hold a sample's file open while the limit is set;
  // closing it leaves a free number below the limit, so before each batch the
  // limit follows the lowest free number down. What was read ahead before
  // (the ring's slots, and on a machine with many cores the samples its
  // workers had already opened) is whole; an endless job reads on past any
  // read-ahead, so some batch is prepared with no descriptor free. The bound
  // of 1,000 batches is a bound on a missing error, not a figure the daemon
  // is expected to approach.
  const rlimit saved = DescriptorLimit(process_->pid());
  rlim_t limit = saved.rlim_cur;
  const auto follow_lowest_free = [&] {
    const rlim_t lowest_free = LowestFreeDescriptor(process_->pid());
    ASSERT_GE(lowest_free, 3u);
    if (lowest_free < limit) {
      ASSERT_TRUE(SetDescriptorLimit(process_->pid(), lowest_free));
      limit = lowest_free;
    }
  };
  // The job sees the error either in a batch (substitutes served the rest)
  // or, when no sample of a batch could be replaced, as the end of the job:
  // never as a quiet gap.
  std::string error;
  int read = 0;
  for (; read < 1000 && error.empty(); ++read) {
    follow_lowest_free();
    if (HasFatalFailure()) break;
    auto batch = job->Next(30s);
    if (!batch.ok()) {
      std::printf("the job ended with no descriptor free after %d batches: %s\n", read,
                  batch.status().ToString().c_str());
      EXPECT_EQ(batch.status().code(), StatusCode::kDataLoss);
      error = batch.status().message();
      break;
    }
    if (batch->skipped() > 0) {
      std::printf("batch %d, with no descriptor free: %u samples, %u skipped\n", read,
                  batch->size(), batch->skipped());
      error = batch->first_error();
    }
  }
  ASSERT_TRUE(SetDescriptorLimit(process_->pid(), saved.rlim_cur));
  ASSERT_FALSE(error.empty()) << "all " << read << " batches were whole with no descriptor free";
  job->Close();
  EXPECT_NE(error.find("out of file descriptors (EMFILE)"), std::string::npos) << error;
  const nlohmann::json descriptors = Query("status")["descriptors"];
  EXPECT_GE(descriptors["exhausted"].get<uint64_t>(), 1u) << descriptors.dump();
  const std::string metrics = HttpGet(port, "/metrics");
  EXPECT_GE(MetricValue(metrics, "galley_descriptor_exhaustion_total"), 1) << metrics;
  // Once descriptors are free again, a job's epoch is whole: running out
  // was the node's state, not the files'.
  auto again = ReadEpoch(Spec());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->skipped, 0u) << again->first_error;
  EXPECT_EQ(again->items, Spec().batch_size * 3u) << again->first_error;
}

// ---- Frames that cost more parsed than sent -----------------------------------

std::unique_ptr<wire::Connection> Handshaken(const std::string& socket) {
  auto fd = wire::Connection::ConnectUnix(socket);
  if (!fd.ok()) return nullptr;
  auto connection = std::make_unique<wire::Connection>(std::move(fd).value());
  if (!connection->SendFrame(wire::MessageType::kHello, 0, R"({"client":"amplifier"})").ok()) {
    return nullptr;
  }
  auto welcome = connection->ReadFrame(std::chrono::steady_clock::now() + 30s);
  if (!welcome.ok() || welcome->header.type != wire::MessageType::kWelcome) return nullptr;
  return connection;
}

Status ErrorOf(const wire::Frame& frame) {
  if (frame.header.type != wire::MessageType::kError) return Status::Ok();
  auto body = wire::ParseObject(frame.payload);
  return body.ok() ? wire::StatusFromErrorJson(*body) : body.status();
}

TEST_F(NodeLimitsTest, AmplifyingFramesLeaveResidentMemoryBounded) {
#ifdef GALLEY_TEST_UNDER_ASAN
  GTEST_SKIP() << "resident memory is not meaningful under AddressSanitizer";
#endif
  StartProcess({"--cache-prefault", "false"});
  ASSERT_TRUE(ReadEpoch(Spec()).ok());
  // An OpenJob of 16 MiB that is almost all empty arrays: about 300 MB once
  // parsed into a document.
  std::string body = R"({"dataset":")" + data_.string() + R"(","batch_size":1,"ids":[[])";
  body.reserve(wire::kMaxPayloadBytes);
  while (body.size() + 5 < wire::kMaxPayloadBytes) body += ",[]";
  body += "]}";
  const pid_t pid = process_->pid();
  ASSERT_TRUE(ResetPeakMemory(pid));
  const uint64_t before = ResidentBytes(pid);

  auto send_one = [&]() -> Status {
    auto connection = Handshaken(process_->socket());
    if (connection == nullptr) return Status::Unavailable("no handshake");
    GALLEY_RETURN_IF_ERROR(connection->SendFrame(wire::MessageType::kOpenJob, 1, body));
    GALLEY_ASSIGN_OR_RETURN(auto reply,
                            connection->ReadFrame(std::chrono::steady_clock::now() + 60s));
    return ErrorOf(reply);
  };
  const Status single = send_one();
  EXPECT_EQ(single.code(), StatusCode::kInvalidArgument) << single.ToString();
  EXPECT_NE(single.message().find("once parsed"), std::string::npos) << single.ToString();
  const uint64_t after_one = ResidentBytes(pid);

  std::vector<Status> replies(8);
  std::vector<std::thread> senders;
  for (auto& reply : replies) senders.emplace_back([&] { reply = send_one(); });
  for (auto& t : senders) t.join();
  for (const Status& reply : replies) {
    EXPECT_EQ(reply.code(), StatusCode::kInvalidArgument) << reply.ToString();
  }
  // The reply comes after galleyd freed the frame and gave memory back.
  const uint64_t peak = StatusBytes(pid, "VmHWM");
  const uint64_t after = ResidentBytes(pid);
  std::printf(
      "galleyd resident %.1f MiB before, %.1f MiB after one 16 MiB frame, %.1f MiB after 8 in "
      "parallel; VmHWM during them %.1f MiB\n",
      before / 1048576.0, after_one / 1048576.0, after / 1048576.0, peak / 1048576.0);
  RecordProperty("rss_before_kib", static_cast<int>(before >> 10));
  RecordProperty("hwm_kib", static_cast<int>(peak >> 10));
  RecordProperty("rss_after_kib", static_cast<int>(after >> 10));
  // Nothing is built: at most the eight frames' text is held at once
  // (8 x 16 MiB), and all of it goes back once they are refused.
  EXPECT_LT(peak, before + 8 * uint64_t{wire::kMaxPayloadBytes} + (uint64_t{48} << 20));
  EXPECT_LT(after, before + (uint64_t{32} << 20));

  // A query may not be large at all: refused on its header, never read.
  auto query = Handshaken(process_->socket());
  ASSERT_NE(query, nullptr);
  wire::FrameHeader h;
  h.type = wire::MessageType::kQuery;
  h.payload_length = wire::kMaxPayloadBytes;
  const auto head = wire::EncodeFrameHeader(h);
  ASSERT_EQ(::send(query->fd(), head.data(), head.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(head.size()));
  auto refusal = query->ReadFrame(std::chrono::steady_clock::now() + 30s);
  ASSERT_TRUE(refusal.ok()) << refusal.status().ToString();
  EXPECT_NE(ErrorOf(*refusal).message().find("exceeds its limit of 65536"), std::string::npos)
      << ErrorOf(*refusal).ToString();
  ASSERT_TRUE(ReadEpoch(Spec()).ok());
}

// ---- The metrics endpoint --------------------------------------------------

TEST_F(NodeLimitsTest, FiftyStalledClientsDoNotDelayAScrape) {
  const uint16_t port = FreePort();
  StartProcess({"--metrics-port", std::to_string(port)});
  // Each sends the start of a request head and never the rest.
  std::vector<int> stalled;
  for (int i = 0; i < 50; ++i) {
    const int fd = ConnectLoopback(port);
    ASSERT_GE(fd, 0);
    const std::string part = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
    ASSERT_EQ(::send(fd, part.data(), part.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(part.size()));
    stalled.push_back(fd);
  }
  const std::string metrics = HttpGet(port, "/metrics");
  EXPECT_NE(metrics.find("200 OK"), std::string::npos) << metrics;
  EXPECT_GE(MetricValue(metrics, "galley_descriptors_open"), 50);
  // The scrape was answered while every stalled client was still waiting.
  int still_open = 0;
  for (int fd : stalled) {
    pollfd p{fd, POLLIN, 0};
    char byte;
    const bool closed = ::poll(&p, 1, 0) == 1 && ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
    still_open += closed ? 0 : 1;
  }
  EXPECT_EQ(still_open, 50);
  // And each of them is dropped in the end (its head never completes).
  for (int fd : stalled) {
    char byte;
    const ssize_t n = ::recv(fd, &byte, 1, 0);
    EXPECT_TRUE(n == 0 || (n < 0 && errno == ECONNRESET)) << "a stalled client was never dropped";
    ::close(fd);
  }
}

// ---- Labels ------------------------------------------------------------------

TEST_F(NodeLimitsTest, ANegativeShardLabelIsASampleErrorUnderOnError) {
  const fs::path tar = tmp_.path() / "labels.tar";
  WriteTar(tar, {{"a.jpg", JpegBytes(1)},
                 {"a.cls", "1"},
                 {"b.jpg", JpegBytes(2)},
                 {"b.cls", "-7"},
                 {"c.jpg", JpegBytes(3)},
                 {"c.cls", "2"}});
  Start({"--tar-index-dir", "none"});
  JobSpec spec = Spec();
  spec.dataset = "labels";
  spec.shards = {tar.string()};
  spec.batch_size = 1;
  auto epoch = ReadEpoch(spec);  // on_error "skip": the sample is left out
  ASSERT_TRUE(epoch.ok()) << epoch.status().ToString();
  EXPECT_EQ(epoch->items, 2u);
  std::sort(epoch->labels.begin(), epoch->labels.end());
  EXPECT_EQ(epoch->labels, (std::vector<int64_t>{1, 2}));
  const nlohmann::json datasets = Query("datasets")["datasets"];
  ASSERT_EQ(datasets.size(), 1u);
  EXPECT_EQ(datasets[0]["shards"]["skipped_samples"], 1);
  EXPECT_NE(datasets[0]["shards"]["first_skipped_sample"].get<std::string>().find(
                "b (the .cls holds -7; a label is 0 or more)"),
            std::string::npos)
      << datasets.dump();
  spec.on_error = "raise";
  auto raised = ReadEpoch(spec);
  ASSERT_FALSE(raised.ok());
  EXPECT_EQ(raised.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(raised.status().message().find("-7"), std::string::npos) << raised.status().ToString();
}

}  // namespace
}  // namespace galley
