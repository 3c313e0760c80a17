// galleyd's configuration and lifecycle. On the real process: --check-config
// and config errors at start (what galleyd prints and its exit code), and
// systemd readiness and SIGHUP on a NOTIFY_SOCKET the test binds. On a
// daemon built in the test's process: the socket's group and mode, and
// reloads of the config file (what SIGHUP does) with jobs running.
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "galley/client.h"
#include "galley/unique_fd.h"
#include "tests/integration/galleyd_process.h"
#include "tests/integration/in_process_daemon.h"

namespace galley {
namespace {

using namespace std::chrono_literals;
using testing::GalleydProcess;
using testing::RunGalleydForOutput;
using testing::TempDir;

namespace fs = std::filesystem;

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// "VALUE # NOTE" from the line "KEY = VALUE   # NOTE" of --check-config's
// output, or "".
std::string Entry(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(key + " = ", 0) != 0) continue;
    const size_t hash = line.rfind("  # ");
    if (hash == std::string::npos) return "";
    std::string value = line.substr(key.size() + 3, hash - key.size() - 3);
    value.erase(value.find_last_not_of(' ') + 1);
    return value + " # " + line.substr(hash + 4);
  }
  return "";
}

constexpr const char* kSmallTransform = R"({"ops":[{"op":"Resize","size":[16,16]}]})";

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = tmp_.path() / "data";
    testing::WriteJpegFolder(data_, 3, 10);
    config_ = tmp_.path() / "galleyd.toml";
    log_ = tmp_.path() / "galleyd.log";
    socket_ = tmp_.path() / "galleyd.sock";
  }

  JobSpec Spec(uint64_t epochs) const {
    JobSpec spec;
    spec.dataset = data_.string();
    spec.batch_size = 4;
    spec.prefetch = 2;
    spec.epochs = epochs;
    spec.transform_json = kSmallTransform;
    return spec;
  }

  Result<Client> Connect() const {
    ClientOptions options;
    options.socket_path = socket_.string();
    return Client::Connect(options);
  }

  nlohmann::json Query(const std::string& what) {
    auto client = Connect();
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    if (!client.ok()) return {};
    auto text = client->Query(what);
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json{};
  }

  // The config a reload test starts from, with `extra` lines appended.
  std::string Config(const std::string& log_level, const std::string& extra = "") const {
    return "allowed_roots = [\"" + tmp_.path().string() + "\"]\nlog_level = \"" + log_level +
           "\"\ncache_bytes = \"64M\"\n" + extra;
  }

  // galleyd's command line with the config file, which decides the log
  // level; ReloadConfigFile reads the file again under it, as SIGHUP does.
  std::vector<std::string> ConfigCommandLine() const {
    return testing::DaemonCommandLine(socket_, {"--config", config_.string()}, /*quiet=*/false);
  }

  // A daemon in this process with the config file.
  std::unique_ptr<Daemon> StartInProcessWithConfig() {
    auto daemon = testing::StartDaemon(ConfigCommandLine());
    EXPECT_TRUE(daemon.ok()) << daemon.status().ToString() << "\n" << captured_.Text();
    return daemon.ok() ? std::move(daemon).value() : nullptr;
  }

  // The real galleyd with the config file, its log in log_.
  std::unique_ptr<GalleydProcess> StartWithConfig(std::vector<std::string> env = {}) {
    GalleydProcess::Launch launch;
    launch.env = std::move(env);
    launch.log = log_;
    launch.quiet = false;  // the file decides the log level
    auto daemon = std::make_unique<GalleydProcess>(
        socket_, std::vector<std::string>{"--config", config_.string()}, launch);
    EXPECT_TRUE(daemon->started()) << ReadFile(log_);
    return daemon;
  }

  // Before any daemon of a test, so that it outlives them.
  testing::CapturedLog captured_;
  TempDir tmp_;
  fs::path data_, config_, log_, socket_;
};

TEST_F(ConfigTest, CheckConfigPrintsEveryKeyItsValueAndWhereItCameFrom) {
  WriteFile(config_, "allowed_roots = [\"" + tmp_.path().string() +
                         "\"]\ncache_bytes = \"512M\"\nmetrics_address = \"0.0.0.0:9464\"\n");
  const auto run = RunGalleydForOutput(
      {"--check-config", "--config", config_.string(), "--max-jobs", "7", "--cache-bytes", "8G"});
  ASSERT_EQ(run.code, 0) << run.err;
  // Flags win over the file, which wins over defaults; each line says which.
  EXPECT_EQ(Entry(run.out, "cache_bytes"), "\"8GiB\" # flag --cache-bytes") << run.out;
  EXPECT_EQ(Entry(run.out, "max_jobs"), "7 # flag --max-jobs; SIGHUP reloads");
  EXPECT_EQ(Entry(run.out, "allowed_roots"),
            "[\"" + tmp_.path().string() + "\"] # config " + config_.string() + "; SIGHUP reloads");
  EXPECT_EQ(Entry(run.out, "metrics_address"), "\"0.0.0.0:9464\" # config " + config_.string());
  EXPECT_EQ(Entry(run.out, "metrics_port"), "9464 # metrics_address");
  EXPECT_EQ(Entry(run.out, "log_level"), "\"info\" # default; SIGHUP reloads");
  EXPECT_EQ(Entry(run.out, "socket_mode"), "\"0660\" # default");
  // Every key galleyd takes, none missing (docs/operations.md lists the same).
  for (const char* key : {"socket",
                          "socket_group",
                          "socket_mode",
                          "allowed_roots",
                          "cache_bytes",
                          "cache_eviction",
                          "cache_split",
                          "storage_bytes_per_s",
                          "decode_per_core_per_s",
                          "augment_per_core_per_s",
                          "memory_bytes_per_s",
                          "cores",
                          "worker_threads",
                          "sampler_seed",
                          "default_policy",
                          "dataset_policies",
                          "tar_index_dir",
                          "tar_index_max_bytes",
                          "max_open_shards",
                          "max_open_shards_total",
                          "hold_budget_ms",
                          "thin_hold_ms",
                          "peer_stall_ms",
                          "draw_ahead_batches",
                          "draw_across_epochs",
                          "max_jobs",
                          "max_jobs_per_uid",
                          "max_connections_per_uid",
                          "max_shm_per_job",
                          "max_shm_total",
                          "max_shm_per_uid",
                          "max_prefetch",
                          "max_batch_size",
                          "max_image_pixels",
                          "metrics_address",
                          "metrics_port",
                          "log_level",
                          "log_file",
                          "owner_only",
                          "idle_exit_seconds"}) {
    EXPECT_NE(Entry(run.out, key), "") << key;
  }
  // The output is itself a config galleyd accepts, and it says the same.
  const fs::path printed = tmp_.path() / "printed.toml";
  WriteFile(printed, run.out);
  const auto again = RunGalleydForOutput({"--check-config", "--config", printed.string()});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(Entry(again.out, "cache_bytes"), "\"8GiB\" # config " + printed.string());
}

TEST_F(ConfigTest, CheckConfigListsEveryErrorEachNamingItsKeyAndExitsNonzero) {
  WriteFile(config_, "allowed_roots = [\"" + tmp_.path().string() +
                         "\"]\ncache_byte = \"8G\"\nlog_level = \"verbose\"\nmetrics_port = 70000\n"
                         "default_policy = \"bogus\"\n");
  const auto run = RunGalleydForOutput(
      {"--check-config", "--config", config_.string(), "--cache-bytes", "lots"});
  EXPECT_EQ(run.code, 2);
  EXPECT_EQ(run.out, "");
  const std::string file = " (config " + config_.string() + " line ";
  EXPECT_NE(run.err.find("galleyd: cache_byte" + file +
                         "2): unknown key (did you mean "
                         "'cache_bytes'?)"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("galleyd: log_level" + file +
                         "3): got 'verbose'; expected one of trace, debug, info, warn, error, "
                         "critical, off"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("galleyd: metrics_port" + file +
                         "4): got 70000; expected an integer from 0 to 65535"),
            std::string::npos);
  EXPECT_NE(run.err.find("galleyd: default_policy" + file +
                         "5): got 'bogus'; expected one of "
                         "dsa, dsa-chain, independent, "
                         "lockstep, ods"),
            std::string::npos);
  EXPECT_NE(run.err.find("galleyd: cache_bytes (flag --cache-bytes): got 'lots'; expected a size "
                         "such as 8G, 512M, 1.5GiB or a number of bytes"),
            std::string::npos);
}

TEST_F(ConfigTest, ABadValueStopsTheDaemonFromStartingWithTheSameMessage) {
  const auto run = RunGalleydForOutput({"--socket", socket_.string(), "--allowed-root",
                                        tmp_.path().string(), "--log-level", "verbose"});
  EXPECT_EQ(run.code, 2);
  EXPECT_NE(run.err.find("galleyd: log_level (flag --log-level): got 'verbose'; expected one of "
                         "trace, debug, info, warn, error, critical, off"),
            std::string::npos)
      << run.err;
  EXPECT_FALSE(fs::exists(socket_));
}

TEST_F(ConfigTest, ANodeWideDaemonWithoutAllowedRootsRefusesToStartAndSaysWhatToSet) {
  const auto run = RunGalleydForOutput({"--socket", socket_.string()});
  EXPECT_EQ(run.code, 2);
  EXPECT_NE(run.err.find("allowed_roots (default): none set; a node-wide galleyd needs at least "
                         "one: set allowed_roots = [\"/data\", ...] in the config file or pass "
                         "--allowed-root DIR (repeatable), or run a personal daemon with "
                         "--owner-only"),
            std::string::npos)
      << run.err;
  EXPECT_FALSE(fs::exists(socket_));
  // A personal daemon needs none.
  auto personal = testing::StartDaemon(
      testing::DaemonCommandLine(socket_, {"--owner-only", "--cache-bytes", "0"}));
  EXPECT_TRUE(personal.ok()) << personal.status().ToString();
}

mode_t SocketMode(const fs::path& path, gid_t* group = nullptr) {
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0);
  if (group != nullptr) *group = info.st_gid;
  return info.st_mode & 07777;
}

TEST_F(ConfigTest, TheSocketGetsTheConfiguredGroupAndMode) {
  const auto start = [this](const std::vector<std::string>& flags) {
    auto daemon = testing::StartDaemon(testing::DaemonCommandLine(socket_, flags));
    EXPECT_TRUE(daemon.ok()) << daemon.status().ToString();
    return daemon.ok() ? std::move(daemon).value() : nullptr;
  };
  {
    // A node-wide service: 0660 unless told otherwise (group `galley` when
    // the node has one).
    auto daemon = start({"--allowed-root", tmp_.path().string(), "--cache-bytes", "0"});
    ASSERT_NE(daemon, nullptr);
    gid_t group = 0;
    EXPECT_EQ(SocketMode(socket_, &group), 0660u);
    const struct group* galley = ::getgrnam("galley");
    EXPECT_EQ(group, galley != nullptr ? galley->gr_gid : ::getegid());
  }
  {
    // A personal daemon keeps 0666: its peer check answers other users.
    auto daemon = start({"--owner-only", "--cache-bytes", "0"});
    ASSERT_NE(daemon, nullptr);
    EXPECT_EQ(SocketMode(socket_), 0666u);
  }
  {
    // A group galleyd belongs to, and a mode, named by the admin.
    const struct group* own = ::getgrgid(::getegid());
    ASSERT_NE(own, nullptr);
    const std::string group_name = own->gr_name;
    auto daemon = start({"--allowed-root", tmp_.path().string(), "--cache-bytes", "0",
                         "--socket-group", group_name, "--socket-mode", "0600"});
    ASSERT_NE(daemon, nullptr);
    gid_t group = 0;
    EXPECT_EQ(SocketMode(socket_, &group), 0600u);
    EXPECT_EQ(group, own->gr_gid);
  }
  const auto run =
      RunGalleydForOutput({"--socket", socket_.string(), "--allowed-root", tmp_.path().string(),
                           "--socket-group", "no-such-group-galley"});
  EXPECT_EQ(run.code, 2);
  EXPECT_NE(run.err.find("socket_group (flag --socket-group): got 'no-such-group-galley', a group "
                         "this node does not have"),
            std::string::npos)
      << run.err;
}

// Reads `job` to its end; false on any error. Collects each epoch's items.
bool ReadAll(Job& job, std::vector<std::multiset<uint64_t>>* epochs, std::string* error) {
  while (true) {
    auto batch = job.Next(20s);
    if (batch.status().code() == StatusCode::kEndOfStream) return true;
    if (!batch.ok()) {
      *error = batch.status().ToString();
      return false;
    }
    if (epochs->size() <= batch->epoch()) epochs->resize(batch->epoch() + 1);
    for (size_t i = 0; i < batch->size(); ++i)
      (*epochs)[batch->epoch()].insert(batch->item_ids()[i]);
  }
}

void ExpectExactlyOncePerEpoch(const std::vector<std::multiset<uint64_t>>& epochs,
                               size_t expected_epochs, size_t items) {
  ASSERT_EQ(epochs.size(), expected_epochs);
  for (size_t e = 0; e < epochs.size(); ++e) {
    EXPECT_EQ(epochs[e].size(), items) << "epoch " << e;
    EXPECT_EQ(std::set<uint64_t>(epochs[e].begin(), epochs[e].end()).size(), items)
        << "epoch " << e;
  }
}

TEST_F(ConfigTest, AReloadChangesTheLogLevelAndLimitsWhileTwoJobsRunAndLosesNoBatch) {
  // The user's share is set, not derived (half of max_jobs): the three
  // jobs below stay within it before and after the reload.
  WriteFile(config_, Config("warn", "max_jobs = 8\nmax_jobs_per_uid = 8\n"));
  auto daemon = StartInProcessWithConfig();
  ASSERT_NE(daemon, nullptr);
  auto client = Connect();
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  constexpr uint64_t kEpochs = 3;
  auto first = client->OpenJob(Spec(kEpochs));
  auto second = client->OpenJob(Spec(kEpochs));
  ASSERT_TRUE(first.ok() && second.ok());
  // Both jobs are mid-epoch when the signal comes.
  std::vector<std::multiset<uint64_t>> first_epochs(1), second_epochs(1);
  for (int i = 0; i < 3; ++i) {
    for (auto [job, epochs] : {std::pair{&*first, &first_epochs}, {&*second, &second_epochs}}) {
      auto batch = job->Next(20s);
      ASSERT_TRUE(batch.ok()) << batch.status().ToString();
      for (size_t k = 0; k < batch->size(); ++k) (*epochs)[0].insert(batch->item_ids()[k]);
    }
  }
  EXPECT_EQ(captured_.Text().find("wave decisions"), std::string::npos);  // trace is off

  WriteFile(config_, Config("trace",
                            "max_jobs = 5\nmax_jobs_per_uid = 8\ndefault_policy = \"independent\"\n"
                            "worker_threads = 1\n"));
  ASSERT_TRUE(ReloadConfigFile(ConfigCommandLine(), daemon.get()).ok()) << captured_.Text();
  const std::string report = captured_.Text();
  EXPECT_NE(report.find("reload: log_level \"warn\" -> \"trace\""), std::string::npos) << report;
  EXPECT_NE(report.find("reload: max_jobs 8 -> 5"), std::string::npos);
  EXPECT_NE(report.find("reload: default_policy \"dsa\" -> \"independent\""), std::string::npos);
  EXPECT_NE(report.find("reload: worker_threads changed (0 -> 1) but needs a restart; still 0"),
            std::string::npos);

  // Both jobs finish every epoch with every item exactly once...
  std::string error;
  ASSERT_TRUE(ReadAll(*first, &first_epochs, &error)) << error;
  ASSERT_TRUE(ReadAll(*second, &second_epochs, &error)) << error;
  ExpectExactlyOncePerEpoch(first_epochs, kEpochs, 30);
  ExpectExactlyOncePerEpoch(second_epochs, kEpochs, 30);
  // ... and the new level is in force: trace lines appear after the reload.
  const std::string log = captured_.Text();
  EXPECT_NE(log.find("wave decisions", log.find("reload: log_level")), std::string::npos);

  // The daemon goes on serving, under the new limits and default policy.
  EXPECT_EQ(Query("status")["limits"]["max_jobs"].get<uint32_t>(), 5u);
  auto third = client->OpenJob(Spec(1));
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(Query("jobs")["jobs"].back()["policy"], "independent");
  std::vector<std::multiset<uint64_t>> third_epochs;
  ASSERT_TRUE(ReadAll(*third, &third_epochs, &error)) << error;
  ExpectExactlyOncePerEpoch(third_epochs, 1, 30);
  EXPECT_TRUE(Connect().ok());
}

TEST_F(ConfigTest, ABadFileOnReloadChangesNothingAndSaysWhy) {
  WriteFile(config_, Config("warn", "max_jobs = 8\n"));
  auto daemon = StartInProcessWithConfig();
  ASSERT_NE(daemon, nullptr);
  auto client = Connect();
  ASSERT_TRUE(client.ok());
  auto job = client->OpenJob(Spec(2));
  ASSERT_TRUE(job.ok());

  // A good key next to bad ones: the file is taken whole or not at all.
  WriteFile(config_, Config("verbose", "max_jobs = 2\nmax_job = 3\n"));
  const Status reloaded = ReloadConfigFile(ConfigCommandLine(), daemon.get());
  EXPECT_EQ(reloaded.code(), StatusCode::kInvalidArgument) << reloaded.ToString();
  const std::string log = captured_.Text();
  ASSERT_NE(log.find("reload: the configuration has errors, nothing changed"), std::string::npos)
      << log;
  EXPECT_NE(log.find("reload: log_level (config " + config_.string() +
                     " line 2): got 'verbose'; expected one of"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("reload: max_job (config " + config_.string() +
                     " line 5): unknown key (did you mean 'max_jobs'?)"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("reload: max_jobs"), std::string::npos);
  EXPECT_EQ(Query("status")["limits"]["max_jobs"].get<uint32_t>(), 8u);

  std::vector<std::multiset<uint64_t>> epochs(1);
  std::string error;
  ASSERT_TRUE(ReadAll(*job, &epochs, &error)) << error;
  ExpectExactlyOncePerEpoch(epochs, 2, 30);
  auto another = client->OpenJob(Spec(1));
  EXPECT_TRUE(another.ok()) << another.status().ToString();
}

TEST_F(ConfigTest, NarrowedAllowedRootsRefuseNewJobsAndKeepRunningOnes) {
  const fs::path other = tmp_.path() / "other";
  fs::create_directories(other);
  WriteFile(config_, Config("warn"));
  auto daemon = StartInProcessWithConfig();
  ASSERT_NE(daemon, nullptr);
  auto client = Connect();
  ASSERT_TRUE(client.ok());
  auto running = client->OpenJob(Spec(2));
  ASSERT_TRUE(running.ok());

  WriteFile(config_, "allowed_roots = [\"" + other.string() + "\"]\nlog_level = \"info\"\n" +
                         "cache_bytes = \"64M\"\n");
  ASSERT_TRUE(ReloadConfigFile(ConfigCommandLine(), daemon.get()).ok()) << captured_.Text();
  EXPECT_NE(captured_.Text().find("reload: allowed_roots"), std::string::npos) << captured_.Text();
  auto refused = client->OpenJob(Spec(1));
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("not under an allowed root"), std::string::npos);

  std::vector<std::multiset<uint64_t>> epochs;
  std::string error;
  ASSERT_TRUE(ReadAll(*running, &epochs, &error)) << error;
  ExpectExactlyOncePerEpoch(epochs, 2, 30);
}

// A datagram socket standing in for systemd's NOTIFY_SOCKET.
class NotifyListener {
 public:
  // `name` is a path, or "@name" for an abstract socket.
  explicit NotifyListener(const std::string& name) : name_(name) {
    fd_.Reset(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, name.data(), name.size());
    if (name[0] == '@') addr.sun_path[0] = '\0';
    const socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() +
                                                    (name[0] == '@' ? 0 : 1));
    bound_ = ::bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), length) == 0;
    const timeval timeout{10, 0};
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  bool bound() const { return bound_; }
  std::string env() const { return "NOTIFY_SOCKET=" + name_; }
  // The next datagram, or "" after 10 s.
  std::string Receive() {
    char buffer[4096];
    const ssize_t n = ::recv(fd_.get(), buffer, sizeof(buffer), 0);
    return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "";
  }

 private:
  std::string name_;
  UniqueFd fd_;
  bool bound_ = false;
};

TEST_F(ConfigTest, SystemdHearsReadyReloadingAndStopping) {
  NotifyListener listener((tmp_.path() / "notify.sock").string());
  ASSERT_TRUE(listener.bound());
  WriteFile(config_, Config("warn"));
  auto daemon = StartWithConfig({listener.env()});
  ASSERT_TRUE(daemon->started());
  const std::string ready = listener.Receive();
  EXPECT_EQ(ready.rfind("READY=1\n", 0), 0u) << ready;
  // By READY=1 the socket is served.
  EXPECT_EQ(Query("status")["jobs"].get<int>(), 0);

  ASSERT_EQ(::kill(daemon->pid(), SIGHUP), 0);
  const std::string reloading = listener.Receive();
  EXPECT_EQ(reloading.rfind("RELOADING=1\nMONOTONIC_USEC=", 0), 0u) << reloading;
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const uint64_t usec = std::stoull(reloading.substr(reloading.find('=', 12) + 1));
  EXPECT_LE(usec, static_cast<uint64_t>(now.tv_sec) * 1000000 + now.tv_nsec / 1000);
  EXPECT_EQ(listener.Receive().rfind("READY=1", 0), 0u);

  EXPECT_EQ(daemon->Stop(SIGTERM), 0) << ReadFile(log_);
  EXPECT_EQ(listener.Receive(), "STOPPING=1");
}

TEST_F(ConfigTest, ReadyArrivesOnAnAbstractNotifySocket) {
  const std::string name = "@galley-test-notify-" + std::to_string(::getpid());
  NotifyListener listener(name);
  ASSERT_TRUE(listener.bound());
  WriteFile(config_, Config("warn"));
  auto daemon = StartWithConfig({listener.env()});
  ASSERT_TRUE(daemon->started());
  EXPECT_EQ(listener.Receive().rfind("READY=1\n", 0), 0u);
}

}  // namespace
}  // namespace galley
