// galleyd's configuration: every kind of error names its key and says what is
// accepted, the same for a flag as for the TOML file; sizes take units; flags
// override the file; a reload applies only the keys that may change.
#include "galley/daemon/daemon_options.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "galley/daemon/daemon.h"
#include "galley/daemon/job_manager.h"

namespace galley {
namespace {

namespace fs = std::filesystem;

class DaemonOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "galley_options_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    config_ = dir_ / "galleyd.toml";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // galleyd ARGS..., with an allowed root unless the test is about it.
  Result<LoadedOptions> Load(std::vector<std::string> args, bool add_root = true) {
    if (add_root) args.insert(args.begin(), {"--allowed-root", dir_.string()});
    args.insert(args.begin(), "galleyd");
    return LoadDaemonOptions(args);
  }
  // The config file holding `toml`, plus an allowed root.
  Result<LoadedOptions> LoadFile(const std::string& toml, std::vector<std::string> args = {}) {
    std::ofstream(config_) << toml;
    args.insert(args.begin(), {"--config", config_.string()});
    return Load(args);
  }
  // The error message for `toml`, or "" when it loads.
  std::string FileError(const std::string& toml) {
    auto loaded = LoadFile(toml);
    return loaded.ok() ? "" : loaded.status().message();
  }
  std::string FlagError(std::vector<std::string> args, bool add_root = true) {
    auto loaded = Load(std::move(args), add_root);
    return loaded.ok() ? "" : loaded.status().message();
  }
  std::string File(int line) {
    return " (config " + config_.string() + " line " + std::to_string(line) + "): ";
  }

  fs::path dir_, config_;
};

TEST(ParseSizeTest, SizesTakeBinaryAndDecimalUnits) {
  EXPECT_EQ(*ParseSize("8G"), uint64_t{8} << 30);
  EXPECT_EQ(*ParseSize("512M"), uint64_t{512} << 20);
  EXPECT_EQ(*ParseSize("1.5GiB"), uint64_t{3} << 29);
  EXPECT_EQ(*ParseSize("1048576"), uint64_t{1} << 20);
  EXPECT_EQ(*ParseSize("64k"), uint64_t{64} << 10);
  EXPECT_EQ(*ParseSize("2 TiB"), uint64_t{2} << 40);
  EXPECT_EQ(*ParseSize("10KB"), 10000u);
  EXPECT_EQ(*ParseSize("3gb"), 3000000000u);
  EXPECT_EQ(*ParseSize("100B"), 100u);
  EXPECT_EQ(*ParseSize("0"), 0u);
  for (const char* bad :
       {"", "G", "-1", "1.5", "8X", "1e3", "1..5G", "8 G B", "20000PiB", "18446744073709551616"}) {
    EXPECT_FALSE(ParseSize(bad).ok()) << bad;
  }
}

TEST_F(DaemonOptionsTest, SizesWorkInFlagsAndInTheFile) {
  auto flags = Load({"--cache-bytes", "8G", "--max-shm-per-job", "1.5GiB"});
  ASSERT_TRUE(flags.ok()) << flags.status().ToString();
  EXPECT_EQ(flags->options.cache_bytes, uint64_t{8} << 30);
  EXPECT_EQ(flags->options.max_shm_per_job, uint64_t{3} << 29);
  auto file = LoadFile(
      "cache_bytes = \"512M\"\nmax_shm_total = 1073741824\n"
      "tar_index_max_bytes = 2e9\n");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->options.cache_bytes, uint64_t{512} << 20);
  EXPECT_EQ(file->options.max_shm_total, uint64_t{1} << 30);
  EXPECT_EQ(file->options.tar_index_max_bytes, 2000000000u);
}

TEST_F(DaemonOptionsTest, FlagsOverrideTheFileAndEachKeyKnowsWhereItCameFrom) {
  auto loaded = LoadFile("max_jobs = 9\nlog_level = \"debug\"\nallowed_roots = [\"/srv\"]\n",
                         {"--max-jobs", "3"});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->options.max_jobs, 3u);
  EXPECT_EQ(loaded->options.log_level, "debug");
  // A repeated flag replaces the file's list rather than adding to it.
  EXPECT_EQ(loaded->options.allowed_roots, std::vector<std::string>{dir_.string()});
  EXPECT_EQ(loaded->sources.at("max_jobs"), OptionSource::kFlag);
  EXPECT_EQ(loaded->sources.at("log_level"), OptionSource::kFile);
  EXPECT_EQ(loaded->sources.at("cache_bytes"), OptionSource::kDefault);
}

// One test per kind of error; each message names the key, where its value
// came from, what was given and what is accepted, and the file and the flag
// say the same after the "(where)".
TEST_F(DaemonOptionsTest, AnUnknownKeyOrFlagIsAnErrorWithADidYouMean) {
  EXPECT_EQ(FileError("cache_byte = 5\n"),
            "cache_byte" + File(1) +
                "unknown key (did you mean 'cache_bytes'?); expected a key galleyd knows "
                "(galleyd --check-config lists them)");
  EXPECT_EQ(FileError("cache-bytes = 5\n")
                .rfind("cache-bytes" + File(1) + "unknown key (did you mean 'cache_bytes'?)", 0),
            0u);
  EXPECT_EQ(
      FileError("frobnicate = 5\n").rfind("frobnicate" + File(1) + "unknown key; expected", 0), 0u);
  EXPECT_EQ(
      FlagError({"--cache-byte", "5"}),
      "--cache-byte: unknown flag (did you mean '--cache-bytes'?); galleyd --help lists them");
}

TEST_F(DaemonOptionsTest, AValueOfTheWrongTypeNamesTheTypeAndWhatIsAccepted) {
  EXPECT_EQ(FileError("max_jobs = \"64\"\n"),
            "max_jobs" + File(1) + "got a string ('64'); expected an integer from 1 to 65536");
  EXPECT_EQ(FileError("owner_only = \"yes\"\n"),
            "owner_only" + File(1) + "got a string ('yes'); expected true or false");
  EXPECT_EQ(
      FileError("log_level = 3\n"),
      "log_level" + File(1) +
          "got an integer (3); expected one of trace, debug, info, warn, error, critical, off");
  EXPECT_EQ(FileError("allowed_roots = \"/data\"\n"),
            "allowed_roots" + File(1) +
                "got a string ('/data'); expected a list of absolute directory paths");
  EXPECT_EQ(FileError("cache_split = [\"a\"]\n")
                .rfind("cache_split" + File(1) + "got a list holding a string", 0),
            0u);
}

TEST_F(DaemonOptionsTest, CachePrefaultIsOnByDefaultAndTakesTrueOrFalse) {
  auto defaults = Load({});
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_TRUE(defaults->options.cache_prefault);
  auto personal = Load({"--owner-only"}, /*add_root=*/false);
  ASSERT_TRUE(personal.ok()) << personal.status().ToString();
  EXPECT_FALSE(personal->options.cache_prefault);
  auto off = Load({"--cache-prefault", "false"});
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->options.cache_prefault);
  auto file = LoadFile("cache_prefault = false\n", {"--cache-prefault=true"});
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_TRUE(file->options.cache_prefault);
  EXPECT_EQ(FileError("cache_prefault = \"no\"\n"),
            "cache_prefault" + File(1) + "got a string ('no'); expected true or false");
  EXPECT_EQ(
      FlagError({"--cache-prefault", "no"}).rfind("cache_prefault (flag --cache-prefault)", 0), 0u)
      << FlagError({"--cache-prefault", "no"});
}

TEST_F(DaemonOptionsTest, AChoiceOutsideItsListNamesTheChoices) {
  const std::string levels = "expected one of trace, debug, info, warn, error, critical, off";
  EXPECT_EQ(FileError("log_level = \"verbose\"\n"),
            "log_level" + File(1) + "got 'verbose'; " + levels);
  EXPECT_EQ(FlagError({"--log-level", "verbose"}),
            "log_level (flag --log-level): got 'verbose'; " + levels);
  EXPECT_EQ(FlagError({"--log-level", "warning"}),
            "log_level (flag --log-level): got 'warning' (did you mean 'warn'?); " + levels);
  // Policy names come from the sampler's own list.
  const std::string policies = "expected one of dsa, dsa-chain, independent, lockstep, ods";
  EXPECT_EQ(FileError("default_policy = \"bogus\"\n"),
            "default_policy" + File(1) + "got 'bogus'; " + policies);
  EXPECT_EQ(FlagError({"--default-policy", "DSA"}),
            "default_policy (flag --default-policy): got 'DSA' (did you mean 'dsa'?); " + policies);
  EXPECT_EQ(FlagError({"--default-policy", "sequential"}),
            "default_policy (flag --default-policy): got 'sequential'; " + policies);
  EXPECT_EQ(FlagError({"--cache-eviction", "fifo"}),
            "cache_eviction (flag --cache-eviction): got 'fifo'; expected one of refcount, lru");
}

TEST_F(DaemonOptionsTest, ADatasetPolicyMustBeAPolicyGalleydKnows) {
  const std::string expected =
      "; expected PATH=POLICY pairs (a TOML table \"PATH\" = \"POLICY\"), POLICY one of dsa, "
      "dsa-chain, independent, lockstep, ods";
  EXPECT_EQ(FileError("[dataset_policies]\n\"/data/a\" = \"shuffle\"\n"),
            "dataset_policies" + File(1) + "got policy 'shuffle' for /data/a" + expected);
  EXPECT_EQ(
      FlagError({"--dataset-policy", "/data/a=shuffle"}),
      "dataset_policies (flag --dataset-policy): got policy 'shuffle' for /data/a" + expected);
  EXPECT_EQ(FlagError({"--dataset-policy", "lockstep"}),
            "dataset_policies (flag --dataset-policy): got 'lockstep'" + expected);
  EXPECT_EQ(FileError("[dataset_policies]\n\"/data/a\" = 3\n"),
            "dataset_policies" + File(2) + "got an integer for /data/a" + expected);
}

TEST_F(DaemonOptionsTest, NumbersAndPortsOutOfRangeNameTheRange) {
  EXPECT_EQ(
      FileError("metrics_port = 70000\n"),
      "metrics_port" + File(1) + "got 70000; expected an integer from 0 to 65535 (0 = no metrics)");
  EXPECT_EQ(FlagError({"--metrics-port", "70000"}),
            "metrics_port (flag --metrics-port): got 70000; expected an integer from 0 to 65535 "
            "(0 = no metrics)");
  EXPECT_EQ(FlagError({"--max-jobs", "0"}),
            "max_jobs (flag --max-jobs): got 0; expected an integer from 1 to 65536");
  EXPECT_EQ(
      FileError("worker_threads = -2\n"),
      "worker_threads" + File(1) + "got -2; expected an integer from 0 to 1024 (0 = one per core)");
  EXPECT_EQ(
      FlagError({"--idle-exit", "-3"}),
      "idle_exit_seconds (flag --idle-exit): got -3; expected a number, 0 or more (0 = never)");
  EXPECT_EQ(
      FileError("storage_bytes_per_s = nan\n"),
      "storage_bytes_per_s" + File(1) + "got 'nan'; expected a number, 0 or more (0 = measure)");
}

TEST_F(DaemonOptionsTest, ABadSizeSaysWhichSizesAreAccepted) {
  const std::string expected =
      "; expected a size such as 8G, 512M, 1.5GiB or a number of bytes (0 disables the cache)";
  EXPECT_EQ(FlagError({"--cache-bytes", "8X"}),
            "cache_bytes (flag --cache-bytes): got '8X'" + expected);
  EXPECT_EQ(FileError("cache_bytes = \"8X\"\n"), "cache_bytes" + File(1) + "got '8X'" + expected);
  EXPECT_EQ(FlagError({"--max-shm-per-job", "0"}),
            "max_shm_per_job (flag --max-shm-per-job): got 0; expected a size such as 8G, 512M, "
            "1.5GiB or a number of bytes, at least 1");
}

TEST_F(DaemonOptionsTest, TheDiskTierTakesAnAbsoluteFolderAndABudgetOfAtLeastAMebibyte) {
  auto none = Load({});
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->options.disk_cache, "");
  EXPECT_EQ(none->options.disk_cache_bytes, uint64_t{16} << 30);
  auto file = LoadFile("disk_cache = \"/var/cache/galley/disk\"\ndisk_cache_bytes = \"800G\"\n");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->options.disk_cache, "/var/cache/galley/disk");
  EXPECT_EQ(file->options.disk_cache_bytes, uint64_t{800} << 30);
  EXPECT_EQ(FlagError({"--disk-cache", "cache/disk"}),
            "disk_cache (flag --disk-cache): got 'cache/disk'; expected an absolute folder path, "
            "or \"\" for none");
  EXPECT_EQ(FlagError({"--disk-cache-bytes", "1K"}),
            "disk_cache_bytes (flag --disk-cache-bytes): got '1K'; expected a size such as 8G, "
            "512M, 1.5GiB or a number of bytes, at least 1048576");
}

TEST_F(DaemonOptionsTest, PathsGroupsModesAndAddressesAreChecked) {
  EXPECT_EQ(FlagError({"--allowed-root", "data"}, /*add_root=*/false),
            "allowed_roots (flag --allowed-root): got 'data', not an absolute path; expected a "
            "list of absolute directory paths");
  EXPECT_EQ(FlagError({"--socket", "galleyd.sock"}),
            "socket (flag --socket): got 'galleyd.sock'; expected an absolute socket path of at "
            "most 107 bytes");
  EXPECT_EQ(FlagError({"--socket-group", "no-such-group-galley"}),
            "socket_group (flag --socket-group): got 'no-such-group-galley', a group this node "
            "does not have; expected the name of a group on this node, or \"\" for galleyd's own");
  const std::string mode = "; expected an octal mode such as \"0660\", at most 0777";
  EXPECT_EQ(FlagError({"--socket-mode", "0999"}),
            "socket_mode (flag --socket-mode): got 0999" + mode);
  EXPECT_EQ(FileError("socket_mode = \"01777\"\n"), "socket_mode" + File(1) + "got 01777" + mode);
  const std::string address =
      "; expected HOST:PORT, HOST an IPv4 address, [IPv6 address] or localhost, PORT 1..65535; "
      "or \"\" for none";
  EXPECT_EQ(FlagError({"--metrics-address", "example.com:80"}),
            "metrics_address (flag --metrics-address): got 'example.com:80'" + address);
  EXPECT_EQ(
      FlagError({"--metrics-address", "0.0.0.0"}),
      "metrics_address (flag --metrics-address): got '0.0.0.0', which has no :PORT" + address);
  EXPECT_EQ(FileError("metrics_address = \"127.0.0.1:0\"\n"),
            "metrics_address" + File(1) + "got '127.0.0.1:0'" + address);
}

TEST_F(DaemonOptionsTest, ModesAddressesAndGroupsParse) {
  auto octal = LoadFile("socket_mode = 0o640\n");
  ASSERT_TRUE(octal.ok()) << octal.status().ToString();
  EXPECT_EQ(octal->options.socket_mode, 0640u);
  auto text = Load({"--socket-mode", "600", "--metrics-address", "[::1]:9464"});
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(text->options.socket_mode, 0600u);
  EXPECT_EQ(text->options.metrics_host, "::1");
  EXPECT_EQ(text->options.metrics_port, 9464);
  auto local = Load({"--metrics-address", "localhost:9000"});
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->options.metrics_host, "127.0.0.1");
  // metrics_port alone keeps the loopback host; a flag's port replaces the
  // file address's port.
  auto port_only = Load({"--metrics-port", "9100"});
  ASSERT_TRUE(port_only.ok());
  EXPECT_EQ(port_only->options.metrics_host, "127.0.0.1");
  auto layered = LoadFile("metrics_address = \"0.0.0.0:9464\"\n", {"--metrics-port", "9100"});
  ASSERT_TRUE(layered.ok()) << layered.status().ToString();
  EXPECT_EQ(layered->options.metrics_host, "0.0.0.0");
  EXPECT_EQ(layered->options.metrics_port, 9100);
}

TEST_F(DaemonOptionsTest, MetricsPortAndAddressInOnePlaceMustAgree) {
  EXPECT_EQ(FlagError({"--metrics-address", "0.0.0.0:9464", "--metrics-port", "9100"}),
            "metrics_port (flag --metrics-port): got 9100, another port than metrics_address "
            "\"0.0.0.0:9464\" in the same place; expected only metrics_address = \"HOST:PORT\", "
            "which names the port too");
  EXPECT_EQ(FileError("metrics_address = \"0.0.0.0:9464\"\nmetrics_port = 9464\n"), "");
}

TEST_F(DaemonOptionsTest, CacheSplitNeedsThreeSharesAddingUpToAtMost100) {
  const std::string expected =
      "; expected three percentages E,D,A (encoded, decoded, augmented), each 0..100, adding up "
      "to at most 100; or none ([]) to let the planner choose";
  EXPECT_EQ(FlagError({"--cache-split", "60,50,0"}),
            "cache_split (flag --cache-split): got 60,50,0, which adds up to 110%" + expected);
  EXPECT_EQ(FileError("cache_split = [60, 50, 0]\n"),
            "cache_split" + File(1) + "got 60,50,0, which adds up to 110%" + expected);
  EXPECT_EQ(FlagError({"--cache-split", "60,40"}),
            "cache_split (flag --cache-split): got 60,40 (2 values)" + expected);
}

TEST_F(DaemonOptionsTest, ANodeWideDaemonNeedsAllowedRootsAndAPersonalOneDoesNot) {
  EXPECT_EQ(FlagError({}, /*add_root=*/false),
            "allowed_roots (default): none set; a node-wide galleyd needs at least one: set "
            "allowed_roots = [\"/data\", ...] in the config file or pass --allowed-root DIR "
            "(repeatable), or run a personal daemon with --owner-only");
  EXPECT_TRUE(Load({"--owner-only"}, /*add_root=*/false).ok());
}

TEST_F(DaemonOptionsTest, AFileThatIsNotTomlOrCannotBeReadIsAnError) {
  EXPECT_EQ(
      FileError("log_level = \n").rfind("config " + config_.string() + " line 1 column 13: ", 0),
      0u)
      << FileError("log_level = \n");
  EXPECT_EQ(
      FlagError({"--config", (dir_ / "missing.toml").string()}),
      "config " + (dir_ / "missing.toml").string() + ": cannot read it: No such file or directory");
}

TEST_F(DaemonOptionsTest, EveryErrorIsReportedNotJustTheFirst) {
  const std::string message = FileError("log_level = \"verbose\"\nmax_jobs = 0\nnope = 1\n");
  EXPECT_NE(message.find("log_level" + File(1)), std::string::npos) << message;
  EXPECT_NE(message.find("max_jobs" + File(2)), std::string::npos) << message;
  EXPECT_NE(message.find("nope" + File(3)), std::string::npos) << message;
}

TEST_F(DaemonOptionsTest, SocketDefaultsDependOnTheKindOfDaemon) {
  auto service = Load({});
  ASSERT_TRUE(service.ok());
  EXPECT_EQ(service->options.socket_mode, 0660u);
  auto personal = Load({"--owner-only"}, /*add_root=*/false);
  ASSERT_TRUE(personal.ok());
  EXPECT_EQ(personal->options.socket_mode, 0666u);
  EXPECT_EQ(personal->options.socket_group, "");
}

TEST_F(DaemonOptionsTest, AReloadTakesOnlyTheKeysThatMayChange) {
  auto running = Load({"--max-jobs", "8", "--cache-bytes", "1G", "--log-level", "info"});
  auto updated = Load({"--max-jobs", "4", "--cache-bytes", "2G", "--log-level", "debug",
                       "--default-policy", "lockstep", "--allowed-root", "/srv"});
  ASSERT_TRUE(running.ok() && updated.ok());
  const auto changes = DiffOptions(running->options, updated->options);
  std::map<std::string, OptionChange> by_key;
  for (const OptionChange& change : changes) by_key[change.key] = change;
  ASSERT_EQ(by_key.size(), 5u);
  EXPECT_TRUE(by_key["max_jobs"].reloadable);
  EXPECT_EQ(by_key["max_jobs"].before, "8");
  EXPECT_EQ(by_key["max_jobs"].after, "4");
  EXPECT_TRUE(by_key["log_level"].reloadable);
  EXPECT_TRUE(by_key["default_policy"].reloadable);
  EXPECT_TRUE(by_key["allowed_roots"].reloadable);
  EXPECT_FALSE(by_key["cache_bytes"].reloadable);
  EXPECT_EQ(by_key["cache_bytes"].after, "\"2GiB\"");

  const DaemonOptions applied = WithReloadableKeys(running->options, updated->options);
  EXPECT_EQ(applied.max_jobs, 4u);
  EXPECT_EQ(applied.log_level, "debug");
  EXPECT_EQ(applied.default_policy, "lockstep");
  EXPECT_EQ(applied.cache_bytes, uint64_t{1} << 30);  // needs a restart
}

#if GALLEY_REMOTE_TIER
TEST_F(DaemonOptionsTest, TheRemoteTierNeedsServersAndAPrivateCredentialsFile) {
  const fs::path credentials = dir_ / "remote.toml";
  const std::string user_and_password = "username = \"galley\"\npassword = \"pw\"\n";
  std::ofstream(credentials) << user_and_password << "mac_key = \"" << std::string(64, 'a')
                             << "\"\n";
  fs::permissions(credentials, fs::perms::owner_read | fs::perms::owner_write);
  auto loaded = LoadFile(
      "remote_cache_servers = [\"10.0.0.1:11211\", \"[::1]:11212\", "
      "\"cache-3.example:11211\"]\nremote_cache_credentials = \"" +
      credentials.string() + "\"\nremote_cache_form = \"decoded\"\n");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->options.remote_cache_servers,
            (std::vector<std::string>{"10.0.0.1:11211", "[::1]:11212", "cache-3.example:11211"}));
  EXPECT_EQ(loaded->options.remote_cache_form, "decoded");
  EXPECT_EQ(loaded->options.remote_cache_io_timeout_ms, 200u);

  EXPECT_EQ(FlagError({"--remote-cache-server", "10.0.0.1"}),
            "remote_cache_servers (flag --remote-cache-server): got '10.0.0.1'; expected a list "
            "of HOST:PORT, HOST a name, an IPv4 address or [IPv6 address]");
  EXPECT_EQ(FlagError({"--remote-cache-server", "::1:11211"}).substr(0, 66),
            "remote_cache_servers (flag --remote-cache-server): got '::1:11211'");
  EXPECT_EQ(FlagError({"--remote-cache-server", "10.0.0.1:11211"}).substr(0, 60),
            "remote_cache_credentials (default): none set; remote_cache_s");
  // No key to sign the values, or one too short to be a secret: galleyd
  // does not start, and says how to make one.
  const fs::path keyless = dir_ / "keyless.toml";
  std::ofstream(keyless) << user_and_password;
  fs::permissions(keyless, fs::perms::owner_read | fs::perms::owner_write);
  const std::string no_key = FlagError(
      {"--remote-cache-server", "10.0.0.1:11211", "--remote-cache-credentials", keyless.string()});
  EXPECT_NE(no_key.find("needs mac_key"), std::string::npos) << no_key;
  EXPECT_NE(no_key.find("openssl rand -hex 32"), std::string::npos) << no_key;
  std::ofstream(keyless) << user_and_password << "mac_key = \"" << std::string(62, 'a') << "\"\n";
  const std::string short_key = FlagError(
      {"--remote-cache-server", "10.0.0.1:11211", "--remote-cache-credentials", keyless.string()});
  EXPECT_NE(short_key.find("mac_key has 31 bytes, fewer than the 32 needed"), std::string::npos)
      << short_key;
  fs::permissions(credentials, fs::perms::group_read, fs::perm_options::add);
  const std::string exposed = FlagError({"--remote-cache-server", "10.0.0.1:11211",
                                         "--remote-cache-credentials", credentials.string()});
  EXPECT_NE(exposed.find("has mode 0640: group or others may access it"), std::string::npos)
      << exposed;
  EXPECT_NE(exposed.find("chmod 600 " + credentials.string()), std::string::npos) << exposed;
  EXPECT_EQ(FlagError({"--remote-cache-form", "pixels"}),
            "remote_cache_form (flag --remote-cache-form): got 'pixels'; expected one of auto, "
            "encoded, decoded");
}
#else
TEST_F(DaemonOptionsTest, AGalleydBuiltWithoutTheRemoteTierRefusesItsServers) {
  EXPECT_NE(FlagError({"--remote-cache-server", "10.0.0.1:11211"})
                .find("this galleyd was built without the remote cache tier"),
            std::string::npos);
}
#endif

TEST_F(DaemonOptionsTest, TheEffectiveConfigReadsBackAsTheSameOptions) {
  auto loaded = Load({"--cache-bytes",
                      "3G",
                      "--cache-split",
                      "10,20,30",
                      "--dataset-policy",
                      "/data/x=ods",
                      "--metrics-address",
                      "[::1]:9464",
                      "--socket-mode",
                      "0640",
                      "--storage-bytes-per-s",
                      "2.5e8",
                      "--idle-exit",
                      "0.5",
                      "--nic-bytes-per-s",
                      "1.25e9",
                      "--remote-cache-capacity-bytes",
                      "64G",
                      "--storage-throttle-bytes-per-s",
                      "5e7",
                      "--storage-throttle-file",
                      "/dev/shm/galley-bench-storage"});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  std::ofstream(config_) << RenderEffectiveConfig(*loaded);
  auto again = Load({"--config", config_.string()});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(DiffOptions(loaded->options, again->options).empty());
}

TEST_F(DaemonOptionsTest, TheShardDescriptorTotalDerivesFromTheDescriptorLimit) {
  auto derived = Load({});
  ASSERT_TRUE(derived.ok()) << derived.status().ToString();
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  const uint64_t soft = limit.rlim_cur == RLIM_INFINITY ? 1u << 30 : limit.rlim_cur;
  EXPECT_EQ(derived->options.max_open_shards_total, std::clamp<uint64_t>(soft / 4, 16, 4096));
  EXPECT_EQ(derived->sources.at("max_open_shards_total"), OptionSource::kDefault);

  auto flag = Load({"--max-open-shards-total", "300"});
  ASSERT_TRUE(flag.ok()) << flag.status().ToString();
  EXPECT_EQ(flag->options.max_open_shards_total, 300u);
  auto file = LoadFile("max_open_shards_total = 200\n");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->options.max_open_shards_total, 200u);
  EXPECT_EQ(FlagError({"--max-open-shards-total", "-1"}),
            "max_open_shards_total (flag --max-open-shards-total): got -1; expected an integer "
            "from 0 to 1048576 (0 = a quarter of RLIMIT_NOFILE, from 16 to 4096)");
  // Not reloadable: the cache is sized once.
  EXPECT_EQ(WithReloadableKeys(derived->options, flag->options).max_open_shards_total,
            derived->options.max_open_shards_total);
}

TEST_F(DaemonOptionsTest, ANodeWideDaemonGivesEachUserHalfOfTheJobsAndRings) {
  auto node = Load({"--max-jobs", "64", "--max-shm-total", "8G"});
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  const JobLimits shared = JobLimits::From(node->options);
  EXPECT_EQ(shared.max_jobs_per_uid, 32u);  // a sweep of 32 jobs still fits
  EXPECT_EQ(shared.max_shm_per_uid, uint64_t{4} << 30);
  EXPECT_EQ(shared.max_connections_per_uid, 40u);

  auto personal = Load({"--owner-only", "--max-jobs", "64", "--max-shm-total", "8G"}, false);
  ASSERT_TRUE(personal.ok()) << personal.status().ToString();
  const JobLimits own = JobLimits::From(personal->options);
  EXPECT_EQ(own.max_jobs_per_uid, 64u);
  EXPECT_EQ(own.max_shm_per_uid, uint64_t{8} << 30);

  auto set = Load({"--max-jobs", "64", "--max-jobs-per-uid", "50", "--max-shm-per-uid", "6G"});
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(JobLimits::From(set->options).max_jobs_per_uid, 50u);
  EXPECT_EQ(JobLimits::From(set->options).max_shm_per_uid, uint64_t{6} << 30);

  auto one = Load({"--max-jobs", "1"});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(JobLimits::From(one->options).max_jobs_per_uid, 1u);  // never 0
}

// galleyd's options set the scheduler's seed, gate times, drawing-ahead
// bound and rule (--draw-ahead-batches, --draw-across-epochs); its defaults
// are the scheduler's own, which the drift simulations use.
TEST(SchedulerOptionsForTest, TheSchedulerFollowsTheDaemonOptions) {
  const SchedulerOptions defaults = SchedulerOptionsFor(DaemonOptions{});
  EXPECT_EQ(defaults.draw_ahead_batches, SchedulerOptions{}.draw_ahead_batches);
  EXPECT_EQ(defaults.draw_across_epochs, SchedulerOptions{}.draw_across_epochs);
  EXPECT_EQ(defaults.draw_ahead_batches, 64u);
  EXPECT_TRUE(defaults.draw_across_epochs);
  EXPECT_EQ(defaults.stream_salt, 0u);
  DaemonOptions set;
  set.sampler_seed = 17;
  set.hold_budget_ms = 250;
  set.thin_hold_ms = 20;
  set.peer_stall_ms = 3000;
  set.draw_ahead_batches = 0;
  set.draw_across_epochs = false;
  const SchedulerOptions o = SchedulerOptionsFor(set);
  EXPECT_EQ(o.sampler_seed, 17u);
  EXPECT_EQ(o.gate.hold_budget_per_epoch, std::chrono::milliseconds(250));
  EXPECT_EQ(o.gate.thin_hold, std::chrono::milliseconds(20));
  EXPECT_EQ(o.gate.peer_stall, std::chrono::milliseconds(3000));
  EXPECT_EQ(o.draw_ahead_batches, 0u);
  EXPECT_FALSE(o.draw_across_epochs);
}

}  // namespace
}  // namespace galley
