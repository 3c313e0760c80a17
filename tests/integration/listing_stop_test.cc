// A listing a hostile or departed client started never holds galleyd: a
// real galleyd, a manifest of 2 million lines (seconds of listing on any
// machine), and a client that waits for its job to open. SIGTERM while the
// listing runs ends galleyd cleanly, the listing stopped; a client killed
// while its listing runs frees the listing thread, and galleyd serves on.
// A one-line manifest far over the line limit is refused without galleyd
// holding the line.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "galley/client.h"
#include "tests/integration/galleyd_process.h"
#include "tests/integration/other_user.h"

namespace galley {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using testing::GalleydProcess;

class ListingStopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::permissions(tmp_.path(), fs::perms(0755));
    testing::WriteJpegFolder(tmp_.path() / "data", 1, 1);
    manifest_ = tmp_.path() / "data" / "big.txt";
    std::ofstream out(manifest_);
    const std::string line = "class0/000.jpg\t0\n";
    std::string chunk;
    for (int i = 0; i < 4096; ++i) chunk += line;
    for (int i = 0; i < kLines / 4096; ++i) out << chunk;
    out.close();
    fs::permissions(tmp_.path() / "data", fs::perms(0755));
    fs::permissions(manifest_, fs::perms(0644));
    fs::permissions(tmp_.path() / "data" / "class0", fs::perms(0755));
    fs::permissions(tmp_.path() / "data" / "class0" / "000.jpg", fs::perms(0644));
  }

  void Start() {
    GalleydProcess::Launch launch;
    launch.log = tmp_.path() / "galleyd.log";
    launch.quiet = false;  // the test reads the stopped listing's line
    daemon_ = std::make_unique<GalleydProcess>(
        tmp_.path() / "galleyd.sock",
        std::vector<std::string>{"--allowed-root", tmp_.path().string(), "--socket-mode", "0666"},
        launch);
    ASSERT_TRUE(daemon_->started());
  }

  std::string Log() const {
    std::ifstream in(tmp_.path() / "galleyd.log");
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  // The listings galleyd has under way (the "datasets" query's "indexing").
  nlohmann::json Indexing() const {
    ClientOptions options;
    options.socket_path = daemon_->socket();
    auto client = Client::Connect(options);
    if (!client.ok()) return nlohmann::json::array();
    auto text = client->Query("datasets");
    if (!text.ok()) return nlohmann::json::array();
    return nlohmann::json::parse(*text)["indexing"];
  }

  // Waits until the manifest's listing has read some lines (a bound on a
  // hang, not a measurement); false if it never showed.
  bool WaitForListing() const {
    for (int i = 0; i < 6000; ++i) {
      for (const auto& listing : Indexing()) {
        if (listing["done"].get<uint64_t>() > 0) return true;
      }
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  // A job on the manifest opened by a child as uid 65534; the child waits
  // for galleyd's answer.
  std::unique_ptr<testing::ChildAs> OpenInChild() const {
    const std::string socket = daemon_->socket();
    const std::string manifest = manifest_.string();
    return std::make_unique<testing::ChildAs>(
        testing::kNobodyUid, testing::kNobodyGid, std::vector<gid_t>{}, [socket, manifest]() {
          ClientOptions options;
          options.socket_path = socket;
          options.request_timeout = std::chrono::hours(1);
          auto client = Client::Connect(options);
          if (!client.ok()) return client.status();
          JobSpec spec;
          spec.dataset = manifest;
          spec.batch_size = 1;
          spec.transform_json = R"({"ops":[{"op":"Resize","size":[8,8]}]})";
          return client->OpenJob(spec).status();
        });
  }

  static constexpr int kLines = 2 << 20;
  testing::TempDir tmp_;
  fs::path manifest_;
  std::unique_ptr<GalleydProcess> daemon_;
};

TEST_F(ListingStopTest, SigtermWhileAListingRunsEndsGalleydAndStopsTheListing) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as a second user";
  Start();
  auto child = OpenInChild();
  ASSERT_TRUE(WaitForListing()) << Log();
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0) << Log();
  EXPECT_NE(
      Log().find("dataset " + manifest_.string() + ": listing stopped: galleyd is shutting down"),
      std::string::npos)
      << Log();
  // The child was told why, not left waiting.
  const testing::Outcome outcome = child->Report();
  EXPECT_NE(outcome.code, 0);
  EXPECT_NE(outcome.code, -1) << "the child was never answered";
}

TEST_F(ListingStopTest, AClientThatLeavesStopsItsListingAndGalleydServesOn) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as a second user";
  Start();
  auto child = OpenInChild();
  ASSERT_TRUE(WaitForListing()) << Log();
  child->Kill();
  // The listing ends once galleyd notices the closed connection.
  bool ended = false;
  for (int i = 0; i < 6000 && !ended; ++i) {
    ended = Indexing().empty();
    if (!ended) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(ended) << Log();
  EXPECT_NE(Log().find("dataset " + manifest_.string() +
                       ": listing stopped: the client that asked for it has gone"),
            std::string::npos)
      << Log();
  // Nothing was listed on the departed client's behalf, and galleyd serves.
  ClientOptions options;
  options.socket_path = daemon_->socket();
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto datasets = client->Query("datasets");
  ASSERT_TRUE(datasets.ok());
  EXPECT_TRUE(nlohmann::json::parse(*datasets)["datasets"].empty()) << *datasets;
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

TEST_F(ListingStopTest, AOneLineManifestFarOverTheLimitIsRefusedWithoutGalleydHoldingIt) {
  Start();
  const fs::path line = tmp_.path() / "data" / "one-line.csv";
  {
    std::ofstream out(line);
    out << "image,caption\nclass0/000.jpg,";
    const std::string chunk(1 << 20, 'x');
    for (int i = 0; i < 256; ++i) out << chunk;  // a 256 MiB cell
    out << "\n";
  }
  const uint64_t before = testing::ProcStatusKilobytes(daemon_->pid(), "VmHWM");
  ClientOptions options;
  options.socket_path = daemon_->socket();
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok());
  JobSpec spec;
  spec.dataset = line.string();
  spec.batch_size = 1;
  spec.transform_json = R"({"ops":[{"op":"Resize","size":[8,8]}]})";
  auto job = client->OpenJob(spec);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(job.status().message().find(line.string() +
                                        ":2: the line is longer than 1048576 bytes (galleyd's "
                                        "max_manifest_line_bytes)"),
            std::string::npos)
      << job.status().message();
  const uint64_t after = testing::ProcStatusKilobytes(daemon_->pid(), "VmHWM");
  ASSERT_GT(before, 0u);
  // The line is 256 MiB; galleyd may hold a chunk and the limit's worth.
  EXPECT_LT(after - before, uint64_t{32} << 10) << before << " kB -> " << after << " kB";
}

}  // namespace
}  // namespace galley
