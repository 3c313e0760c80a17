#include "server/daemon/daemon_options.h"

#include <toml++/toml.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>

#include "galley/client.h"
#include "galley/version.h"

namespace galley {
namespace {

// Reads an optional key of the right type from the TOML table.
template <typename T>
Status ReadKey(const toml::table& table, const char* key, T* out) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return Status::Ok();
  if constexpr (std::is_same_v<T, std::string>) {
    auto value = node->value<std::string>();
    if (!value)
      return Status::InvalidArgument(std::string("config key '") + key + "' must be a string");
    *out = *value;
  } else if constexpr (std::is_same_v<T, bool>) {
    auto value = node->value<bool>();
    if (!value) {
      return Status::InvalidArgument(std::string("config key '") + key + "' must be true or false");
    }
    *out = *value;
  } else if constexpr (std::is_floating_point_v<T>) {
    // toml++ converts integers to double here, so "5e8" and "500000000" both work.
    auto value = node->value<double>();
    if (!value || !(*value >= 0) || !std::isfinite(*value)) {
      return Status::InvalidArgument(std::string("config key '") + key +
                                     "' must be a non-negative number");
    }
    *out = static_cast<T>(*value);
  } else {
    auto value = node->value<int64_t>();
    if (!value || *value < 0) {
      return Status::InvalidArgument(std::string("config key '") + key +
                                     "' must be a non-negative integer");
    }
    *out = static_cast<T>(*value);
  }
  return Status::Ok();
}

Status ApplyConfigFile(const std::string& path, DaemonOptions* options) {
  toml::table t;
  try {
    t = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return Status::InvalidArgument("config " + path + ": " + std::string(e.description()));
  }
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "socket", &options->socket_path));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "cache_bytes", &options->cache_bytes));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "worker_threads", &options->worker_threads));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "tar_index_dir", &options->tar_index_dir));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "tar_index_max_bytes", &options->tar_index_max_bytes));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "max_open_shards", &options->max_open_shards));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "default_policy", &options->default_policy));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "sampler_seed", &options->sampler_seed));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "max_jobs", &options->max_jobs));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "max_shm_per_job", &options->max_shm_per_job));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "max_shm_total", &options->max_shm_total));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "max_jobs_per_uid", &options->max_jobs_per_uid));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "max_shm_per_uid", &options->max_shm_per_uid));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "max_connections_per_uid", &options->max_connections_per_uid));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "max_image_pixels", &options->max_image_pixels));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "metrics_port", &options->metrics_port));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "hold_budget_ms", &options->hold_budget_ms));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "thin_hold_ms", &options->thin_hold_ms));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "log_level", &options->log_level));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "admin_group", &options->admin_group));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "owner_only", &options->owner_only));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "idle_exit_seconds", &options->idle_exit_seconds));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "cache_eviction", &options->cache_eviction));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "storage_bytes_per_s", &options->storage_bytes_per_s));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "decode_per_core_per_s", &options->decode_per_core_per_s));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "augment_per_core_per_s", &options->augment_per_core_per_s));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "cores", &options->cores));
  if (const toml::node* split = t.get("cache_split")) {
    const toml::array* list = split->as_array();
    if (list == nullptr) return Status::InvalidArgument("config key 'cache_split' must be a list");
    options->cache_split.clear();
    for (const toml::node& share : *list) {
      auto value = share.value<int64_t>();
      if (!value || *value < 0 || *value > 100) {
        return Status::InvalidArgument("config key 'cache_split' must hold integers 0..100");
      }
      options->cache_split.push_back(static_cast<int>(*value));
    }
  }
  if (const toml::node* policies = t.get("dataset_policies")) {
    const toml::table* table = policies->as_table();
    if (table == nullptr) {
      return Status::InvalidArgument("config key 'dataset_policies' must be a table");
    }
    for (const auto& [path, policy] : *table) {
      auto value = policy.value<std::string>();
      if (!value) {
        return Status::InvalidArgument("config key 'dataset_policies' must map paths to names");
      }
      options->dataset_policies[std::string(path.str())] = *value;
    }
  }
  if (const toml::node* roots = t.get("allowed_roots")) {
    const toml::array* list = roots->as_array();
    if (list == nullptr)
      return Status::InvalidArgument("config key 'allowed_roots' must be a list");
    for (const toml::node& root : *list) {
      auto value = root.value<std::string>();
      if (!value) return Status::InvalidArgument("config key 'allowed_roots' must hold strings");
      options->allowed_roots.push_back(*value);
    }
  }
  return Status::Ok();
}

// The config file is checked here too, so a bad value there is reported the
// same way as a bad flag.
Status ValidateCacheOptions(const DaemonOptions& options) {
  if (options.cache_eviction != "refcount" && options.cache_eviction != "lru") {
    return Status::InvalidArgument("cache_eviction must be 'refcount' or 'lru', not '" +
                                   options.cache_eviction + "'");
  }
  if (!options.cache_split.empty()) {
    if (options.cache_split.size() != 3) {
      return Status::InvalidArgument(
          "cache_split needs three percentages: encoded, decoded, augmented");
    }
    int sum = 0;
    for (int pct : options.cache_split) {
      if (pct < 0 || pct > 100) return Status::InvalidArgument("cache_split shares must be 0..100");
      sum += pct;
    }
    if (sum > 100) {
      return Status::InvalidArgument("cache_split adds up to " + std::to_string(sum) +
                                     "%, more than 100%");
    }
  }
  for (double rate : {options.storage_bytes_per_s, options.decode_per_core_per_s,
                      options.augment_per_core_per_s}) {
    if (!(rate >= 0) || !std::isfinite(rate)) {
      return Status::InvalidArgument("planner rates must be finite and non-negative");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<DaemonOptions> LoadDaemonOptions(int argc, char** argv, bool* exit_now) {
  *exit_now = false;
  DaemonOptions options;
  options.socket_path = DefaultSocketPath();

  // First pass: only --config, so flags given on the command line override it.
  std::string config_path;
  {
    CLI::App pre;
    pre.allow_extras();
    pre.set_help_flag();
    pre.add_option("--config", config_path);
    try {
      pre.parse(argc, argv);
    } catch (const CLI::ParseError&) {
    }
  }
  if (!config_path.empty()) GALLEY_RETURN_IF_ERROR(ApplyConfigFile(config_path, &options));

  CLI::App app{"galleyd: prepares training batches once and serves them to every job on the node"};
  app.set_version_flag("--version", std::string("galleyd ") + kVersion + " (protocol " +
                                        std::to_string(kProtocolVersion) + ")");
  app.add_option("--config", config_path, "TOML config file (flags override it)");
  app.add_option("--socket", options.socket_path, "control socket path");
  app.add_option("--allowed-root", options.allowed_roots,
                 "directory datasets may be served from (repeatable; default: any)");
  app.add_option("--cache-bytes", options.cache_bytes, "cache budget in bytes (0 disables)");
  app.add_option("--tar-index-dir", options.tar_index_dir,
                 "folder of the tar shard index cache (none disables)");
  app.add_option("--tar-index-max-bytes", options.tar_index_max_bytes,
                 "size cap of the tar shard index cache");
  app.add_option("--max-open-shards", options.max_open_shards,
                 "open shard descriptors kept per dataset");
  app.add_option("--cache-eviction", options.cache_eviction,
                 "cache eviction policy: refcount (default) or lru")
      ->check(CLI::IsMember({"refcount", "lru"}));
  app.add_option("--cache-split", options.cache_split,
                 "fix the cache split as E,D,A percent (encoded, decoded, augmented); "
                 "default: the planner chooses")
      ->delimiter(',')
      ->expected(3);
  app.add_option("--storage-bytes-per-s", options.storage_bytes_per_s,
                 "planner input: storage read rate (0 = measure)");
  app.add_option("--decode-per-core-per-s", options.decode_per_core_per_s,
                 "planner input: decode+augment items/s per core (0 = measure)");
  app.add_option("--augment-per-core-per-s", options.augment_per_core_per_s,
                 "planner input: augment-only items/s per core (0 = measure)");
  app.add_option("--cores", options.cores,
                 "planner input: cores preparing items (0 = the worker threads)");
  app.add_option("--worker-threads", options.worker_threads, "pipeline threads (0 = one per core)");
  app.add_option("--sampler-seed", options.sampler_seed,
                 "mixed into every job's order; 0 = orders depend on the job's seed only");
  app.add_option("--default-policy", options.default_policy,
                 "sampling policy for jobs that name none")
      ->check(CLI::IsMember({"dsa", "independent", "lockstep", "ods"}));
  std::vector<std::string> dataset_policy_flags;
  app.add_option("--dataset-policy", dataset_policy_flags,
                 "PATH=POLICY: default sampling policy for one dataset (repeatable)");
  app.add_option("--max-jobs", options.max_jobs, "most concurrent jobs");
  app.add_option("--max-shm-per-job", options.max_shm_per_job, "shared-memory bytes per job");
  app.add_option("--max-shm-total", options.max_shm_total, "shared-memory bytes for all jobs");
  app.add_option("--max-jobs-per-uid", options.max_jobs_per_uid,
                 "most concurrent jobs of one user (0 = --max-jobs)");
  app.add_option("--max-shm-per-uid", options.max_shm_per_uid,
                 "shared-memory bytes for one user's jobs (0 = --max-shm-total)");
  app.add_option("--max-connections-per-uid", options.max_connections_per_uid,
                 "most open connections of one user (0 = the user's job limit + 8)");
  app.add_option("--max-image-pixels", options.max_image_pixels, "largest image accepted");
  app.add_option("--hold-budget-ms", options.hold_budget_ms,
                 "most a job is held per epoch for a slower peer (0: never)");
  app.add_option("--thin-hold-ms", options.thin_hold_ms,
                 "longest single hold of a job whose consumer has little buffered");
  app.add_option("--metrics-port", options.metrics_port,
                 "serve Prometheus metrics on 127.0.0.1:PORT (0 disables)");
  app.add_option("--admin-group", options.admin_group,
                 "group whose members see every job and may cancel any or drain galleyd");
  app.add_option("--log-level", options.log_level, "trace|debug|info|warn|error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  app.add_flag("--owner-only", options.owner_only,
               "serve only connections from the uid galleyd runs as (a personal daemon)");
  app.add_flag("--detach", options.detach,
               "run in the background; return once the socket is served");
  app.add_option("--idle-exit", options.idle_exit_seconds,
                 "exit after SECONDS with no job open (0 = never)")
      ->check(CLI::NonNegativeNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    app.exit(e);
    *exit_now = true;
    return options;
  } catch (const CLI::ParseError& e) {
    return Status::InvalidArgument(e.what());
  }
  if (options.max_jobs == 0) return Status::InvalidArgument("--max-jobs must be at least 1");
  if (options.max_shm_total == 0) {
    const uint64_t physical = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                              static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    options.max_shm_total = std::max<uint64_t>(
        uint64_t{64} << 20, std::min<uint64_t>(uint64_t{16} << 30, physical / 4));
  }
  GALLEY_RETURN_IF_ERROR(ValidateCacheOptions(options));
  for (const std::string& flag : dataset_policy_flags) {
    const size_t eq = flag.rfind('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument("--dataset-policy takes PATH=POLICY, got '" + flag + "'");
    }
    options.dataset_policies[flag.substr(0, eq)] = flag.substr(eq + 1);
  }
  // Keys name datasets as the daemon sees them (canonical paths); every
  // policy must be one galleyd knows.
  std::map<std::string, std::string> canonical;
  for (const auto& [path, policy] : options.dataset_policies) {
    if (policy != "dsa" && policy != "dsa-chain" && policy != "independent" &&
        policy != "lockstep" && policy != "ods") {
      return Status::InvalidArgument("unknown sampling policy '" + policy + "' for dataset " +
                                     path);
    }
    std::error_code ec;
    auto key = std::filesystem::weakly_canonical(path, ec);
    canonical[ec ? path : key.string()] = policy;
  }
  options.dataset_policies = std::move(canonical);
  return options;
}

}  // namespace galley
