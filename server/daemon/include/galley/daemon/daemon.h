// Daemon: galleyd as one object. Its components are built from one
// DaemonOptions and wired in order, then started, reloaded and stopped
// together.
//
// It owns, in the order they are built (and destroyed in the reverse): the
// tiered cache (none with cache_bytes 0), the storage throttle (benchmarks
// only), the remote tier (none without servers), the item pipeline, the
// cache prefaulter and planner (with a cache), the scheduler, the users'
// memory shares, the dataset registry, the job manager, the control server
// and the metrics endpoint.
// Each component takes an options struct of its own, translated from
// DaemonOptions next to that component (ControlServerOptions::From,
// JobManagerOptions::From, ...), or here for a library below the daemon
// (SchedulerOptionsFor, the remote tier's options): an option is declared
// in daemon_options.* and read where it is used.
//
// The process around it is galleyd_main.cc's: flags, signals, --detach, the
// log's sinks, shared-memory leftovers of a crashed daemon, systemd
// notifications, and the loop that waits for a signal or --idle-exit. Tests
// build a Daemon in their own process the same way.
//
// Thread-safety: Create, Start, Stop, Reload, options() and Summary() are
// for one thread, the owner's; Metrics() and open_jobs() may be called from
// any thread while the daemon exists.
#ifndef GALLEY_SERVER_DAEMON_DAEMON_H_
#define GALLEY_SERVER_DAEMON_DAEMON_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "galley/cache/tiered_cache.h"
#include "galley/daemon/cache_planner.h"
#include "galley/daemon/control_server.h"
#include "galley/daemon/daemon_options.h"
#include "galley/daemon/dataset_registry.h"
#include "galley/daemon/dataset_sample_store.h"
#include "galley/daemon/item_pipeline.h"
#include "galley/daemon/job_manager.h"
#include "galley/daemon/memory_setup.h"
#include "galley/daemon/metrics_server.h"
#include "galley/daemon/storage_throttle.h"
#include "galley/remote/remote_cache.h"
#include "galley/scheduling/scheduler.h"
#include "galley/snapshots/snapshots.h"
#include "galley/status.h"

namespace galley {

class Daemon {
 public:
  // Called once a drain has finished (an admin asked for it and the last
  // job ended), on a daemon thread with no lock held. galleyd stops then as
  // on SIGTERM; the callback must not call Stop itself.
  using DrainedCallback = std::function<void()>;

  // Builds every component and measures the node (with a cache: the node
  // probe; with remote servers: their probe). Binds nothing; of its threads
  // only the cache prefaulter starts here, so that the cache's memory is
  // committed while the node is measured. Errors, each message starting
  // with the key it is about: a cache that cannot be made, a
  // storage_throttle_file that cannot be opened, remote_cache_credentials
  // that cannot be read or that the servers refuse. `drained` may be null:
  // a drained daemon then serves no new job and runs until its owner stops
  // it.
  static Result<std::unique_ptr<Daemon>> Create(const DaemonOptions& options,
                                                DrainedCallback drained = nullptr);
  ~Daemon();  // Stop(Cancelled)
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Starts the background threads and the metrics endpoint, then binds the
  // control socket: once it returns Ok a client can connect, and a scrape
  // is answered. Call once. Errors: those of MetricsServer::Start and
  // ControlServer::Start (a socket another galleyd serves, a path that
  // cannot be bound); Stop (or the destructor) cleans up what had started.
  Status Start();

  // Ends every job with `reason` (which each client reports), closes every
  // connection, removes the socket and joins the threads that serve,
  // schedule, plan and prefault (the remote tier's end with the daemon).
  // Idempotent.
  void Stop(const Status& reason);

  // Applies what may change without dropping a job: `updated`'s values for
  // every reloadable key (limits, policies, allowed roots; log_level and
  // idle_exit_seconds are recorded in options() for the owner to apply).
  // The other keys keep their running values. Returns every key whose value
  // differs, reloadable or not, as DiffOptions does; logs nothing.
  std::vector<OptionChange> Reload(const DaemonOptions& updated);

  // The options the daemon runs with, reloaded keys included.
  const DaemonOptions& options() const { return options_; }

  // Everything /metrics shows, as an admin sees it.
  MetricsSnapshot Metrics() const;
  // Open jobs, every user's.
  uint64_t open_jobs() const;
  // What the daemon runs with, for its "ready" log line: pipeline threads,
  // cache, eviction, default policy and remote servers.
  std::string Summary() const;

 private:
  explicit Daemon(const DaemonOptions& options) : options_(options) {}
  Status Build(DrainedCallback drained);

  DaemonOptions options_;
  bool stopped_ = false;

  std::unique_ptr<cache::TieredCache> cache_;
  std::unique_ptr<StorageThrottle> throttle_;
  std::unique_ptr<RemoteCache> remote_;
  // After cache_: its writer asks cache_'s demand, so it stops first.
  std::unique_ptr<cache::DiskTier> disk_;
  // In the disk tier's folder: the planner's samples of datasets of objects.
  std::unique_ptr<DatasetSampleStore> samples_;
  std::unique_ptr<ItemPipeline> pipeline_;
  std::unique_ptr<CachePrefaulter> prefaulter_;
  std::unique_ptr<CachePlanner> planner_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<UserMemory> memory_;
  std::unique_ptr<DatasetRegistry> datasets_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<ControlServer> server_;
  std::unique_ptr<MetricsServer> metrics_;
};

// The scheduler's options from galleyd's: the seed, the gate's hold times
// and drawing ahead; stream_salt stays 0 (Create draws it at start). Here,
// not beside SchedulerOptions, because the scheduling library sits below
// the daemon and never sees DaemonOptions.
SchedulerOptions SchedulerOptionsFor(const DaemonOptions& options);

// What SIGHUP does: reads the configuration again from `command_line` (the
// flags galleyd was started with, argv[0] first, which keep their
// precedence over the file), checks it whole, and hands it to
// daemon->Reload; the log level follows log_level. Logs the outcome, each
// line starting "reload:": every change (at the more verbose of the old
// and new levels, so a change of log_level itself is seen either way), the
// keys that changed but need a restart, the file's warnings. A bad file
// changes nothing: every error is logged and returned (InvalidArgument);
// without --config there is nothing to read (NotFound).
Status ReloadConfigFile(const std::vector<std::string>& command_line, Daemon* daemon);

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_DAEMON_H_
