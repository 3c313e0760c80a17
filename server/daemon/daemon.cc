#include "galley/daemon/daemon.h"

#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "galley/daemon/node_probe.h"
#include "galley/objectstore/s3_client.h"
#include "galley/random.h"
#include "galley/snapshots/prometheus_text.h"
#if GALLEY_REMOTE_TIER
#include "galley/remote/remote_tier.h"
#endif

namespace galley {
namespace {

// The store datasets of objects are read through, for the endpoints the
// admin allows (none: no store, and s3:// shards are refused naming the
// option). A build without S3 support says so in the log and refuses them
// at open.
Result<std::shared_ptr<objectstore::ObjectStore>> OpenObjectStore(const DaemonOptions& options) {
  const std::vector<std::string>& allowed = options.allowed_s3_endpoints;
  if (allowed.empty()) return std::shared_ptr<objectstore::ObjectStore>();
  objectstore::S3ClientOptions s3;
  s3.max_in_flight = options.s3_requests_in_flight;
  s3.ca_file = options.s3_ca_file;
  s3.max_retries = options.s3_retries;
  s3.backoff_cap = std::chrono::milliseconds(options.s3_retry_cap_ms);
  s3.backoff_base = std::min(s3.backoff_base, s3.backoff_cap);
  for (const std::string& endpoint : allowed) {
    if (endpoint != "aws") s3.allowed_endpoints.push_back(endpoint);
  }
  // The client allows AWS's own endpoints only while its list is empty.
  if (!s3.allowed_endpoints.empty() && s3.allowed_endpoints.size() != allowed.size()) {
    return Status::InvalidArgument(
        "allowed_s3_endpoints: \"aws\" cannot be listed with other endpoints; list either "
        "\"aws\" or the endpoints of your own stores");
  }
  auto store = objectstore::OpenS3Client(s3);
  if (!store.ok()) {
    if (store.status().code() != StatusCode::kUnavailable) return store.status();
    spdlog::warn("allowed_s3_endpoints is set, but {}; s3:// datasets are refused",
                 store.status().message());
    return std::shared_ptr<objectstore::ObjectStore>();
  }
  return std::shared_ptr<objectstore::ObjectStore>(std::move(*store));
}

// 64 bits that differ on every start of every daemon: the kernel's entropy,
// or, should getrandom fail, the clock and the pid mixed.
uint64_t StartEntropy() {
  uint64_t word = 0;
  if (::getrandom(&word, sizeof word, 0) == static_cast<ssize_t>(sizeof word)) return word;
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return SplitMix64(static_cast<uint64_t>(now) ^ (uint64_t(::getpid()) << 32));
}

// `status` with its message prefixed by the key it is about.
Status About(const std::string& key, const Status& status) {
  return Status(status.code(), key + ": " + status.message());
}

// The remote cache tier galleyd is configured with (none without servers),
// and what its start probe measured.
struct StartedRemoteTier {
  std::unique_ptr<RemoteCache> tier;
  double bytes_per_s = 0;
  uint64_t capacity_bytes = 0;
  double nic_bytes_per_s = 0;
};

#if GALLEY_REMOTE_TIER
// galleyd's servers, timeouts, value and image limits, with the credentials
// read from remote_cache_credentials (ReadRemoteCredentials's errors,
// prefixed with the key) and a lookup handle for each pipeline thread and
// one more.
Result<RemoteTierOptions> RemoteTierOptionsFor(const DaemonOptions& options) {
  auto credentials = ReadRemoteCredentials(options.remote_cache_credentials);
  if (!credentials.ok()) {
    return Status(credentials.status().code(),
                  "remote_cache_credentials: " + credentials.status().message());
  }
  RemoteTierOptions o;
  o.servers = options.remote_cache_servers;
  o.credentials = std::move(credentials).value();
  o.credentials_file = options.remote_cache_credentials;
  o.connect_timeout = std::chrono::milliseconds(options.remote_cache_connect_timeout_ms);
  o.io_timeout = std::chrono::milliseconds(options.remote_cache_io_timeout_ms);
  o.retry_after = std::chrono::seconds(options.remote_cache_retry_s);
  o.max_value_bytes = options.remote_cache_max_value_bytes;
  o.connections = PipelineOptions::From(options).threads() + 1;
  o.limits.max_pixels = options.max_image_pixels;
  return o;
}
#endif

// Connects the remote tier and probes its servers. Bad credentials are a
// configuration error, refused now rather than found out item by item; a
// server that does not answer only costs hits.
Result<StartedRemoteTier> StartRemoteTier(const DaemonOptions& options) {
  StartedRemoteTier started;
#if GALLEY_REMOTE_TIER
  if (options.remote_cache_servers.empty()) return started;
  GALLEY_ASSIGN_OR_RETURN(RemoteTierOptions remote_options, RemoteTierOptionsFor(options));
  auto created = RemoteTier::Create(remote_options);
  if (!created.ok()) return About("remote_cache_servers", created.status());
  std::unique_ptr<RemoteTier> remote = std::move(created).value();
  auto probe = remote->Probe();
  if (!probe.ok()) return About("remote_cache_credentials", probe.status());
  started.bytes_per_s = probe->bytes_per_s;
  started.capacity_bytes = probe->capacity_bytes;
  for (const RemoteServerProbe& server : probe->servers) {
    if (server.reachable) {
      spdlog::info("remote cache server {}: {:.0f} MB/s, {} MiB", server.address,
                   server.bytes_per_s / 1e6, server.capacity_bytes >> 20);
    } else {
      spdlog::warn(
          "remote cache server {} does not answer ({}); its items come from storage until it "
          "does",
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
#else
  // Built without it: the options refuse remote_cache_servers.
  (void)options;
#endif
  return started;
}

// The node's rates for the planner; none when the probe fails (the admin's
// overrides still apply). The probe measures exactly the decode, augment and
// memory rates: with all three configured there is nothing left for it to
// measure, and galleyd starts without it.
NodeMeasurements MeasureNodeForPlanner(const DaemonOptions& options) {
  if (options.decode_per_core_per_s > 0 && options.augment_per_core_per_s > 0 &&
      options.memory_bytes_per_s > 0) {
    spdlog::info("node probe skipped: decode, augment and memory rates are configured");
    return {};
  }
  auto node = MeasureNode();
  if (!node.ok()) {
    spdlog::error("node probe failed, the cache planner has no measured rates: {}",
                  node.status().ToString());
    return {};
  }
  spdlog::info("node probe: decode+augment {:.0f}/s, augment {:.0f}/s per core, memcpy {:.1f} GB/s",
               node->decode_augment_per_core_per_s, node->augment_per_core_per_s,
               node->memory_bytes_per_s / 1e9);
  return *node;
}

}  // namespace

SchedulerOptions SchedulerOptionsFor(const DaemonOptions& options) {
  SchedulerOptions o;
  o.sampler_seed = options.sampler_seed;
  o.gate.hold_budget_per_epoch = std::chrono::milliseconds(options.hold_budget_ms);
  o.gate.thin_hold = std::chrono::milliseconds(options.thin_hold_ms);
  o.gate.peer_stall = std::chrono::milliseconds(options.peer_stall_ms);
  o.draw_ahead_batches = options.draw_ahead_batches;
  o.draw_across_epochs = options.draw_across_epochs;
  return o;
}

Result<std::unique_ptr<Daemon>> Daemon::Create(const DaemonOptions& options,
                                               DrainedCallback drained) {
  std::unique_ptr<Daemon> daemon(new Daemon(options));
  GALLEY_RETURN_IF_ERROR(daemon->Build(std::move(drained)));
  return daemon;
}

Status Daemon::Build(DrainedCallback drained) {
  if (options_.cache_bytes > 0) {
    auto created = cache::TieredCache::Create(CacheOptionsFrom(options_));
    if (!created.ok()) return About("cache", created.status());
    cache_ = std::move(created).value();
  }
  if (options_.storage_throttle_bytes_per_s > 0) {
    auto created = StorageThrottle::Create(options_.storage_throttle_bytes_per_s,
                                           options_.storage_throttle_file);
    if (!created.ok()) return About("storage_throttle_file", created.status());
    throttle_ = std::move(created).value();
    spdlog::warn(
        "storage reads are throttled to {:.3g} MB/s{} (storage_throttle_bytes_per_s: for "
        "benchmarks and tests only)",
        options_.storage_throttle_bytes_per_s / 1e6,
        options_.storage_throttle_file.empty()
            ? ""
            : ", shared through " + options_.storage_throttle_file);
  }
  GALLEY_ASSIGN_OR_RETURN(StartedRemoteTier remote, StartRemoteTier(options_));
  remote_ = std::move(remote.tier);
  if (!options_.disk_cache.empty()) {
    cache::DiskTierOptions disk_options;
    disk_options.dir = options_.disk_cache;
    disk_options.budget_bytes = options_.disk_cache_bytes;
    auto opened =
        cache::DiskTier::Open(disk_options, cache_ != nullptr ? &cache_->demand() : nullptr);
    if (!opened.ok()) return About("disk_cache", opened.status());
    disk_ = std::move(opened).value();
    samples_ = std::make_unique<DatasetSampleStore>(disk_->records_dir());
  }
  pipeline_ = std::make_unique<ItemPipeline>(PipelineOptions::From(options_), cache_.get(),
                                             remote_.get(), throttle_.get(), disk_.get());
  if (cache_ != nullptr) {
    if (options_.cache_prefault) {
      // Committing the cache's memory goes on while the node is measured.
      prefaulter_ = std::make_unique<CachePrefaulter>(cache_.get());
      prefaulter_->Start();
    }
    NodeMeasurements measured = MeasureNodeForPlanner(options_);
    measured.remote_bytes_per_s = remote.bytes_per_s;
    measured.remote_capacity_bytes = remote.capacity_bytes;
    measured.nic_bytes_per_s = remote.nic_bytes_per_s;
    planner_ = std::make_unique<CachePlanner>(
        cache_.get(), measured, static_cast<int>(pipeline_->threads()),
        PlannerOverrides::From(options_), remote_.get(), PipelineTimer(), samples_.get());
  }
  SchedulerOptions scheduler_options = SchedulerOptionsFor(options_);
  // Sampler groups' shared streams differ on every node (docs/sampling.md
  // §1.1): the ranks of a DDP job on two daemons must not repeat each
  // other's orders.
  scheduler_options.stream_salt = StartEntropy();
  scheduler_ = std::make_unique<Scheduler>(scheduler_options, pipeline_.get(), cache_.get());
  memory_ = std::make_unique<UserMemory>(JobLimits::From(options_).max_memory_per_uid);
  DatasetRegistryOptions dataset_options = DatasetRegistryOptions::From(options_);
  GALLEY_ASSIGN_OR_RETURN(dataset_options.object_store, OpenObjectStore(options_));
  datasets_ = std::make_unique<DatasetRegistry>(dataset_options, memory_.get());
  // The scheduler hears a job's events first, then the planner.
  std::vector<JobLifecycleObserver*> observers{scheduler_.get()};
  if (planner_ != nullptr) observers.push_back(planner_.get());
  jobs_ = std::make_unique<JobManager>(JobManagerOptions::From(options_), std::move(observers),
                                       datasets_.get(), std::move(drained), memory_.get());
  server_ = std::make_unique<ControlServer>(ControlServerOptions::From(options_), jobs_.get(),
                                            datasets_.get(), scheduler_.get(), pipeline_.get(),
                                            planner_.get());
  if (options_.metrics_port != 0) {
    metrics_ = std::make_unique<MetricsServer>(options_.metrics_host, options_.metrics_port,
                                               [this] { return RenderPrometheus(Metrics()); });
  }
  return Status::Ok();
}

Daemon::~Daemon() { Stop(Status::Cancelled("galleyd is shutting down")); }

Status Daemon::Start() {
  if (planner_ != nullptr) planner_->Start();
  // The metrics endpoint listens before the control socket does: once a job
  // can connect, and once galleyd reports itself ready, a scrape answers too.
  if (metrics_ != nullptr) GALLEY_RETURN_IF_ERROR(metrics_->Start());
  GALLEY_RETURN_IF_ERROR(server_->Start());
  scheduler_->Start();
  return Status::Ok();
}

void Daemon::Stop(const Status& reason) {
  if (stopped_) return;
  stopped_ = true;
  // A daemon whose Create failed has only some of its components.
  if (metrics_ != nullptr) metrics_->Stop();
  if (server_ != nullptr) server_->Stop(reason);
  if (scheduler_ != nullptr) scheduler_->Stop();
  if (planner_ != nullptr) planner_->Stop();
  if (prefaulter_ != nullptr) prefaulter_->Stop();
}

std::vector<OptionChange> Daemon::Reload(const DaemonOptions& updated) {
  const DaemonOptions applied = WithReloadableKeys(options_, updated);
  const JobLimits limits = JobLimits::From(applied);
  jobs_->Reload(limits);
  memory_->SetLimit(limits.max_memory_per_uid);
  datasets_->SetAllowedRoots(applied.allowed_roots);
  std::vector<OptionChange> changes = DiffOptions(options_, updated);
  options_ = applied;
  return changes;
}

MetricsSnapshot Daemon::Metrics() const { return server_->Metrics(); }

uint64_t Daemon::open_jobs() const { return server_->open_jobs(); }

std::string Daemon::Summary() const {
  return fmt::format("{} pipeline threads, cache {} bytes ({} eviction), default policy {}{}",
                     pipeline_->threads(), options_.cache_bytes,
                     cache_ != nullptr ? options_.cache_eviction : "no", options_.default_policy,
                     remote_ != nullptr ? fmt::format(", remote tier on {} memcached servers",
                                                      options_.remote_cache_servers.size())
                                        : "") +
         (disk_ != nullptr ? fmt::format(", disk tier in {} ({} bytes)", options_.disk_cache,
                                         options_.disk_cache_bytes)
                           : "");
}

Status ReloadConfigFile(const std::vector<std::string>& command_line, Daemon* daemon) {
  auto loaded = LoadDaemonOptions(command_line);
  if (!loaded.ok()) {
    for (const std::string& error : ConfigErrors(loaded.status())) {
      spdlog::error("reload: {}", error);
    }
    spdlog::error("reload: the configuration has errors, nothing changed");
    return loaded.status();
  }
  if (loaded->config_path.empty()) {
    spdlog::warn("reload: galleyd was started without --config, there is no file to re-read");
    return Status::NotFound("galleyd was started without --config, there is no file to re-read");
  }
  const std::vector<OptionChange> changes = daemon->Reload(loaded->options);
  // The report is logged at the more verbose of the two levels, so a change
  // of log_level itself is seen either way.
  const auto level = spdlog::level::from_str(daemon->options().log_level);
  spdlog::set_level(std::min(level, spdlog::get_level()));
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
  return Status::Ok();
}

}  // namespace galley
