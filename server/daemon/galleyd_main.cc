// galleyd: the per-node daemon. See README.md and docs/operations.md.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "galley/cache/tiered_cache.h"
#include "galley/errno_text.h"
#include "galley/random.h"
#include "server/daemon/batch_ring.h"
#include "server/daemon/cache_planner.h"
#include "server/daemon/control_server.h"
#include "server/daemon/daemon_options.h"
#include "server/daemon/item_pipeline.h"
#include "server/daemon/memory_setup.h"
#include "server/daemon/metrics_server.h"
#include "server/daemon/node_probe.h"
#include "server/daemon/prometheus_text.h"
#include "server/daemon/remote_credentials.h"
#if GALLEY_REMOTE_TIER
#include "server/daemon/remote_tier.h"
#endif
#include "server/daemon/scheduler.h"
#include "server/daemon/storage_throttle.h"
#include "server/daemon/systemd_notify.h"
#include "server/dataset/descriptor_exhaustion.h"

namespace {

enum class Wake { kStop, kIdleExit, kReload };

// Signals reach the main loop through a pipe written by a handler. sigwait
// alone is not enough: a library may start a thread before main() blocks
// the signals (OpenCV's OpenBLAS does), and the kernel may deliver a
// process-directed signal to that thread, whose default action would end
// the daemon without a clean shutdown. With a handler installed, whichever
// thread takes the signal only writes its number here.
int signal_pipe[2] = {-1, -1};

extern "C" void OnSignal(int signal_number) {
  const int saved_errno = errno;
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  (void)!::write(signal_pipe[1], &byte, 1);
  errno = saved_errno;
}

// 64 bits that differ on every start of every daemon: the kernel's entropy,
// or, should getrandom fail, the clock and the pid mixed.
uint64_t StartEntropy() {
  uint64_t word = 0;
  if (::getrandom(&word, sizeof word, 0) == static_cast<ssize_t>(sizeof word)) return word;
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return galley::SplitMix64(static_cast<uint64_t>(now) ^ (uint64_t(::getpid()) << 32));
}

// The next signal number OnSignal saw, or 0 after `timeout_ms` (-1: wait).
int NextSignal(int timeout_ms) {
  pollfd ready{signal_pipe[0], POLLIN, 0};
  if (::poll(&ready, 1, timeout_ms) <= 0) return 0;  // timeout, or EINTR: the byte waits
  unsigned char byte = 0;
  return ::read(signal_pipe[0], &byte, 1) == 1 ? byte : 0;
}

// Blocks until SIGTERM/SIGINT (kStop) or SIGHUP (kReload), or, with
// idle_exit_seconds > 0, until no job has been open for that long.
Wake WaitForSignalOrIdleExit(double idle_exit_seconds, const galley::ControlServer& server) {
  using Clock = std::chrono::steady_clock;
  const auto idle_limit = std::chrono::duration<double>(idle_exit_seconds);
  auto idle_since = Clock::now();
  while (true) {
    const int signal_number = NextSignal(idle_exit_seconds > 0 ? 200 : -1);
    if (signal_number == SIGHUP) return Wake::kReload;
    if (signal_number != 0) {
      spdlog::info("received signal {}, shutting down", signal_number);
      return Wake::kStop;
    }
    if (idle_exit_seconds <= 0) continue;
    if (server.open_jobs() > 0) {
      idle_since = Clock::now();
    } else if (Clock::now() - idle_since >= idle_limit) {
      return Wake::kIdleExit;
    }
  }
}

// Config errors come one per line, each naming its key.
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t begin = 0; begin <= text.size();) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

// SIGHUP: reads the config file again with the flags given at start (which
// keep their precedence), checks it whole, and applies the keys that can
// change without dropping a job. A bad file changes nothing.
void Reload(int argc, char** argv, galley::DaemonOptions* running, galley::ControlServer* server) {
  using namespace galley;
  (void)NotifyServiceManager(ReloadingMessage());
  auto loaded = LoadDaemonOptions(argc, argv);
  if (!loaded.ok()) {
    for (const std::string& line : Lines(loaded.status().message())) {
      spdlog::error("reload: {}", line);
    }
    spdlog::error("reload: the configuration has errors, nothing changed");
  } else if (loaded->config_path.empty()) {
    spdlog::warn("reload: galleyd was started without --config, there is no file to re-read");
  } else {
    const DaemonOptions applied = WithReloadableKeys(*running, loaded->options);
    if (Status s = server->Reload(applied); !s.ok()) {
      spdlog::error("reload: {}; nothing changed", s.ToString());
    } else {
      // The report is logged at the more verbose of the two levels, so a
      // change of log_level itself is seen either way.
      const auto level = spdlog::level::from_str(applied.log_level);
      spdlog::set_level(std::min(level, spdlog::get_level()));
      const auto changes = DiffOptions(*running, loaded->options);
      for (const OptionChange& change : changes) {
        if (change.reloadable) {
          spdlog::info("reload: {} {} -> {}", change.key, change.before, change.after);
        } else {
          spdlog::warn("reload: {} changed ({} -> {}) but needs a restart; still {}", change.key,
                       change.before, change.after, change.before);
        }
      }
      for (const std::string& warning : loaded->warnings) spdlog::warn("{}", warning);
      if (changes.empty()) spdlog::info("reload: {} changes nothing", loaded->config_path);
      spdlog::set_level(level);
      *running = applied;
    }
  }
  (void)NotifyServiceManager(ReadyMessage("serving"));
}

// --log-file: stdout and stderr both append to the file from here on, so
// that what galleyd and its libraries print lands beside the log lines.
bool RedirectOutput(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) {
    std::fprintf(stderr, "galleyd: log_file %s: %s\n", path.c_str(),
                 galley::ErrnoText(errno).c_str());
    return false;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(fd, STDOUT_FILENO);
  ::dup2(fd, STDERR_FILENO);
  ::close(fd);
  return true;
}

// Closes every descriptor above stderr but keep: a detached daemon must not
// hold what its caller happened to leave open (a pipe the caller reads to
// the end, a lock, a socket). /proc/self/fd rather than close_range(2),
// which older C libraries do not declare.
void CloseInheritedDescriptors(int keep) {
  DIR* listing = ::opendir("/proc/self/fd");
  if (listing == nullptr) return;
  std::vector<int> inherited;
  while (const dirent* entry = ::readdir(listing)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    if (fd > STDERR_FILENO && fd != keep && fd != ::dirfd(listing)) {
      inherited.push_back(static_cast<int>(fd));
    }
  }
  ::closedir(listing);
  for (int fd : inherited) ::close(fd);
}

// --detach: forks into a new session and a grandchild whose parent is init,
// before any thread exists. The original process waits on a pipe and exits 0
// when the grandchild reports that it serves the socket, 1 if it dies first
// (naming the log file, where the reason went with --log-file). The grandchild keeps
// stdin as /dev/null and no other descriptor of the caller's; its stdout and
// stderr are released by ReportReady. Returns the pipe's write end in the
// grandchild (-1 without --detach).
int Detach(const std::string& log_file) {
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    std::perror("galleyd: pipe");
    std::_Exit(1);
  }
  const pid_t child = ::fork();
  if (child < 0) {
    std::perror("galleyd: fork");
    std::_Exit(1);
  }
  if (child > 0) {
    ::close(ready[1]);
    int status = 0;
    ::waitpid(child, &status, 0);
    char byte = 0;
    ssize_t n;
    do {
      n = ::read(ready[0], &byte, 1);
    } while (n < 0 && errno == EINTR);
    const bool served = n == 1 && byte == 'R';
    if (!served && !log_file.empty()) {
      std::fprintf(stderr, "galleyd: could not start; its log is %s\n", log_file.c_str());
    }
    std::_Exit(served ? 0 : 1);
  }
  ::close(ready[0]);
  ::setsid();
  const pid_t grandchild = ::fork();
  if (grandchild != 0) std::_Exit(grandchild < 0 ? 1 : 0);
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd >= 0) {
    ::dup2(null_fd, STDIN_FILENO);
    ::close(null_fd);
  }
  CloseInheritedDescriptors(ready[1]);
  return ready[1];
}

// Tells the waiting caller of --detach that the socket is served, then lets
// go of the caller's stdout and stderr: one that is a regular file (a log
// the caller chose) is kept, anything else (a pipe, a terminal, a socket)
// becomes /dev/null, so whoever reads it sees its end.
void ReportReady(int ready_fd) {
  if (ready_fd < 0) return;
  const char byte = 'R';
  (void)!::write(ready_fd, &byte, 1);
  ::close(ready_fd);
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null_fd < 0) return;
  for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    struct stat info {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      if (fd == STDOUT_FILENO) std::fflush(stdout);
      if (fd == STDERR_FILENO) std::fflush(stderr);
      ::dup2(null_fd, fd);
    }
  }
  ::close(null_fd);
}

// The remote cache tier galleyd is configured with (none without servers),
// and what its start probe measured.
struct StartedRemoteTier {
  std::unique_ptr<galley::RemoteCache> tier;
  double bytes_per_s = 0;
  uint64_t capacity_bytes = 0;
  double nic_bytes_per_s = 0;
};

// Connects the remote tier and probes its servers; nullopt, with the reason
// printed, when galleyd must not start (bad credentials).
std::optional<StartedRemoteTier> StartRemoteTier(const galley::DaemonOptions& options,
                                                 uint32_t worker_threads) {
  using namespace galley;
  StartedRemoteTier started;
#if GALLEY_REMOTE_TIER
  if (!options.remote_cache_servers.empty()) {
    auto credentials = ReadRemoteCredentials(options.remote_cache_credentials);
    if (!credentials.ok()) {
      std::fprintf(stderr, "galleyd: remote_cache_credentials: %s\n",
                   credentials.status().message().c_str());
      return std::nullopt;
    }
    RemoteTierOptions remote_options;
    remote_options.servers = options.remote_cache_servers;
    remote_options.credentials = std::move(credentials).value();
    remote_options.credentials_file = options.remote_cache_credentials;
    remote_options.connect_timeout =
        std::chrono::milliseconds(options.remote_cache_connect_timeout_ms);
    remote_options.io_timeout = std::chrono::milliseconds(options.remote_cache_io_timeout_ms);
    remote_options.retry_after = std::chrono::seconds(options.remote_cache_retry_s);
    remote_options.max_value_bytes = options.remote_cache_max_value_bytes;
    remote_options.connections = worker_threads + 1;
    remote_options.limits.max_pixels = options.max_image_pixels;
    auto created = RemoteTier::Create(remote_options);
    if (!created.ok()) {
      std::fprintf(stderr, "galleyd: remote_cache_servers: %s\n",
                   created.status().message().c_str());
      return std::nullopt;
    }
    std::unique_ptr<RemoteTier> remote = std::move(created).value();
    // Bad credentials are a configuration error: refused now, not found
    // out item by item. A server that does not answer only costs hits.
    auto probe = remote->Probe();
    if (!probe.ok()) {
      std::fprintf(stderr, "galleyd: remote_cache_credentials: %s\n",
                   probe.status().message().c_str());
      return std::nullopt;
    }
    const RemoteProbe remote_probe = std::move(probe).value();
    started.bytes_per_s = remote_probe.bytes_per_s;
    started.capacity_bytes = remote_probe.capacity_bytes;
    for (const RemoteServerProbe& server : remote_probe.servers) {
      if (server.reachable) {
        spdlog::info("remote cache server {}: {:.0f} MB/s, {} MiB", server.address,
                     server.bytes_per_s / 1e6, server.capacity_bytes >> 20);
      } else {
        spdlog::warn(
            "remote cache server {} does not answer ({}); its items come from storage "
            "until it does",
            server.address, server.error);
      }
    }
    std::string host;
    uint16_t port = 0;
    if (ParseServerAddress(options.remote_cache_servers.front(), &host, &port)) {
      started.nic_bytes_per_s = LinkBytesPerSecond(host, port);
    }
    if (options.remote_cache_form == "decoded") remote->set_write_form(RemoteForm::kDecoded);
    started.tier = std::move(remote);
  }
#else
  // Built without it: the options refuse remote_cache_servers.
  (void)options;
  (void)worker_threads;
#endif
  return started;
}

int Run(int argc, char** argv) {
  using namespace galley;
  auto loaded = LoadDaemonOptions(argc, argv);
  if (!loaded.ok()) {
    for (const std::string& line : Lines(loaded.status().message())) {
      std::fprintf(stderr, "galleyd: %s\n", line.c_str());
    }
    return 2;
  }
  if (loaded->exit_now) return 0;
  if (loaded->check_config) {
    std::fputs(RenderEffectiveConfig(*loaded).c_str(), stdout);
    for (const std::string& warning : loaded->warnings) {
      std::fprintf(stderr, "galleyd: warning: %s\n", warning.c_str());
    }
    return 0;
  }
  // What the daemon runs with; SIGHUP updates its reloadable keys.
  DaemonOptions running = loaded->options;
  const DaemonOptions* options = &running;
  const int ready_fd = options->detach ? Detach(options->log_file) : -1;
  if (!options->log_file.empty() && !RedirectOutput(options->log_file)) return 1;
  // Logs go to stderr (journald under systemd; the log file with --log-file),
  // leaving stdout free.
  spdlog::set_default_logger(spdlog::stderr_color_mt("galleyd"));
  spdlog::set_level(spdlog::level::from_str(options->log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ galleyd: %v");
  for (const std::string& warning : loaded->warnings) spdlog::warn("{}", warning);
  spdlog::info("file descriptors: limit {}, of which tar shards keep at most {} open",
               CurrentDescriptorUsage().limit, options->max_open_shards_total);

  // SIGTERM/SIGINT/SIGHUP go to OnSignal and on to the main loop; the
  // threads galleyd starts inherit them blocked (so their system calls are
  // never interrupted), and SIGPIPE never kills the daemon.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  if (::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    spdlog::error("cannot create the signal pipe: {}", ErrnoText(errno));
    return 1;
  }
  struct sigaction action {};
  action.sa_handler = OnSignal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (int signal_number : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(signal_number, &action, nullptr);

  if (int stale = BatchRing::RemoveStaleSegments(); stale > 0) {
    spdlog::info("removed {} stale shared-memory segments", stale);
  }

  TuneHeapForImages();
  std::unique_ptr<cache::TieredCache> cache;
  if (options->cache_bytes > 0) {
    cache::CacheOptions cache_options;
    cache_options.cache_bytes = options->cache_bytes;
    cache_options.eviction = options->cache_eviction;
    if (!options->cache_split.empty()) {
      cache_options.split = {options->cache_split[0], options->cache_split[1],
                             options->cache_split[2]};
    }
    auto created = cache::TieredCache::Create(cache_options);
    if (!created.ok()) {
      std::fprintf(stderr, "galleyd: cache: %s\n", created.status().message().c_str());
      return 2;
    }
    cache = std::move(created).value();
  }

  std::unique_ptr<StorageThrottle> throttle;
  if (options->storage_throttle_bytes_per_s > 0) {
    auto created = StorageThrottle::Create(options->storage_throttle_bytes_per_s,
                                           options->storage_throttle_file);
    if (!created.ok()) {
      std::fprintf(stderr, "galleyd: storage_throttle_file: %s\n",
                   created.status().message().c_str());
      return 2;
    }
    throttle = std::move(created).value();
    spdlog::warn(
        "storage reads are throttled to {:.3g} MB/s{} (storage_throttle_bytes_per_s: for "
        "benchmarks and tests only)",
        options->storage_throttle_bytes_per_s / 1e6,
        options->storage_throttle_file.empty()
            ? ""
            : ", shared through " + options->storage_throttle_file);
  }

  const uint32_t worker_threads =
      options->worker_threads != 0 ? options->worker_threads : UsableCores();
  auto remote_tier = StartRemoteTier(*options, worker_threads);
  if (!remote_tier) return 2;
  RemoteCache* const remote = remote_tier->tier.get();

  PipelineOptions pipeline_options;
  pipeline_options.worker_threads = worker_threads;
  pipeline_options.decode.max_pixels = options->max_image_pixels;
  ItemPipeline pipeline(pipeline_options, cache.get(), remote, throttle.get());
  std::unique_ptr<CachePrefaulter> prefaulter;
  if (cache != nullptr && options->cache_prefault) {
    prefaulter = std::make_unique<CachePrefaulter>(cache.get());
    prefaulter->Start();
  }

  std::unique_ptr<CachePlanner> planner;
  if (cache != nullptr) {
    auto node = MeasureNode();
    if (!node.ok()) {
      // The planner then sees no CPU rates; admin overrides still apply.
      spdlog::error("node probe failed, the cache planner has no measured rates: {}",
                    node.status().ToString());
    } else {
      spdlog::info(
          "node probe: decode+augment {:.0f}/s, augment {:.0f}/s per core, memcpy {:.1f} GB/s",
          node->decode_augment_per_core_per_s, node->augment_per_core_per_s,
          node->memory_bytes_per_s / 1e9);
    }
    PlannerOverrides overrides;
    overrides.storage_bytes_per_s = options->storage_bytes_per_s;
    if (throttle != nullptr && overrides.storage_bytes_per_s <= 0) {
      // The page cache would make the throttled files look fast.
      overrides.storage_bytes_per_s = throttle->bytes_per_s();
    }
    overrides.remote_bytes_per_s = options->remote_cache_bytes_per_s;
    overrides.remote_capacity_bytes = options->remote_cache_capacity_bytes;
    overrides.nic_bytes_per_s = options->nic_bytes_per_s;
    overrides.remote_max_value_bytes = options->remote_cache_max_value_bytes;
    overrides.remote_form =
        options->remote_cache_form == "decoded"   ? cache::RemoteTierForm::kDecoded
        : options->remote_cache_form == "encoded" ? cache::RemoteTierForm::kEncoded
                                                  : cache::RemoteTierForm::kNone;
    overrides.decode_augment_per_core_per_s = options->decode_per_core_per_s;
    overrides.augment_per_core_per_s = options->augment_per_core_per_s;
    overrides.cores = static_cast<int>(options->cores);
    if (!options->cache_split.empty()) {
      overrides.split =
          cache::Split{options->cache_split[0], options->cache_split[1], options->cache_split[2]};
    }
    NodeMeasurements measured = node.ok() ? *node : NodeMeasurements{};
    measured.remote_bytes_per_s = remote_tier->bytes_per_s;
    measured.remote_capacity_bytes = remote_tier->capacity_bytes;
    measured.nic_bytes_per_s = remote_tier->nic_bytes_per_s;
    planner = std::make_unique<CachePlanner>(
        cache.get(), measured, static_cast<int>(pipeline.threads()), overrides, remote);
    planner->Start();
  }

  SchedulerOptions scheduler_options;
  scheduler_options.sampler_seed = options->sampler_seed;
  // Sampler groups' shared streams differ on every node (docs/sampling.md
  // §1.1): the ranks of a DDP job on two daemons must not repeat each other's
  // orders.
  scheduler_options.stream_salt = StartEntropy();
  scheduler_options.gate.hold_budget_per_epoch = std::chrono::milliseconds(options->hold_budget_ms);
  scheduler_options.gate.thin_hold = std::chrono::milliseconds(options->thin_hold_ms);
  scheduler_options.gate.peer_stall = std::chrono::milliseconds(options->peer_stall_ms);
  Scheduler scheduler(scheduler_options, &pipeline, cache.get());
  ControlServer server(*options, &scheduler, &pipeline, planner.get());
  // The metrics endpoint listens before the control socket does: once a job
  // can connect, and once galleyd reports itself ready, a scrape answers too.
  std::unique_ptr<MetricsServer> metrics;
  if (options->metrics_port != 0) {
    metrics =
        std::make_unique<MetricsServer>(options->metrics_host, options->metrics_port,
                                        [&server] { return RenderPrometheus(server.Metrics()); });
    if (Status s = metrics->Start(); !s.ok()) {
      spdlog::error("cannot start metrics: {}", s.ToString());
      return 1;
    }
  }
  if (Status s = server.Start(); !s.ok()) {
    spdlog::error("cannot start: {}", s.ToString());
    return 1;
  }
  scheduler.Start();
  ReportReady(ready_fd);
  spdlog::info("ready: {} pipeline threads, cache {} bytes ({} eviction), default policy {}{}",
               pipeline.threads(), options->cache_bytes,
               cache != nullptr ? options->cache_eviction : "no", options->default_policy,
               remote != nullptr ? fmt::format(", remote tier on {} memcached servers",
                                               options->remote_cache_servers.size())
                                 : "");
  if (Status s = NotifyServiceManager(ReadyMessage("serving")); !s.ok()) {
    spdlog::warn("cannot tell the service manager galleyd is ready: {}", s.ToString());
  }

  // Every thread of ours is started (later ones start from them, signals
  // blocked); the main thread takes signals from here on.
  pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
  while (true) {
    const Wake wake = WaitForSignalOrIdleExit(options->idle_exit_seconds, server);
    if (wake == Wake::kReload) {
      Reload(argc, argv, &running, &server);
      continue;
    }
    if (wake == Wake::kIdleExit) {
      spdlog::info("no job for {} s, exiting (--idle-exit)", options->idle_exit_seconds);
    }
    break;
  }
  (void)NotifyServiceManager(StoppingMessage());
  if (metrics != nullptr) metrics->Stop();
  server.Stop(Status::Cancelled("galleyd is shutting down"));
  scheduler.Stop();
  if (planner != nullptr) planner->Stop();
  if (prefaulter != nullptr) prefaulter->Stop();
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The one boundary for the main thread: whatever escapes the daemon's
  // set-up and shutdown is reported, and galleyd exits non-zero.
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "galleyd: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "galleyd: an unknown exception ended the daemon\n");
  }
  return 1;
}
