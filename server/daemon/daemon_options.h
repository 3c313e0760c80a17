// DaemonOptions: everything an operator can set on galleyd, with defaults.
//
// Filled in one place (LoadDaemonOptions) from, in increasing precedence:
// built-in defaults, a TOML config file, command-line flags. A plain value.
#ifndef GALLEY_SERVER_DAEMON_DAEMON_OPTIONS_H_
#define GALLEY_SERVER_DAEMON_DAEMON_OPTIONS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "galley/status.h"

namespace galley {

struct DaemonOptions {
  // Control socket. Default: galley::DefaultSocketPath() (XDG_RUNTIME_DIR
  // for a user daemon, /run/galley for a system service).
  std::string socket_path;

  // Directories galleyd may serve datasets from. Empty: any directory the
  // daemon can read (fine for a personal daemon; set it for a shared one).
  std::vector<std::string> allowed_roots;

  // Cache budget in bytes, split between the encoded, decoded and augmented
  // tiers. 0 disables caching (no tiers, no demand counts, no node probe).
  // Default 1 GiB.
  uint64_t cache_bytes = uint64_t{1} << 30;

  // Cache eviction: "refcount" (default; evicts the items fewest jobs still
  // need this epoch and never swaps equals) or "lru" (the baseline, which
  // thrashes under random per-epoch order).
  std::string cache_eviction = "refcount";

  // Admin's split of cache_bytes in percent: {encoded, decoded, augmented},
  // each 0..100, adding up to at most 100. Empty (default): the model-driven
  // planner chooses it and re-plans as datasets and jobs come and go.
  std::vector<int> cache_split;

  // Planner inputs the daemon otherwise measures at start (0 = measure).
  // Override them when the probe cannot see the truth: e.g. storage that the
  // page cache makes look faster than it is under load.
  double storage_bytes_per_s = 0;
  double decode_per_core_per_s = 0;   // decode + augment, items/s per core
  double augment_per_core_per_s = 0;  // augment a decoded item, items/s per core
  uint32_t cores = 0;                 // 0 = the pipeline's worker threads

  // Threads that read, decode and augment. 0: one per core.
  uint32_t worker_threads = 0;

  // Mixed into every job's order (and each dataset sampler's stream). 0, the
  // default, keeps a job's order a pure function of its own (seed, epoch):
  // the same after a restart and on every node. Set it to vary the orders of
  // all jobs of this daemon. DDP splits never depend on it.
  uint64_t sampler_seed = 0;

  // Default sampling policy for jobs that do not name one.
  std::string default_policy = "dsa";
  // Per-dataset default policies, keyed by the dataset's path (canonical
  // once loaded): TOML table [dataset_policies], or --dataset-policy
  // PATH=POLICY. A job that names a policy still gets its own.
  std::map<std::string, std::string> dataset_policies;

  // Tar shard datasets (docs/datasets.md). The on-disk index of each shard
  // version is kept in tar_index_dir (created 0700, files 0600: member names
  // can be private), at most tar_index_max_bytes in all, oldest removed
  // first. Default dir: $XDG_CACHE_HOME/galley/tar-index, else
  // ~/.cache/galley/tar-index; "" or "none" disables the cache. At most
  // max_open_shards shard descriptors stay open per dataset.
  std::string tar_index_dir;
  uint64_t tar_index_max_bytes = uint64_t{1} << 30;
  uint32_t max_open_shards = 128;
  // Jobs at different speeds (docs/sampling.md §3.3): the most time per
  // epoch a job whose consumer has little buffered may be held so that a
  // full peer shares the next wave (0: jobs are never held), and the
  // longest one such hold.
  uint32_t hold_budget_ms = 100;
  uint32_t thin_hold_ms = 10;

  // Limits: a request beyond them is refused with a clear error.
  uint32_t max_jobs = 64;
  uint64_t max_shm_per_job = uint64_t{2} << 30;  // 2 GiB
  // 0 = derived from the node: a quarter of physical memory, at most 16 GiB
  // (rings are memfd pages, reserved at job open, so they count as memory).
  uint64_t max_shm_total = 0;
  // Per-uid shares, so one user cannot lock others out: 0 means the
  // node-wide limit (max_jobs, max_shm_total); connections default to the
  // user's jobs plus 8 (queries, handshakes).
  uint32_t max_jobs_per_uid = 0;
  uint64_t max_shm_per_uid = 0;
  uint32_t max_connections_per_uid = 0;
  uint32_t max_prefetch = 64;
  uint32_t max_batch_size = 65536;
  // Images with more pixels are refused (decompression bombs). PIL's limit.
  uint64_t max_image_pixels = 178956970;

  // Members of this group (besides root and galleyd's own user) see every
  // user's jobs and datasets and may cancel any job or drain the daemon.
  // Empty (default): no group.
  std::string admin_group;

  // Prometheus metrics on http://127.0.0.1:<port>/metrics. 0 disables.
  uint16_t metrics_port = 0;

  // trace, debug, info, warn, error.
  std::string log_level = "info";

  // A personal daemon: refuse every connection whose peer (SO_PEERCRED) is
  // not the uid galleyd runs as. The daemon a job starts for its user on
  // first use runs this way. Default off (a node-wide service).
  bool owner_only = false;

  // Exit cleanly after this many seconds with no job open (0 = never). The
  // daemon a job starts for its user exits this way when the last job ends.
  double idle_exit_seconds = 0;

  // Start in the background: galleyd forks twice (a new session, parent
  // init), and the command returns only once the socket is served (exit 0)
  // or startup failed (exit 1). stdout/stderr stay where the caller put them.
  bool detach = false;
};

// Parses argv (and the TOML file named by --config). On --help/--version,
// prints and sets *exit_now. Errors name the flag or the config key.
Result<DaemonOptions> LoadDaemonOptions(int argc, char** argv, bool* exit_now);

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_DAEMON_OPTIONS_H_
