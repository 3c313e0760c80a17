// galleyd: the per-node daemon. See README.md and docs/operations.md.
#include <fcntl.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "galley/cache/tiered_cache.h"
#include "server/daemon/batch_ring.h"
#include "server/daemon/cache_planner.h"
#include "server/daemon/control_server.h"
#include "server/daemon/daemon_options.h"
#include "server/daemon/item_pipeline.h"
#include "server/daemon/metrics_server.h"
#include "server/daemon/node_probe.h"
#include "server/daemon/prometheus_text.h"
#include "server/daemon/scheduler.h"

namespace {

// Blocks until SIGTERM/SIGINT/SIGHUP, or, with idle_exit_seconds > 0, until
// no job has been open for that long. Returns true for the idle exit.
bool WaitForSignalOrIdleExit(const sigset_t& signals, double idle_exit_seconds,
                             const galley::ControlServer& server) {
  using Clock = std::chrono::steady_clock;
  if (idle_exit_seconds <= 0) {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    spdlog::info("received signal {}, shutting down", signal_number);
    return false;
  }
  const auto idle_limit = std::chrono::duration<double>(idle_exit_seconds);
  auto idle_since = Clock::now();
  while (true) {
    const timespec tick{0, 200'000'000};
    const int signal_number = sigtimedwait(&signals, nullptr, &tick);
    if (signal_number > 0) {
      spdlog::info("received signal {}, shutting down", signal_number);
      return false;
    }
    if (server.open_jobs() > 0) {
      idle_since = Clock::now();
    } else if (Clock::now() - idle_since >= idle_limit) {
      return true;
    }
  }
}

// --detach: forks into a new session and a grandchild whose parent is init,
// before any thread exists. The original process waits on a pipe and exits 0
// when the grandchild reports that it serves the socket, 1 if it dies first.
// Returns the pipe's write end in the grandchild (-1 without --detach).
int Detach() {
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    std::perror("galleyd: pipe");
    std::exit(1);
  }
  const pid_t child = ::fork();
  if (child < 0) {
    std::perror("galleyd: fork");
    std::exit(1);
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

}  // namespace

int main(int argc, char** argv) {
  using namespace galley;
  bool exit_now = false;
  auto options = LoadDaemonOptions(argc, argv, &exit_now);
  if (!options.ok()) {
    std::fprintf(stderr, "galleyd: %s\n", options.status().message().c_str());
    return 2;
  }
  if (exit_now) return 0;
  const int ready_fd = options->detach ? Detach() : -1;
  // Logs go to stderr (journald under systemd), leaving stdout free.
  spdlog::set_default_logger(spdlog::stderr_color_mt("galleyd"));
  spdlog::set_level(spdlog::level::from_str(options->log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ galleyd: %v");

  // Signals are taken synchronously by this thread; every other thread
  // inherits the mask, and SIGPIPE never kills the daemon.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

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
  scheduler_options.gate.hold_budget_per_epoch = std::chrono::milliseconds(options->hold_budget_ms);
  scheduler_options.gate.thin_hold = std::chrono::milliseconds(options->thin_hold_ms);
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
    metrics = std::make_unique<MetricsServer>(
        options->metrics_port, [&server] { return RenderPrometheus(server.Metrics()); });
    if (Status s = metrics->Start(); !s.ok()) {
      spdlog::error("cannot start metrics: {}", s.ToString());
      return 1;
    }
  }
  spdlog::info("ready: {} pipeline threads, cache {} bytes ({} eviction), default policy {}",
               pipeline.threads(), options->cache_bytes,
               cache != nullptr ? options->cache_eviction : "no", options->default_policy);

  if (WaitForSignalOrIdleExit(signals, options->idle_exit_seconds, server)) {
    spdlog::info("no job for {} s, exiting (--idle-exit)", options->idle_exit_seconds);
  }
  if (metrics != nullptr) metrics->Stop();
  server.Stop(Status::Cancelled("galleyd is shutting down"));
  scheduler.Stop();
  if (planner != nullptr) planner->Stop();
  spdlog::info("stopped");
  return 0;
}
