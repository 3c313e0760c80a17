// galleyd: the per-node daemon. See README.md and docs/operations.md.
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
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
#include "server/daemon/scheduler.h"

int main(int argc, char** argv) {
  using namespace galley;
  bool exit_now = false;
  auto options = LoadDaemonOptions(argc, argv, &exit_now);
  if (!options.ok()) {
    std::fprintf(stderr, "galleyd: %s\n", options.status().message().c_str());
    return 2;
  }
  if (exit_now) return 0;
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
  scheduler_options.gate.hold_budget_per_epoch = std::chrono::milliseconds(options->hold_budget_ms);
  scheduler_options.gate.thin_hold = std::chrono::milliseconds(options->thin_hold_ms);
  Scheduler scheduler(scheduler_options, &pipeline, cache.get(), planner.get());
  ControlServer server(*options, &scheduler, &pipeline, planner.get());
  if (Status s = server.Start(); !s.ok()) {
    spdlog::error("cannot start: {}", s.ToString());
    return 1;
  }
  scheduler.Start();
  std::unique_ptr<MetricsServer> metrics;
  if (options->metrics_port != 0) {
    metrics = std::make_unique<MetricsServer>(options->metrics_port, [&server] {
      return RenderPrometheus(server.Query("status"), server.Query("jobs"), server.Query("cache"));
    });
    if (Status s = metrics->Start(); !s.ok()) {
      spdlog::error("cannot start metrics: {}", s.ToString());
      return 1;
    }
  }
  spdlog::info("ready: {} pipeline threads, cache {} bytes ({} eviction), default policy {}",
               pipeline.threads(), options->cache_bytes,
               cache != nullptr ? options->cache_eviction : "no", options->default_policy);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  spdlog::info("received signal {}, shutting down", signal_number);
  if (metrics != nullptr) metrics->Stop();
  server.Stop(Status::Cancelled("galleyd is shutting down"));
  scheduler.Stop();
  if (planner != nullptr) planner->Stop();
  spdlog::info("stopped");
  return 0;
}
