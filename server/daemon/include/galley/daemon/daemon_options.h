// DaemonOptions: everything an operator can set on galleyd, with defaults.
//
// Filled in one place (LoadDaemonOptions) from, in increasing precedence:
// built-in defaults, a TOML config file, command-line flags. Every key is
// declared once in daemon_options.cc (its TOML name, flag, accepted values
// and whether SIGHUP may change it); an unknown key or a bad value is an
// error naming the key, the same for the file and for flags. A plain value;
// the functions here are thread-safe (they touch no shared state).
#ifndef GALLEY_SERVER_DAEMON_DAEMON_OPTIONS_H_
#define GALLEY_SERVER_DAEMON_DAEMON_OPTIONS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "galley/sampling_policies.h"
#include "galley/status.h"

namespace galley {

struct DaemonOptions {
  // Control socket. Default: galley::DefaultSocketPath() (XDG_RUNTIME_DIR
  // for a user daemon, /run/galley for a system service).
  std::string socket_path;

  // The socket's group and mode. Defaults: for a node-wide service, group
  // `galley` if the node has one (else galleyd's own) and mode 0660; for an
  // --owner-only daemon, galleyd's group and 0666 (its peer check refuses
  // other users with a message saying what to do).
  std::string socket_group;
  uint32_t socket_mode = 0660;

  // Directories galleyd may serve datasets from (absolute paths). Required
  // for a node-wide service; an --owner-only daemon with none serves any
  // directory its user can read.
  std::vector<std::string> allowed_roots;

  // Cache budget in bytes, split between the encoded, decoded and augmented
  // tiers. 0 disables caching (no tiers, no demand counts, no node probe).
  // Default 1 GiB.
  uint64_t cache_bytes = uint64_t{1} << 30;

  // Commit the decoded tier's memory (its arena) ahead of use, from a thread
  // at idle priority, so that a filling cache does not pay a page fault per
  // page (docs/cache.md, "Memory"). The idle daemon then holds up to
  // cache_bytes of resident memory from its first seconds. Default on for a
  // node-wide daemon, off for an owner_only one (it starts when a job needs
  // it, so there is nothing to get ahead of).
  bool cache_prefault = true;

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
  // page cache makes look faster than it is under load. With the decode,
  // augment and memory figures all given, galleyd starts without its node
  // probe (about half a second of one core, before it listens): nodes of one
  // kind can be measured once and share the figures.
  double storage_bytes_per_s = 0;
  double decode_per_core_per_s = 0;   // decode + augment, items/s per core
  double augment_per_core_per_s = 0;  // augment a decoded item, items/s per core
  double memory_bytes_per_s = 0;      // memory copy bandwidth
  uint32_t cores = 0;                 // 0 = the pipeline's worker threads

  // The node-local disk tier below the memory tiers (docs/cache.md, "The
  // disk tier"): an absolute folder on a local disk (NVMe), made 0700 when
  // missing, used by this galleyd alone and kept across restarts. Empty
  // (default): no disk tier. Its entries may take disk_cache_bytes on disk
  // (default 16 GiB, at least 1 MiB): size it below the file system's free
  // space, as a write the file system refuses is only counted.
  std::string disk_cache;
  uint64_t disk_cache_bytes = uint64_t{16} << 30;

  // The remote cache tier shared by every node (docs/cache.md, "The remote
  // tier"): memcached servers as "HOST:PORT" (HOST a name, IPv4 address or
  // [IPv6 address]). Empty (default): no remote tier, nothing changes.
  std::vector<std::string> remote_cache_servers;
  // The SASL user and password for those servers: a TOML file with
  // `username` and `password`, owned by galleyd's user and readable by no
  // one else (chmod 600). Required with remote_cache_servers.
  std::string remote_cache_credentials;
  // Bounds on the time a remote lookup may cost when a server is dead or
  // cut off: the connect timeout and each wait for an answer (ms). A server
  // that failed is left out of the ring for remote_cache_retry_s seconds,
  // then tried again.
  uint32_t remote_cache_connect_timeout_ms = 200;
  uint32_t remote_cache_io_timeout_ms = 200;
  uint32_t remote_cache_retry_s = 2;
  // What items read from storage are written to the remote tier as:
  // "encoded" (the file's bytes), "decoded" (RGB pixels, when the servers'
  // item size allows), or "auto" (default): the planner's model decides.
  std::string remote_cache_form = "auto";
  // Largest value written (header included); memcached's item limit (-I,
  // default 1 MiB). Larger items are not written, only counted.
  uint64_t remote_cache_max_value_bytes = uint64_t{1} << 20;
  // Planner inputs for the remote tier (0 = measure at start): B_cache, the
  // rate this node reads from the servers together; their capacity; and
  // B_NIC, this node's network link (measured from the link speed of the
  // interface that reaches the first server; unknown = unbounded).
  double remote_cache_bytes_per_s = 0;
  uint64_t remote_cache_capacity_bytes = 0;
  double nic_bytes_per_s = 0;

  // For benchmarks and tests only: storage reads are slowed to this many
  // bytes/s (0, the default: not at all), through a pipe shared by every
  // galleyd naming the same storage_throttle_file ("" = this daemon's own):
  // several daemons on one machine then stand for nodes sharing a file
  // server (bench/README.md).
  double storage_throttle_bytes_per_s = 0;
  std::string storage_throttle_file;

  // Threads that read, decode and augment. 0: one per core.
  uint32_t worker_threads = 0;

  // Mixed into every job's order (and each dataset sampler's stream). 0, the
  // default, keeps a job's order a pure function of its own (seed, epoch):
  // the same after a restart and on every node. Set it to vary the orders of
  // all jobs of this daemon. DDP splits never depend on it.
  uint64_t sampler_seed = 0;

  // Default sampling policy for jobs that do not name one.
  std::string default_policy{SamplingPolicyNameOf(kDefaultSamplingPolicy)};
  // Per-dataset default policies, keyed by the dataset's path (canonical
  // once loaded): TOML table [dataset_policies], or --dataset-policy
  // PATH=POLICY. A job that names a policy still gets its own.
  std::map<std::string, std::string> dataset_policies;

  // Tar shard datasets (docs/datasets.md). The on-disk index of each shard
  // version is kept in tar_index_dir (created 0700, files 0600: member names
  // can be private), at most tar_index_max_bytes in all, oldest removed
  // first. Default dir: $XDG_CACHE_HOME/galley/tar-index, else
  // ~/.cache/galley/tar-index; "" or "none" disables the cache. At most
  // max_open_shards shard descriptors stay open per dataset, and at most
  // max_open_shards_total for every dataset together (least recently used
  // closed first); a dataset whose last job ended closes its own. 0, the
  // default, derives the total from galleyd's descriptor limit: a quarter of
  // RLIMIT_NOFILE (soft, as galleyd starts), from 16 to 4096.
  std::string tar_index_dir;
  uint64_t tar_index_max_bytes = uint64_t{1} << 30;
  // Tar shards kept as objects in S3-compatible storage (docs/datasets.md,
  // "Datasets in object storage"): the endpoints jobs may name (scheme and
  // authority; "aws" for AWS's own), none by default, so an admin decides
  // where galleyd connects; the ranged GETs of prefetched members each such
  // dataset keeps in flight (1 to 4096, default 64), and the bytes those
  // and the fetched members not yet read may hold (default 256 MiB, at
  // least 1 MiB).
  std::vector<std::string> allowed_s3_endpoints;
  // How a listing of images kept one per object (an s3:// prefix or a
  // manifest naming objects) is shared with a job signing with another
  // access key (docs/access.md): "verify" (default), after that job's own
  // LIST and a HEAD of every object; "per_key", never: each access key gets
  // a listing, fetches and cache entries of its own.
  std::string s3_folder_sharing = "verify";
  // The CA certificates (PEM) an https endpoint's certificate must chain
  // to; "" (the default): the system's CA store. A certificate that does
  // not is refused; there is no insecure fallback.
  std::string s3_ca_file;
  // How long a read whose every admitted credential the store refused
  // (expired) waits for a job's refreshed ones before it fails (0 to
  // 3,600,000 ms; default 60 s; docs/access.md, "Temporary credentials").
  uint32_t s3_refresh_wait_ms = 60000;
  // How many times a request the store failed in a way another try may mend
  // (unreachable, reset, 5xx, a stall) is sent again, and the most a backoff
  // between two tries waits (docs/datasets.md, "Retries and errors"). They
  // bound how long a read waits for a store that went down before its item
  // fails naming the store: about the sum of min(cap, 100 ms x 2^try).
  uint32_t s3_retries = 5;
  uint32_t s3_retry_cap_ms = 5000;
  uint32_t s3_requests_in_flight = 64;
  uint64_t s3_prefetch_bytes = uint64_t{256} << 20;
  // Bytes of the shards an S3 shard set's listing streams that the set
  // keeps for their first reads (ShardOptions::object_listing_keep_bytes).
  uint64_t s3_listing_keep_bytes = uint64_t{256} << 20;
  uint32_t max_open_shards = 128;
  uint32_t max_open_shards_total = 0;
  // Manifests (docs/datasets.md): the longest line galleyd reads, the header
  // included, and the most columns a header may name. A listing holds at
  // most one such line at a time, so these bound what one hostile manifest
  // can make a listing thread hold and do; a manifest beyond them is refused
  // at open, naming the limit.
  uint64_t max_manifest_line_bytes = uint64_t{1} << 20;
  uint32_t max_manifest_columns = 1024;
  // Jobs at different speeds (docs/sampling.md §3.3): the most time per
  // epoch a job whose consumer has little buffered may be held so that a
  // full peer shares the next wave (0: jobs are never held), the longest
  // one such hold, and how long a peer's ring stays full before no job is
  // held for it at all.
  uint32_t hold_budget_ms = 100;
  uint32_t thin_hold_ms = 10;
  uint32_t peer_stall_ms = 1000;
  // Drawing ahead (docs/sampling.md §3.4): the most batches a job whose ring
  // is full draws beside the jobs produced for (0: it is masked), and
  // whether it goes on into its next epoch once it has drawn its whole
  // epoch (SchedulerOptions).
  uint32_t draw_ahead_batches = 64;
  bool draw_across_epochs = true;

  // Limits: a request beyond them is refused with a clear error.
  uint32_t max_jobs = 64;
  uint64_t max_shm_per_job = uint64_t{2} << 30;  // 2 GiB
  // 0 = derived from the node: a quarter of physical memory, at most 16 GiB
  // (rings are memfd pages, reserved at job open, so they count as memory).
  uint64_t max_shm_total = 0;
  // Per-uid shares, so one user cannot lock others out. 0, the default,
  // derives them: on a node-wide daemon half of the node-wide limit
  // (max_jobs / 2 jobs, max_shm_total / 2 bytes of rings: with the defaults
  // 32 jobs, enough for one user's sweep, and the other half left to the
  // rest); on an --owner-only daemon, which has one user, the whole of it.
  // Connections default to the user's jobs plus 8 (queries, handshakes).
  uint32_t max_jobs_per_uid = 0;
  uint64_t max_shm_per_uid = 0;
  uint32_t max_connections_per_uid = 0;
  // galleyd's own memory one user's requests may make it hold: the listings
  // they asked for first and their jobs' item lists (UserMemory). 0, the
  // default, is the user's ring share (max_shm_per_uid as resolved).
  uint64_t max_memory_per_uid = 0;
  uint32_t max_prefetch = 64;
  uint32_t max_batch_size = 65536;
  // Images with more pixels are refused (decompression bombs). PIL's limit.
  uint64_t max_image_pixels = 178956970;

  // Members of this group (besides root and galleyd's own user) see every
  // user's jobs and datasets and may cancel any job or drain the daemon.
  // Empty (default): no group.
  std::string admin_group;

  // Prometheus metrics on http://<metrics_host>:<metrics_port>/metrics;
  // port 0 (the default) disables them. Key metrics_address = "HOST:PORT"
  // sets both; metrics_port alone keeps the loopback host.
  std::string metrics_host = "127.0.0.1";
  uint16_t metrics_port = 0;

  // trace, debug, info, warn, error, critical, off.
  std::string log_level = "info";

  // Append the log, and anything else galleyd writes to stdout or stderr, to
  // this file (opened before anything is logged, mode 0640, created if
  // missing) instead of the caller's stderr. Default "" (stderr; journald
  // under systemd). A file, or a folder on its way, that another user could
  // write or swap is refused at start (OpenLogFile, log_file.h).
  std::string log_file;

  // A personal daemon: refuse every connection whose peer (SO_PEERCRED) is
  // not the uid galleyd runs as. The daemon a job starts for its user on
  // first use runs this way. Default off (a node-wide service).
  bool owner_only = false;

  // Exit cleanly after this many seconds with no job open (0 = never). The
  // daemon a job starts for its user exits this way when the last job ends.
  double idle_exit_seconds = 0;

  // Start in the background: galleyd forks twice (a new session, parent
  // init), and the command returns only once the socket is served (exit 0)
  // or startup failed (exit 1; a refused log_file: 2, before any fork).
  // The detached process keeps none of the caller's descriptors: once it
  // serves, a stdout or stderr that is not a regular file (a pipe, a
  // terminal) is replaced by /dev/null, so a caller that reads them to the
  // end (`galleyd --detach | cat`, `subprocess.run(..., capture_output=True)`)
  // returns. Use log_file to keep the log.
  bool detach = false;
};

// Where a key's value came from.
enum class OptionSource { kDefault, kFile, kFlag };

// The options galleyd runs with, and where each key's value came from.
struct LoadedOptions {
  DaemonOptions options;
  std::string config_path;                      // --config FILE; "" without one
  std::map<std::string, OptionSource> sources;  // every key, by its TOML name
  std::vector<std::string> warnings;            // worth logging, not fatal
  bool check_config = false;                    // --check-config was given
  bool exit_now = false;                        // --help or --version printed
};

// Parses argv (argv[0] is the program) and the TOML file named by --config.
// On --help/--version prints to stdout and sets exit_now. On any error,
// InvalidArgument whose message holds every error found, one per line, each
// starting with the key it is about:
//   log_level (flag --log-level): got 'verbose'; expected one of trace, ...
Result<LoadedOptions> LoadDaemonOptions(int argc, const char* const* argv);
Result<LoadedOptions> LoadDaemonOptions(const std::vector<std::string>& args);

// The errors in a status LoadDaemonOptions returned, one per line.
std::vector<std::string> ConfigErrors(const Status& status);

// Every key, one per line, in TOML (usable as a config file), with where its
// value came from and whether SIGHUP applies a change: --check-config.
std::string RenderEffectiveConfig(const LoadedOptions& loaded);

// One key whose value differs between the running options and a reloaded
// file; `reloadable` says whether SIGHUP applies it or it needs a restart.
struct OptionChange {
  std::string key, before, after;  // values as RenderEffectiveConfig writes them
  bool reloadable = false;
};
std::vector<OptionChange> DiffOptions(const DaemonOptions& running, const DaemonOptions& updated);

// `running` with the values of `updated` for every key SIGHUP may change;
// the others keep their running values.
DaemonOptions WithReloadableKeys(const DaemonOptions& running, const DaemonOptions& updated);

// A size in bytes: a plain integer, or a number with a unit: K, M, G, T
// and KiB, MiB, GiB, TiB are powers of 1024; KB, MB, GB, TB powers of
// 1000; B is bytes. "8G", "512M", "1.5GiB", "1048576". Case-insensitive.
Result<uint64_t> ParseSize(std::string_view text);

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_DAEMON_OPTIONS_H_
