#include "server/daemon/daemon_options.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <toml++/toml.h>

#include "galley/client.h"

namespace galley {
namespace {

// Reads an optional key of the right type from the TOML table.
template <typename T>
Status ReadKey(const toml::table& table, const char* key, T* out) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return Status::Ok();
  if constexpr (std::is_same_v<T, std::string>) {
    auto value = node->value<std::string>();
    if (!value) return Status::InvalidArgument(std::string("config key '") + key + "' must be a string");
    *out = *value;
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
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "default_policy", &options->default_policy));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "max_jobs", &options->max_jobs));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "max_shm_per_job", &options->max_shm_per_job));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "max_shm_total", &options->max_shm_total));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "max_image_pixels", &options->max_image_pixels));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "metrics_port", &options->metrics_port));
  GALLEY_RETURN_IF_ERROR(ReadKey(t, "log_level", &options->log_level));
  if (const toml::node* roots = t.get("allowed_roots")) {
    const toml::array* list = roots->as_array();
    if (list == nullptr) return Status::InvalidArgument("config key 'allowed_roots' must be a list");
    for (const toml::node& root : *list) {
      auto value = root.value<std::string>();
      if (!value) return Status::InvalidArgument("config key 'allowed_roots' must hold strings");
      options->allowed_roots.push_back(*value);
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
  app.set_version_flag("--version", "galleyd 0.1.0");
  app.add_option("--config", config_path, "TOML config file (flags override it)");
  app.add_option("--socket", options.socket_path, "control socket path");
  app.add_option("--allowed-root", options.allowed_roots,
                 "directory datasets may be served from (repeatable; default: any)");
  app.add_option("--cache-bytes", options.cache_bytes, "cache budget in bytes (0 disables)");
  app.add_option("--worker-threads", options.worker_threads, "pipeline threads (0 = one per core)");
  app.add_option("--default-policy", options.default_policy,
                 "sampling policy for jobs that name none")
      ->check(CLI::IsMember({"dsa", "independent", "lockstep", "ods"}));
  app.add_option("--max-jobs", options.max_jobs, "most concurrent jobs");
  app.add_option("--max-shm-per-job", options.max_shm_per_job, "shared-memory bytes per job");
  app.add_option("--max-shm-total", options.max_shm_total, "shared-memory bytes for all jobs");
  app.add_option("--max-image-pixels", options.max_image_pixels, "largest image accepted");
  app.add_option("--metrics-port", options.metrics_port,
                 "serve Prometheus metrics on 127.0.0.1:PORT (0 disables)");
  app.add_option("--log-level", options.log_level, "trace|debug|info|warn|error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
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
  return options;
}

}  // namespace galley
