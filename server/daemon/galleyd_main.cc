// galleyd: the per-node daemon. See README.md and docs/operations.md.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>
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
#include "server/daemon/metrics_server.h"
#include "server/daemon/node_probe.h"
#include "server/daemon/prometheus_text.h"
#include "server/daemon/scheduler.h"
#include "server/daemon/systemd_notify.h"

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

// --detach: forks into a new session and a grandchild whose parent is init,
// before any thread exists. The original process waits on a pipe and exits 0
// when the grandchild reports that it serves the socket, 1 if it dies first.
// Returns the pipe's write end in the grandchild (-1 without --detach).
int Detach() {
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
    std::_Exit(n == 1 && byte == 'R' ? 0 : 1);
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
  return ready[1];
}

void ReportReady(int ready_fd) {
  if (ready_fd < 0) return;
  const char byte = 'R';
  (void)!::write(ready_fd, &byte, 1);
  ::close(ready_fd);
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
  const int ready_fd = options->detach ? Detach() : -1;
  // Logs go to stderr (journald under systemd), leaving stdout free.
  spdlog::set_default_logger(spdlog::stderr_color_mt("galleyd"));
  spdlog::set_level(spdlog::level::from_str(options->log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ galleyd: %v");
  for (const std::string& warning : loaded->warnings) spdlog::warn("{}", warning);

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

  std::unique_ptr<cache::TieredCache> cache;
  if (options->cache_bytes > 0) {
    cache::CacheOptions cache_options;
    cache_options.cache_bytes = options->cache_bytes;
    cache_options.eviction = options->cache_eviction;
    if (!options->cache_split.empty()) {
      cache_options.split = {options->cache_split[0], options->cache_split[1],
                             options->cache_split[2]};
    }
    std::string error;
    cache = cache::TieredCache::Create(cache_options, &error);
    if (cache == nullptr) {
      std::fprintf(stderr, "galleyd: cache: %s\n", error.c_str());
      return 2;
    }
  }

  PipelineOptions pipeline_options;
  pipeline_options.worker_threads = options->worker_threads;
  pipeline_options.decode.max_pixels = options->max_image_pixels;
  ItemPipeline pipeline(pipeline_options, cache.get());

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
    overrides.decode_augment_per_core_per_s = options->decode_per_core_per_s;
    overrides.augment_per_core_per_s = options->augment_per_core_per_s;
    overrides.cores = static_cast<int>(options->cores);
    if (!options->cache_split.empty()) {
      overrides.split =
          cache::Split{options->cache_split[0], options->cache_split[1], options->cache_split[2]};
    }
    planner = std::make_unique<CachePlanner>(cache.get(), node.ok() ? *node : NodeMeasurements{},
                                             static_cast<int>(pipeline.threads()), overrides);
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
  Scheduler scheduler(scheduler_options, &pipeline, cache.get(), planner.get());
  ControlServer server(*options, &scheduler, &pipeline, planner.get());
  if (Status s = server.Start(); !s.ok()) {
    spdlog::error("cannot start: {}", s.ToString());
    return 1;
  }
  scheduler.Start();
  ReportReady(ready_fd);
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
  spdlog::info("ready: {} pipeline threads, cache {} bytes ({} eviction), default policy {}",
               pipeline.threads(), options->cache_bytes,
               cache != nullptr ? options->cache_eviction : "no", options->default_policy);
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
