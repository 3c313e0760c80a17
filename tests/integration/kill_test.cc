// Kill test: while two well-behaved jobs read the same dataset, other
// clients are SIGKILLed at random points — mid-handshake, mid-frame, holding
// slots, after scribbling over or trying to truncate their segment. The
// daemon must not crash, must leak no segment or descriptor, and the two jobs
// must still get every item exactly once per epoch. A short version runs in
// the suite; GALLEY_KILL_TEST_VICTIMS raises the count for a soak.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "galley/client.h"
#include "tests/integration/galleyd_process.h"
#include "wire/connection.h"
#include "wire/messages.h"
#include "wire/segment_layout.h"

namespace galley {
namespace {

using namespace std::chrono_literals;
using testing::GalleydProcess;
using testing::TempDir;

constexpr const char* kTransform = R"({"ops":[{"op":"Resize","size":[16,16]}]})";

JobSpec MakeSpec(const std::string& dataset, uint64_t epochs) {
  JobSpec spec;
  spec.dataset = dataset;
  spec.batch_size = 4;
  spec.prefetch = 2;
  spec.epochs = epochs;
  spec.transform_json = kTransform;
  return spec;
}

// One victim's behaviour before it is killed; runs in a forked child.
[[noreturn]] void Victim(const std::string& socket, const std::string& dataset, int mode) {
  auto fd = wire::Connection::ConnectUnix(socket);
  if (!fd.ok()) ::_exit(0);
  wire::Connection connection(std::move(fd).value());
  if (mode == 0) {  // half a Hello, then silence
    wire::FrameHeader h;
    h.type = wire::MessageType::kHello;
    h.payload_length = 100;
    auto head = wire::EncodeFrameHeader(h);
    (void)!::send(connection.fd(), head.data(), 10, MSG_NOSIGNAL);
    ::pause();
  }
  (void)connection.SendFrame(wire::MessageType::kHello, 0, R"({"client":"victim"})");
  (void)connection.ReadFrame(std::chrono::steady_clock::now() + 10s);
  if (mode == 1) ::pause();  // handshaken, idle
  const std::string body = wire::DumpJson(wire::JobSpecToJson(MakeSpec(dataset, 0)));
  (void)connection.SendFrame(wire::MessageType::kOpenJob, 1, body);
  auto opened = connection.ReadFrame(std::chrono::steady_clock::now() + 10s);
  if (!opened.ok() || !opened->passed_fd.valid()) ::pause();
  auto info = wire::JobInfoFromJson(*wire::ParseObject(opened->payload));
  if (!info.ok()) ::pause();
  const size_t bytes = info->segment_bytes;
  void* base =
      ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, opened->passed_fd.get(), 0);
  (void)connection.SendFrame(wire::MessageType::kConsumerReady, 0, "");
  std::mt19937 rng(static_cast<unsigned>(::getpid()));
  while (true) {
    switch (mode) {
      case 2:  // hold every slot it is given: never release
        break;
      case 3:  // scribble
        if (base != MAP_FAILED) std::memset(base, static_cast<int>(rng()), bytes);
        (void)connection.SendFrame(wire::MessageType::kSlotReleased, 0, "");
        break;
      case 4:  // try to truncate, then flood releases and stats
        (void)!::ftruncate(opened->passed_fd.get(), 0);
        (void)connection.SendFrame(wire::MessageType::kSlotReleased, 0, "");
        (void)connection.SendFrame(wire::MessageType::kStatsRequest, 2, "");
        break;
      default: {  // a slow consumer that frees slots
        if (base == MAP_FAILED) break;
        for (uint32_t i = 0; i < info->slots; ++i) {
          auto* slot =
              wire::SlotAt(base, *wire::ComputeGeometry(info->slots, 4, uint64_t{3} * 16 * 16), i);
          slot->state.store(static_cast<uint32_t>(wire::SlotState::kFree));
        }
        (void)connection.SendFrame(wire::MessageType::kSlotReleased, 0, "");
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 5));
  }
}

int CountOpenFds(pid_t pid) {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

int CountRingMappings(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  int n = 0;
  while (std::getline(maps, line)) n += line.find("galley-ring") != std::string::npos;
  return n;
}

TEST(KillTest, KilledAndScribblingClientsCostNothingToTwoRunningJobs) {
  TempDir tmp;
  const auto data = tmp.path() / "data";
  testing::WriteJpegFolder(data, 3, 8);  // 24 items
  GalleydProcess daemon(tmp.path() / "galleyd.sock",
                        {"--allowed-root", tmp.path().string(), "--cache-bytes", "0"});
  ASSERT_TRUE(daemon.started());
  ClientOptions options;
  options.socket_path = daemon.socket();
  options.request_timeout = 10s;
  const int victims = std::getenv("GALLEY_KILL_TEST_VICTIMS") != nullptr
                          ? std::atoi(std::getenv("GALLEY_KILL_TEST_VICTIMS"))
                          : 60;

  // The baseline: galleyd has closed the connection that saw it start.
  const int fds_before = CountOpenFds(daemon.pid());

  constexpr uint64_t kEpochs = 3;
  // The jobs' consumers are paced so that they run for about as long as the
  // victims do (about 30 ms each).
  const auto consume_pause = std::chrono::milliseconds(30 * victims / (6 * kEpochs));
  std::atomic<bool> failed{false};
  auto run_job = [&](int which) {
    auto client = Client::Connect(options);
    if (!client.ok()) return (void)(failed = true);
    auto job = client->OpenJob(MakeSpec(data.string(), kEpochs));
    if (!job.ok()) return (void)(failed = true);
    for (uint64_t epoch = 0; epoch < kEpochs; ++epoch) {
      std::multiset<uint64_t> seen;
      bool last = false;
      while (!last) {
        auto batch = job->Next(60s);
        if (!batch.ok()) {
          ADD_FAILURE() << "job " << which << ": " << batch.status().ToString();
          return (void)(failed = true);
        }
        for (size_t i = 0; i < batch->size(); ++i) seen.insert(batch->item_ids()[i]);
        last = batch->last_in_epoch();
        std::this_thread::sleep_for(consume_pause);
      }
      std::set<uint64_t> distinct(seen.begin(), seen.end());
      if (seen.size() != 24 || distinct.size() != 24) {
        ADD_FAILURE() << "job " << which << " epoch " << epoch << ": " << seen.size()
                      << " deliveries of " << distinct.size() << " items";
        failed = true;
      }
    }
  };
  std::thread job_a(run_job, 0), job_b(run_job, 1);

  std::mt19937 rng(12345);
  int killed = 0;
  for (int i = 0; i < victims; ++i) {
    const int mode = static_cast<int>(rng() % 6);
    const pid_t child = ::fork();
    if (child == 0) Victim(daemon.socket(), data.string(), mode);
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 60));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    killed += WIFSIGNALED(status);
  }
  job_a.join();
  job_b.join();
  EXPECT_FALSE(failed);
  EXPECT_EQ(killed, victims);

  // Everything the victims held comes back.
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok()) << "galleyd did not survive: " << client.status().ToString();
  nlohmann::json status;
  const auto give_up = std::chrono::steady_clock::now() + 60s;  // bounds a hang only
  while (std::chrono::steady_clock::now() < give_up) {
    status = nlohmann::json::parse(*client->Query("status"));
    // A victim's connection is closed when galleyd reads its end, which may
    // trail the jobs' removal on a loaded machine (or under ASan).
    if (status["jobs"] == 0 && CountRingMappings(daemon.pid()) == 0 &&
        CountOpenFds(daemon.pid()) <= fds_before + 1) {
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(status["jobs"], 0);
  EXPECT_EQ(status["shm_bytes"], 0);
  EXPECT_EQ(CountRingMappings(daemon.pid()), 0) << "a ring is still mapped";
  EXPECT_LE(CountOpenFds(daemon.pid()), fds_before + 1) << "descriptors leaked";  // + our query
  EXPECT_EQ(daemon.Stop(SIGTERM), 0);
  std::printf("kill test: %d clients killed, 2 jobs x %llu epochs exactly once\n", killed,
              static_cast<unsigned long long>(kEpochs));
}

}  // namespace
}  // namespace galley
