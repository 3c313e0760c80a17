// Regression tests for peers that misbehave on purpose: each test replays an
// input that once crashed or wedged galleyd (issue 13) against the daemon,
// then checks that the daemon still serves others and still shuts down as
// on SIGTERM. The daemon is built in the test's process; tests of the
// process (SIGTERM itself, its resident memory) run the real galleyd
// (HostilePeerProcessTest).
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "galley/client.h"
#include "tests/integration/galleyd_process.h"
#include "tests/integration/in_process_daemon.h"
#include "tests/sanitizers.h"
#include "wire/connection.h"
#include "wire/messages.h"
#include "wire/segment_layout.h"

namespace galley {
namespace {

using namespace std::chrono_literals;
using testing::GalleydProcess;
using testing::InProcessGalleyd;
using testing::TempDir;

constexpr const char* kSmallTransform = R"({"ops":[{"op":"Resize","size":[32,32]}]})";

// Whether the other end of the stream socket `fd` has read everything sent
// on it (SIOCOUTQ: what is sent and not yet read there).
bool ReadByPeer(int fd) {
  int unread = 0;
  return ::ioctl(fd, SIOCOUTQ, &unread) == 0 && unread == 0;
}

// Waits (at most `bound`, which only catches a hang) until galleyd has read
// everything sent on `fd`.
bool AwaitReadByPeer(int fd, std::chrono::seconds bound) {
  const auto give_up = std::chrono::steady_clock::now() + bound;
  while (!ReadByPeer(fd) && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(1ms);
  }
  return ReadByPeer(fd);
}

// Waits (at most `bound`, which only catches a hang) until at least `count`
// slots of the mapped ring `base` are Ready, polling the wake-up socket
// between looks.
bool AwaitReadySlots(void* base, const wire::SegmentGeometry& geometry, int wakeup, uint32_t count,
                     std::chrono::seconds bound) {
  const auto give_up = std::chrono::steady_clock::now() + bound;
  while (std::chrono::steady_clock::now() < give_up) {
    char drain[16];
    while (::recv(wakeup, drain, sizeof(drain), MSG_DONTWAIT) > 0) {
    }
    uint32_t ready = 0;
    for (uint32_t i = 0; i < geometry.slot_count; ++i) {
      ready += wire::SlotAt(base, geometry, i)->state.load() ==
               static_cast<uint32_t>(wire::SlotState::kReady);
    }
    if (ready >= count) return true;
    pollfd pfd{wakeup, POLLIN, 0};
    (void)::poll(&pfd, 1, 100);
  }
  return false;
}

class HostilePeerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = tmp_.path() / "data";
    testing::WriteJpegFolder(data_, 2, 6);
    StartDaemon();
  }
  // No prefault: committing the cache's memory in the background would
  // count in MemoryOfLargeRequestsIsGivenBack's resident memory.
  std::vector<std::string> Flags() const {
    return {"--allowed-root", tmp_.path(), "--cache-prefault", "false"};
  }
  virtual void StartDaemon() {
    daemon_ = std::make_unique<InProcessGalleyd>(tmp_.path() / "galleyd.sock", Flags());
    ASSERT_TRUE(daemon_->started()) << daemon_->start_status().ToString();
    socket_ = daemon_->socket();
    options_.socket_path = socket_;
    options_.request_timeout = 5s;
  }

  nlohmann::json OpenJobBody(const std::string& dataset) const {
    JobSpec spec;
    spec.dataset = dataset;
    spec.batch_size = 4;
    spec.prefetch = 2;
    spec.transform_json = kSmallTransform;
    return wire::JobSpecToJson(spec);
  }

  // A raw connection that has completed the handshake.
  std::unique_ptr<wire::Connection> Handshaken() {
    auto fd = wire::Connection::ConnectUnix(socket_);
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    if (!fd.ok()) return nullptr;
    auto connection = std::make_unique<wire::Connection>(std::move(fd).value());
    EXPECT_TRUE(
        connection->SendFrame(wire::MessageType::kHello, 0, R"({"client":"hostile"})").ok());
    auto welcome = connection->ReadFrame(std::chrono::steady_clock::now() + 5s);
    EXPECT_TRUE(welcome.ok() && welcome->header.type == wire::MessageType::kWelcome);
    return connection;
  }

  // Sends OpenJob with `payload` as its body and returns the reply frame.
  Result<wire::Frame> OpenRaw(wire::Connection& connection, const std::string& payload) {
    GALLEY_RETURN_IF_ERROR(connection.SendFrame(wire::MessageType::kOpenJob, 1, payload));
    return connection.ReadFrame(std::chrono::steady_clock::now() + 10s);
  }

  static Status ErrorOf(const wire::Frame& frame) {
    if (frame.header.type != wire::MessageType::kError) return Status::Ok();
    auto body = wire::ParseObject(frame.payload);
    return body.ok() ? wire::StatusFromErrorJson(*body) : body.status();
  }

  // The daemon still answers queries and serves a well-behaved job.
  void ExpectDaemonServes() {
    auto client = Client::Connect(options_);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    auto status = client->Query("status");
    ASSERT_TRUE(status.ok()) << status.status().ToString();
    JobSpec spec;
    spec.dataset = data_.string();
    spec.batch_size = 4;
    spec.transform_json = kSmallTransform;
    auto job = client->OpenJob(spec);
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    for (int i = 0; i < 4; ++i) {
      auto batch = job->Next(10s);
      ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    }
  }

  TempDir tmp_;
  std::filesystem::path data_;
  std::string socket_;
  std::unique_ptr<InProcessGalleyd> daemon_;
  std::unique_ptr<GalleydProcess> process_;  // HostilePeerProcessTest's
  ClientOptions options_;
};

// The same with the real galleyd, for tests of the process: SIGTERM and
// its resident memory.
class HostilePeerProcessTest : public HostilePeerTest {
 protected:
  void StartDaemon() override {
    process_ = std::make_unique<GalleydProcess>(tmp_.path() / "galleyd.sock", Flags());
    ASSERT_TRUE(process_->started()) << "galleyd did not start";
    socket_ = process_->socket();
    options_.socket_path = socket_;
    options_.request_timeout = 5s;
  }
};

TEST_F(HostilePeerTest, TruncatingTheRingDescriptorIsRefusedAndCannotFaultTheDaemon) {
  auto connection = Handshaken();
  ASSERT_NE(connection, nullptr);
  auto opened = OpenRaw(*connection, OpenJobBody(data_.string()).dump());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ASSERT_EQ(opened->header.type, wire::MessageType::kJobOpened) << ErrorOf(*opened).ToString();
  ASSERT_TRUE(opened->passed_fd.valid());
  ASSERT_TRUE(opened->second_fd.valid());
  // The seals refuse both a shrink and a grow, and any seal the client
  // would add (F_SEAL_FUTURE_WRITE would refuse galleyd's writes).
  EXPECT_NE(::ftruncate(opened->passed_fd.get(), 0), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::ftruncate(opened->passed_fd.get(), 1 << 30), 0);
  EXPECT_NE(::fcntl(opened->passed_fd.get(), F_ADD_SEALS, F_SEAL_FUTURE_WRITE), 0);
  EXPECT_EQ(errno, EPERM);
  // The daemon writes every slot of the ring (a shrunk descriptor would
  // have faulted it at the first write past the end).
  const auto info = wire::JobInfoFromJson(*wire::ParseObject(opened->payload));
  ASSERT_TRUE(info.ok());
  const auto geometry = wire::ComputeGeometry(info->slots, 4, 3 * 32 * 32);
  ASSERT_TRUE(geometry.ok());
  ASSERT_EQ(geometry->segment_bytes, info->segment_bytes);
  void* base =
      ::mmap(nullptr, info->segment_bytes, PROT_READ, MAP_SHARED, opened->passed_fd.get(), 0);
  ASSERT_NE(base, MAP_FAILED);
  ASSERT_TRUE(connection->SendFrame(wire::MessageType::kConsumerReady, 0, "").ok());
  EXPECT_TRUE(AwaitReadySlots(base, *geometry, opened->second_fd.get(), geometry->slot_count, 60s))
      << "galleyd did not fill the ring's " << geometry->slot_count << " slots";
  ::munmap(base, info->segment_bytes);
  ExpectDaemonServes();
  EXPECT_TRUE(daemon_->Stop()) << "the daemon did not stop";
}

TEST_F(HostilePeerTest, ScribblingOverTheWholeSegmentHurtsOnlyThatJob) {
  auto connection = Handshaken();
  ASSERT_NE(connection, nullptr);
  auto opened = OpenRaw(*connection, OpenJobBody(data_.string()).dump());
  ASSERT_TRUE(opened.ok());
  ASSERT_EQ(opened->header.type, wire::MessageType::kJobOpened) << ErrorOf(*opened).ToString();
  const auto info = wire::JobInfoFromJson(*wire::ParseObject(opened->payload));
  ASSERT_TRUE(info.ok());
  const size_t bytes = info->segment_bytes;
  void* base =
      ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, opened->passed_fd.get(), 0);
  ASSERT_NE(base, MAP_FAILED);
  // What once aborted the daemon: 0x7FFFFFFF over the old semaphore (where
  // `closed` now starts), then every byte of the segment set, slot states
  // included.
  const uint32_t big = 0x7FFFFFFF;
  std::memcpy(static_cast<char*>(base) + offsetof(wire::SegmentHeader, closed), &big, sizeof(big));
  ASSERT_TRUE(connection->SendFrame(wire::MessageType::kConsumerReady, 0, "").ok());
  // Each round's scribble is in place when galleyd reads its release.
  for (int round = 0; round < 20; ++round) {
    std::memset(base, round % 2 == 0 ? 0xFF : 0x00, bytes);
    ASSERT_TRUE(connection->SendFrame(wire::MessageType::kSlotReleased, 0, "").ok());
    ASSERT_TRUE(AwaitReadByPeer(connection->fd(), 60s))
        << "galleyd stopped reading, round " << round;
  }
  // What once saturated the eventfd: nothing the client writes into its
  // wake-up socket reaches galleyd.
  const uint64_t huge = 0xfffffffffffffffeull;
  EXPECT_LT(::send(opened->second_fd.get(), &huge, sizeof(huge), MSG_NOSIGNAL), 0);
  EXPECT_EQ(errno, EPIPE);
  std::memset(base, 0, bytes);  // every slot Free again
  ASSERT_TRUE(connection->SendFrame(wire::MessageType::kSlotReleased, 0, "").ok());
  ASSERT_TRUE(AwaitReadByPeer(connection->fd(), 60s));
  ::munmap(base, bytes);
  ExpectDaemonServes();
  EXPECT_TRUE(daemon_->Stop()) << "the daemon did not stop";
}

// A seek the job's connection cannot parse, or one its job refuses, is
// answered with an error naming what is wrong; the job goes on, and a
// well-formed seek after them takes the job's first generation.
TEST_F(HostilePeerTest, AMalformedSeekIsAnsweredAndTheJobGoesOn) {
  auto connection = Handshaken();
  ASSERT_NE(connection, nullptr);
  auto opened = OpenRaw(*connection, OpenJobBody(data_.string()).dump());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ASSERT_EQ(opened->header.type, wire::MessageType::kJobOpened) << ErrorOf(*opened).ToString();
  auto seek = [&](uint32_t request_id, const std::string& body) -> Result<wire::Frame> {
    GALLEY_RETURN_IF_ERROR(connection->SendFrame(wire::MessageType::kSeekEpoch, request_id, body));
    return connection->ReadFrame(std::chrono::steady_clock::now() + 10s);
  };
  const std::vector<std::pair<std::string, std::string>> refused = {
      {R"({})", "SeekEpoch needs 'epoch'"},
      {R"({"epoch": -1})", "SeekEpoch needs 'epoch'"},
      {R"({"epoch": 1, "items": "all"})", "SeekEpoch's 'items' must be a list of item ids"},
      {R"({"epoch": 1, "items": [0, -2]})", "SeekEpoch's 'items' must be a list of item ids"},
      // A job of the daemon's own split: the JobManager's observers refuse it.
      {R"({"epoch": 1, "items": [0, 1]})", "SeekEpoch takes no 'items'"},
  };
  uint32_t request_id = 10;
  for (const auto& [body, message] : refused) {
    auto reply = seek(++request_id, body);
    ASSERT_TRUE(reply.ok()) << body << ": " << reply.status().ToString();
    EXPECT_EQ(reply->header.type, wire::MessageType::kError) << body;
    EXPECT_EQ(reply->header.request_id, request_id) << body;
    const Status error = ErrorOf(*reply);
    EXPECT_EQ(error.code(), StatusCode::kInvalidArgument) << body;
    EXPECT_NE(error.message().find(message), std::string::npos) << body << ": " << error.ToString();
  }
  auto sought = seek(++request_id, R"({"epoch": 1})");
  ASSERT_TRUE(sought.ok()) << sought.status().ToString();
  ASSERT_EQ(sought->header.type, wire::MessageType::kEpochSought) << ErrorOf(*sought).ToString();
  auto body = wire::ParseObject(sought->payload);
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  EXPECT_EQ((*body)["epoch"], 1);
  EXPECT_EQ((*body)["generation"], 1) << "a refused seek takes no generation";
  ExpectDaemonServes();
  EXPECT_TRUE(daemon_->Stop()) << "the daemon did not stop";
}

TEST_F(HostilePeerTest, AMalformedCredentialRefreshIsCountedAsRefusedAndTheJobGoesOn) {
  auto connection = Handshaken();
  ASSERT_NE(connection, nullptr);
  auto opened = OpenRaw(*connection, OpenJobBody(data_.string()).dump());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ASSERT_EQ(opened->header.type, wire::MessageType::kJobOpened) << ErrorOf(*opened).ToString();
  // Not answered, whatever they hold: none may end the job or the daemon.
  const std::vector<std::string> refreshes = {
      R"({})",
      R"({"s3": 5})",
      R"({"s3": {"bogus": 1}})",
      R"({"s3": {"path_style": "yes"}})",
      // Well formed, for a job that reads no object storage.
      R"({"s3": {"endpoint_url": "http://127.0.0.1:9", "region": "us-east-1",
                 "path_style": true, "access_key_id": "K", "secret_access_key": "S",
                 "session_token": ""}})",
  };
  for (const std::string& body : refreshes) {
    ASSERT_TRUE(connection->SendFrame(wire::MessageType::kRefreshCredentials, 0, body).ok());
  }
  // Frames are read in order: the stats come after every refresh was seen.
  ASSERT_TRUE(connection->SendFrame(wire::MessageType::kStatsRequest, 77, "{}").ok());
  auto stats = connection->ReadFrame(std::chrono::steady_clock::now() + 10s);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  ASSERT_EQ(stats->header.type, wire::MessageType::kStats) << ErrorOf(*stats).ToString();
  auto body = wire::ParseObject(stats->payload);
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  EXPECT_EQ((*body)["job"]["credential_refreshes_refused"], refreshes.size());
  EXPECT_EQ((*body)["job"]["credential_refreshes"], 0);
  ExpectDaemonServes();
  EXPECT_TRUE(daemon_->Stop()) << "the daemon did not stop";
}

TEST_F(HostilePeerTest, AnUnknownPolicyIsRefusedAndTheDaemonStaysResponsive) {
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  JobSpec spec;
  spec.dataset = data_.string();
  spec.batch_size = 4;
  spec.transform_json = kSmallTransform;
  spec.policy = "DSA";  // a typo of "dsa"
  auto job = client->OpenJob(spec);
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.status().message().find("DSA"), std::string::npos) << job.status().ToString();
  ExpectDaemonServes();
  EXPECT_TRUE(daemon_->Stop()) << "the daemon did not stop";
}

TEST_F(HostilePeerTest, DeeplyNestedJsonIsRefusedWithoutRecursion) {
  // 70,000 levels once overflowed the stack in the recursive dump.
  std::string transform(70000, '[');
  transform += std::string(70000, ']');
  const std::string body = R"({"dataset":")" + data_.string() +
                           R"(","batch_size":4,"transform":{"ops":)" + transform + "}}";
  auto connection = Handshaken();
  ASSERT_NE(connection, nullptr);
  auto reply = OpenRaw(*connection, body);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(ErrorOf(*reply).code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ErrorOf(*reply).message().find("nested"), std::string::npos);
  ExpectDaemonServes();
}

TEST_F(HostilePeerTest, TextThatIsNotUtf8NeverReachesTheEncoderUnescaped) {
  // A class folder named in Latin-1: refused, naming the folder.
  const auto latin = tmp_.path() / "latin";
  testing::WriteJpegFolder(latin, 2, 2);
  std::filesystem::rename(latin / "class0", latin / "caf\xe9");
  auto connection = Handshaken();
  ASSERT_NE(connection, nullptr);
  auto reply = OpenRaw(*connection, OpenJobBody(latin.string()).dump());
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  const Status refused = ErrorOf(*reply);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("caf\\xe9"), std::string::npos) << refused.ToString();

  // A dataset whose real path is not UTF-8 (reached through a symlink), then
  // the queries that print dataset roots.
  const auto odd = tmp_.path() / "d\xff";
  testing::WriteJpegFolder(odd, 2, 2);
  std::filesystem::create_symlink(odd, tmp_.path() / "link");
  auto second = Handshaken();
  ASSERT_NE(second, nullptr);
  auto opened = OpenRaw(*second, OpenJobBody((tmp_.path() / "link").string()).dump());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  for (const char* what : {"status", "datasets", "jobs"}) {
    auto text = client->Query(what);
    ASSERT_TRUE(text.ok()) << what << ": " << text.status().ToString();
  }

  // A binary file given as the dataset.
  const auto binary = tmp_.path() / "blob.bin";
  {
    std::ofstream out(binary, std::ios::binary);
    for (int i = 0; i < 4096; ++i) out.put(static_cast<char>((i * 131 + 7) & 0xFF));
  }
  auto third = Handshaken();
  ASSERT_NE(third, nullptr);
  auto blob = OpenRaw(*third, OpenJobBody(binary.string()).dump());
  ASSERT_TRUE(blob.ok()) << blob.status().ToString();
  EXPECT_EQ(blob->header.type, wire::MessageType::kError);

  // The client refuses to send a path that is not UTF-8, saying why.
  JobSpec spec;
  spec.dataset = odd.string();
  spec.batch_size = 4;
  spec.transform_json = kSmallTransform;
  auto job = client->OpenJob(spec);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(job.status().message().find("UTF-8"), std::string::npos);
  ExpectDaemonServes();
  EXPECT_TRUE(daemon_->Stop()) << "the daemon did not stop";
}

TEST_F(HostilePeerProcessTest, SigtermCompletesWhilePeersLeaveRepliesUnread) {
  std::vector<std::unique_ptr<wire::Connection>> flooders;
  for (int i = 0; i < 3; ++i) {
    auto connection = Handshaken();
    ASSERT_NE(connection, nullptr);
    auto opened = OpenRaw(*connection, OpenJobBody(data_.string()).dump());
    ASSERT_TRUE(opened.ok());
    ASSERT_EQ(opened->header.type, wire::MessageType::kJobOpened);
    // Ask for stats until the socket is full both ways, never reading.
    ::fcntl(connection->fd(), F_SETFL, ::fcntl(connection->fd(), F_GETFL) | O_NONBLOCK);
    const std::string head = [] {
      wire::FrameHeader h;
      h.type = wire::MessageType::kStatsRequest;
      auto bytes = wire::EncodeFrameHeader(h);
      return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    }();
    for (int k = 0; k < 200000; ++k) {
      if (::send(connection->fd(), head.data(), head.size(), MSG_NOSIGNAL) < 0) break;
    }
    flooders.push_back(std::move(connection));
  }
  // SIGTERM comes once galleyd is answering every flooder, which reads none
  // of its replies (the deadline bounds a hang only).
  const auto answering = [](const std::unique_ptr<wire::Connection>& flooder) {
    return flooder->Readable();
  };
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (!std::all_of(flooders.begin(), flooders.end(), answering) &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(std::all_of(flooders.begin(), flooders.end(), answering))
      << "galleyd answered no request of a flooder";
  // Stop() gives the daemon 10 s before it resorts to SIGKILL.
  EXPECT_EQ(process_->Stop(SIGTERM), 0);
}

TEST_F(HostilePeerTest, ATrickledFrameIsDroppedAtItsWholeFrameDeadline) {
  auto connection = Handshaken();
  ASSERT_NE(connection, nullptr);
  wire::FrameHeader h;
  h.type = wire::MessageType::kOpenJob;
  h.payload_length = 1 << 20;
  auto head = wire::EncodeFrameHeader(h);
  ASSERT_EQ(::send(connection->fd(), head.data(), head.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(head.size()));
  // One byte every 200 ms: each gap is short, the frame never completes.
  const auto start = std::chrono::steady_clock::now();
  bool closed = false;
  while (std::chrono::steady_clock::now() - start < 20s) {
    if (::send(connection->fd(), "{", 1, MSG_NOSIGNAL) < 0) {
      closed = true;
      break;
    }
    char byte;
    if (::recv(connection->fd(), &byte, 1, MSG_DONTWAIT) == 0) {
      closed = true;
      break;
    }
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_TRUE(closed) << "the daemon kept a trickled frame open for 20 s";
  ExpectDaemonServes();
}

// Resident memory of `pid`, from /proc.
uint64_t RssBytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

TEST_F(HostilePeerTest, LargeFramesFromManyPeersAreBoundedDaemonWide) {
  // 20 peers announce a full-size frame each and send one byte of it: the
  // daemon holds at most 16 such frames (its frame budget) and refuses the
  // rest at once, naming the limit.
  std::vector<std::unique_ptr<wire::Connection>> peers;
  for (int i = 0; i < 20; ++i) {
    auto connection = Handshaken();
    ASSERT_NE(connection, nullptr);
    wire::FrameHeader h;
    h.type = wire::MessageType::kOpenJob;
    h.payload_length = wire::kMaxPayloadBytes;
    auto head = wire::EncodeFrameHeader(h);
    ASSERT_EQ(::send(connection->fd(), head.data(), head.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(head.size()));
    // A peer past the budget may be refused (and closed) on its header
    // alone, before this byte goes out: then the send fails, and the
    // refusal is still there to read below.
    (void)::send(connection->fd(), "{", 1, MSG_NOSIGNAL);
    peers.push_back(std::move(connection));
  }
  // The refusals come at once; the frames held wait for their rest (and
  // would be dropped at the 10 s whole-frame deadline). galleyd has judged
  // every header once each peer has either its refusal to read or its byte
  // read by galleyd (only a held frame's payload is read); the deadline
  // bounds a hang only.
  const auto judged = [](const std::unique_ptr<wire::Connection>& peer) {
    return peer->Readable() || ReadByPeer(peer->fd());
  };
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!std::all_of(peers.begin(), peers.end(), judged) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  int refused = 0;
  for (auto& peer : peers) {
    if (!peer->Readable()) continue;
    auto reply = peer->ReadFrame(std::chrono::steady_clock::now() + 10s);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    const Status error = ErrorOf(*reply);
    EXPECT_EQ(error.code(), StatusCode::kResourceExhausted) << error.ToString();
    EXPECT_NE(error.message().find("limit"), std::string::npos) << error.message();
    ++refused;
  }
  EXPECT_EQ(refused, 4);
  peers.clear();
  ExpectDaemonServes();
}

TEST_F(HostilePeerProcessTest, MemoryOfLargeRequestsIsGivenBack) {
#ifdef GALLEY_TEST_UNDER_ASAN
  // galleyd is built like this test: ASan's allocator keeps freed memory in
  // its quarantine by design, so resident memory says nothing here. The
  // plain build runs this check.
  GTEST_SKIP() << "resident memory is not meaningful under AddressSanitizer";
#endif
  ExpectDaemonServes();
  const uint64_t before = RssBytes(process_->pid());
  // Eight OpenJob requests of 15 MiB each (a long name), refused after
  // parsing; what they cost must not stay resident.
  std::string body = OpenJobBody(data_.string()).dump();
  body.insert(body.size() - 1, R"(,"name":")" + std::string(15u << 20, 'x') + "\"");
  for (int i = 0; i < 8; ++i) {
    auto connection = Handshaken();
    ASSERT_NE(connection, nullptr);
    auto reply = OpenRaw(*connection, body);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    // galleyd closes a refused job's connection once it is done with the
    // request: then nothing of it is left to give back.
    auto end = connection->ReadFrame(std::chrono::steady_clock::now() + 60s);
    ASSERT_EQ(end.status().code(), StatusCode::kUnavailable) << end.status().ToString();
  }
  const uint64_t after = RssBytes(process_->pid());
  EXPECT_LT(after, before + (uint64_t{48} << 20))
      << "galleyd kept " << (after - before) / (1 << 20) << " MiB after eight 15 MiB requests";
  ExpectDaemonServes();
}

}  // namespace
}  // namespace galley

namespace galley {
namespace {

TEST_F(HostilePeerTest, PrefetchCountsBatchesBeyondTheOneInHand) {
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok());
  JobSpec spec;
  spec.dataset = data_.string();
  spec.batch_size = 4;
  spec.prefetch = 1;
  spec.epochs = 2;
  spec.transform_json = kSmallTransform;
  auto job = client->OpenJob(spec);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->info().slots, 2u);
  // A plain loop that holds one batch while it asks for the next: this once
  // deadlocked with prefetch=1.
  uint64_t samples = 0;
  {
    auto held = job->Next(10s);
    ASSERT_TRUE(held.ok()) << held.status().ToString();
    samples += held->size();
    for (int i = 0; i < 10 && samples < 24; ++i) {
      auto next = job->Next(10s);
      ASSERT_TRUE(next.ok()) << next.status().ToString();
      samples += next->size();
      held = std::move(next);
    }
  }
  EXPECT_EQ(samples, 2u * 12u);  // two epochs of 12 items, batches of 4

  // Holding every slot is an immediate, explicit error, not a timeout
  // (which would be DeadlineExceeded).
  auto again = client->OpenJob(spec);
  ASSERT_TRUE(again.ok());
  auto first = again->Next(10s);
  auto second = again->Next(10s);
  ASSERT_TRUE(first.ok() && second.ok());
  auto third = again->Next(30s);
  EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted) << third.status().ToString();
  EXPECT_NE(third.status().message().find("held by the caller"), std::string::npos);
}

}  // namespace
}  // namespace galley

namespace galley {
namespace {

TEST_F(HostilePeerTest, PunchingHolesInTheRingCostsGalleydOnlyFreshPages) {
  auto connection = Handshaken();
  ASSERT_NE(connection, nullptr);
  auto opened = OpenRaw(*connection, OpenJobBody(data_.string()).dump());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ASSERT_EQ(opened->header.type, wire::MessageType::kJobOpened) << ErrorOf(*opened).ToString();
  const auto info = wire::JobInfoFromJson(*wire::ParseObject(opened->payload));
  ASSERT_TRUE(info.ok());
  const auto geometry = wire::ComputeGeometry(info->slots, 4, 3 * 32 * 32);
  ASSERT_TRUE(geometry.ok());
  ASSERT_EQ(geometry->segment_bytes, info->segment_bytes);
  const int memfd = opened->passed_fd.get();
  void* base = ::mmap(nullptr, info->segment_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  ASSERT_NE(base, MAP_FAILED);
  ASSERT_TRUE(connection->SendFrame(wire::MessageType::kConsumerReady, 0, "").ok());
  ASSERT_TRUE(AwaitReadySlots(base, *geometry, opened->second_fd.get(), 1, 60s));
  // Each round drops every page of the segment (galleyd's reserved ones
  // included: the slots read as zeros, which is Free) and asks for more.
  // galleyd's next writes fault in fresh pages; it must fill them again.
  constexpr int kRounds = 5;
  int refilled = 0;
  for (int round = 0; round < kRounds; ++round) {
    ASSERT_EQ(::fallocate(memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                          static_cast<off_t>(info->segment_bytes)),
              0)
        << "punching a hole: " << std::strerror(errno);
    ASSERT_TRUE(connection->SendFrame(wire::MessageType::kSlotReleased, 0, "").ok());
    if (!AwaitReadySlots(base, *geometry, opened->second_fd.get(), 1, 60s)) break;
    ++refilled;
  }
  EXPECT_EQ(refilled, kRounds) << "galleyd stopped filling a hole-punched ring";
  ::munmap(base, info->segment_bytes);
  ExpectDaemonServes();
  EXPECT_TRUE(daemon_->Stop()) << "the daemon did not stop";
}

std::string ErrorText(const wire::Frame& frame) {
  auto body = wire::ParseObject(frame.payload);
  return body.ok() ? wire::StatusFromErrorJson(*body).ToString() : body.status().ToString();
}

// What a forked attacker reports to the test, in memory both share.
struct AttackLog {
  std::atomic<int> stage{0};                // 1: attacking; -1: its set-up failed (see `failure`)
  std::atomic<uint64_t> rounds{0};          // slots freed + SlotReleased, repeated
  std::atomic<uint64_t> publishes_seen{0};  // Ready slots it found (and freed)
  std::atomic<int> send_errno{0};           // what sending 2^64-2 into its socket gave
  char failure[256] = {};
};

// The attack on the old eventfd, turned on the wake-up socket by a client
// of uid `uid`: it makes its descriptor blocking, shrinks its buffer, tries
// to write the eventfd's maximum into it and never reads it; then, until
// galleyd hangs up or the test kills it, marks every slot free and sends
// SlotReleased. Runs in the forked child; never returns.
[[noreturn]] void AttackWakeups(const std::string& socket, const std::string& open_job_body,
                                uid_t uid, AttackLog* log) {
  auto fail = [log](const std::string& why) {
    std::snprintf(log->failure, sizeof(log->failure), "%s", why.c_str());
    log->stage = -1;
    ::_exit(1);
  };
  if (uid != ::geteuid() && (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 ||
                             ::setresuid(uid, uid, uid) != 0)) {
    fail("cannot become uid " + std::to_string(uid));
  }
  auto fd = wire::Connection::ConnectUnix(socket);
  if (!fd.ok()) fail(fd.status().ToString());
  wire::Connection connection(std::move(fd).value());
  (void)connection.SendFrame(wire::MessageType::kHello, 0, R"({"client":"attacker"})");
  auto welcome = connection.ReadFrame(std::chrono::steady_clock::now() + 10s);
  if (!welcome.ok() || welcome->header.type != wire::MessageType::kWelcome) fail("no Welcome");
  (void)connection.SendFrame(wire::MessageType::kOpenJob, 1, open_job_body);
  auto opened = connection.ReadFrame(std::chrono::steady_clock::now() + 30s);
  if (!opened.ok()) fail(opened.status().ToString());
  if (opened->header.type != wire::MessageType::kJobOpened) fail(ErrorText(*opened));
  auto info = wire::JobInfoFromJson(*wire::ParseObject(opened->payload));
  if (!info.ok()) fail(info.status().ToString());
  auto geometry = wire::ComputeGeometry(info->slots, 4, 3 * 32 * 32);
  if (!geometry.ok() || geometry->segment_bytes != info->segment_bytes) fail("geometry");
  void* base = ::mmap(nullptr, info->segment_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                      opened->passed_fd.get(), 0);
  if (base == MAP_FAILED) fail("mmap");
  const int wakeup = opened->second_fd.get();
  const int tiny = 1;
  (void)::setsockopt(wakeup, SOL_SOCKET, SO_RCVBUF, &tiny, sizeof(tiny));
  const uint64_t huge = 0xfffffffffffffffeull;
  if (::send(wakeup, &huge, sizeof(huge), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
    log->send_errno = errno;
  }
  if (!connection.SendFrame(wire::MessageType::kConsumerReady, 0, "").ok()) fail("send");
  log->stage = 1;
  while (true) {
    (void)::fcntl(wakeup, F_SETFL, ::fcntl(wakeup, F_GETFL) & ~O_NONBLOCK);
    for (uint32_t i = 0; i < geometry->slot_count; ++i) {
      auto& state = wire::SlotAt(base, *geometry, i)->state;
      if (state.exchange(static_cast<uint32_t>(wire::SlotState::kFree)) ==
          static_cast<uint32_t>(wire::SlotState::kReady)) {
        log->publishes_seen++;
      }
    }
    if (!connection.SendFrame(wire::MessageType::kSlotReleased, 0, "").ok()) break;
    log->rounds++;
  }
  ::_exit(0);
}

TEST_F(HostilePeerProcessTest, AClientTurningItsWakeupSocketAgainstGalleydStopsNoOtherJob) {
  // A daemon every user can reach, so that the attacker is another uid.
  const bool as_root = ::geteuid() == 0;
  const uid_t attacker_uid = as_root ? 65534 : ::geteuid();  // nobody
  process_->Stop(SIGTERM);
  std::filesystem::permissions(tmp_.path(), std::filesystem::perms(0755));
  process_ = std::make_unique<GalleydProcess>(
      tmp_.path() / "open.sock",
      std::vector<std::string>{"--allowed-root", tmp_.path(), "--cache-prefault", "false",
                               "--socket-mode", "0666"});
  ASSERT_TRUE(process_->started()) << "galleyd did not start";
  options_.socket_path = process_->socket();

  void* shared =
      ::mmap(nullptr, sizeof(AttackLog), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  auto* log = new (shared) AttackLog;
  const std::string body = OpenJobBody(data_.string()).dump();
  const pid_t attacker = ::fork();
  ASSERT_GE(attacker, 0);
  if (attacker == 0) AttackWakeups(process_->socket(), body, attacker_uid, log);
  // However the test ends, the attacker ends with it.
  struct Reaper {
    pid_t pid;
    void* shared;
    ~Reaper() {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      ::munmap(shared, sizeof(AttackLog));
    }
  } reaper{attacker, shared};
  const auto give_up = std::chrono::steady_clock::now() + 60s;  // bounds a hang only
  while (log->stage.load() == 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(log->stage.load(), 1) << "the attacker did not start: " << log->failure;
  EXPECT_EQ(log->send_errno.load(), EPIPE) << "galleyd's end took what the client sent";

  // An honest job runs through the attack: it must keep getting batches
  // while the attacker's ring is filled far past what its wake-up queue
  // holds (a few wake-ups), so galleyd's sends found that queue full.
  auto client = Client::Connect(options_);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  JobSpec spec;
  spec.dataset = data_.string();
  spec.batch_size = 4;
  spec.transform_json = kSmallTransform;
  auto job = client->OpenJob(spec);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  constexpr uint64_t kEnough = 300;
  uint64_t honest_batches = 0;
  while ((honest_batches < kEnough || log->publishes_seen.load() < kEnough ||
          log->rounds.load() < kEnough) &&
         std::chrono::steady_clock::now() < give_up + 60s) {
    auto batch = job->Next(10s);
    ASSERT_TRUE(batch.ok()) << "after " << honest_batches << " batches, with the attacker at "
                            << log->publishes_seen.load()
                            << " publications: " << batch.status().ToString();
    ++honest_batches;
  }
  EXPECT_GE(honest_batches, kEnough);
  EXPECT_GE(log->publishes_seen.load(), kEnough) << "the attacker's ring was not refilled";
  EXPECT_GE(log->rounds.load(), kEnough);
  std::printf(
      "honest job: %llu batches while the attacker (uid %u) freed %llu publications "
      "in %llu rounds\n",
      static_cast<unsigned long long>(honest_batches), attacker_uid,
      static_cast<unsigned long long>(log->publishes_seen.load()),
      static_cast<unsigned long long>(log->rounds.load()));

  // SIGTERM with the attack still going: galleyd must exit by itself.
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, process_->pid(), 0));
  ASSERT_GE(pidfd, 0) << std::strerror(errno);
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(process_->pid(), SIGTERM), 0);
  pollfd exited{pidfd, POLLIN, 0};
  const int ready = ::poll(&exited, 1, 30'000);  // bounds a hang only
  const auto took = std::chrono::steady_clock::now() - sent;
  ::close(pidfd);
  EXPECT_EQ(ready, 1) << "galleyd did not exit within 30 s of SIGTERM";
  const auto took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  std::printf("galleyd exited %lld ms after SIGTERM, during the attack\n",
              static_cast<long long>(took_ms));
  RecordProperty("sigterm_exit_ms", static_cast<int>(took_ms));
  RecordProperty("honest_batches", static_cast<int>(honest_batches));
  EXPECT_EQ(process_->Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace galley
