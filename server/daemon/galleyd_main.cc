// galleyd: the per-node daemon. See README.md and docs/operations.md.
#include <signal.h>

#include <csignal>
#include <cstdio>
#include <spdlog/spdlog.h>

#include "server/daemon/batch_ring.h"
#include "server/daemon/control_server.h"
#include "server/daemon/daemon_options.h"
#include "server/daemon/item_pipeline.h"
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

  PipelineOptions pipeline_options;
  pipeline_options.worker_threads = options->worker_threads;
  pipeline_options.decode.max_pixels = options->max_image_pixels;
  ItemPipeline pipeline(pipeline_options);
  Scheduler scheduler(SchedulerOptions{}, &pipeline);
  ControlServer server(*options, &scheduler, &pipeline);
  if (Status s = server.Start(); !s.ok()) {
    spdlog::error("cannot start: {}", s.ToString());
    return 1;
  }
  scheduler.Start();
  spdlog::info("ready: {} pipeline threads, cache {} bytes, default policy {}", pipeline.threads(),
               options->cache_bytes, options->default_policy);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  spdlog::info("received signal {}, shutting down", signal_number);
  server.Stop(Status::Cancelled("galleyd is shutting down"));
  scheduler.Stop();
  spdlog::info("stopped");
  return 0;
}
