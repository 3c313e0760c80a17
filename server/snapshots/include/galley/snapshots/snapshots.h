// Snapshots: what galleyd's components report about themselves, as plain
// values.
//
// Each component fills its own snapshot (ItemPipeline::Snapshot,
// Scheduler::Snapshot, ServedJob::Snapshot, CachePlanner::Snapshot and
// CacheSnapshot, DatasetRegistry::Snapshot); the ControlServer assembles
// them into the replies to queries, filtered for the asking user. They are
// rendered in exactly two places: snapshot_json.{h,cc} (the replies galleyctl
// and the Python module read) and prometheus_text.cc (the /metrics page).
// Both read the same fields, so renaming or dropping one is a compile error
// in each renderer rather than a key or metric that silently disappears.
//
// Copies own everything they hold (no pointers into live state), so a
// snapshot may be rendered on any thread after the component's locks are
// released.
#ifndef GALLEY_SERVER_SNAPSHOTS_SNAPSHOTS_H_
#define GALLEY_SERVER_SNAPSHOTS_SNAPSHOTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace galley {

// One server of the remote tier, as galleyd last found it.
struct RemoteServerSnapshot {
  std::string address;    // HOST:PORT
  bool reachable = true;  // false from a failure until it answers again
  uint64_t failures = 0;  // times it went from answering to failing
  std::string last_error;
};

// The shared remote tier (RemoteTier) since start.
struct RemoteTierSnapshot {
  std::string engine;      // "memcached"
  std::string write_form;  // what items read from storage are written as
  uint64_t lookups = 0;
  uint64_t encoded_hits = 0;
  uint64_t decoded_hits = 0;
  uint64_t misses = 0;
  uint64_t errors = 0;   // lookups that met a failing server (the item came from storage)
  uint64_t corrupt = 0;  // values refused by the length and checksum check
  uint64_t bytes_read = 0;
  double lookup_seconds = 0;
  uint64_t writes = 0;
  uint64_t bytes_written = 0;
  uint64_t write_errors = 0;
  uint64_t writes_dropped = 0;    // the write queue was full
  uint64_t writes_oversized = 0;  // larger than the servers take
  uint64_t write_queue_bytes = 0;
  std::vector<RemoteServerSnapshot> servers;
};

// The node-local disk tier (docs/cache.md, "The disk tier"): counters since
// start, and what it holds now.
struct DiskTierSnapshot {
  std::string dir;
  uint64_t budget_bytes = 0;
  uint64_t bytes = 0;  // charged bytes on disk (4 KiB blocks)
  uint64_t entries = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;  // damaged entries included
  uint64_t writes = 0;
  uint64_t write_drops = 0;   // the write queue was full
  uint64_t write_errors = 0;  // the file system refused a write
  uint64_t damaged = 0;       // entries that failed their checks, removed
  uint64_t evictions = 0;
  uint64_t write_queue_bytes = 0;
  uint64_t foreign_files = 0;  // names in the entry folders that are not entries
  bool indexed = false;        // what an earlier run left is counted
  double index_seconds = 0;
};

// ItemPipeline's counters since start.
struct PipelineSnapshot {
  uint32_t threads = 0;
  bool cache = false;  // a TieredCache is attached
  uint64_t file_reads = 0;
  uint64_t field_reads = 0;  // field records read apart from their item (docs/datasets.md)
  uint64_t bytes_read = 0;
  uint64_t decodes = 0;
  uint64_t region_decodes = 0;  // decodes of only the rectangle the crops read
  uint64_t augments = 0;
  uint64_t decoded_hits = 0;    // items that skipped read and decode
  uint64_t encoded_hits = 0;    // items that skipped the read
  uint64_t augmented_hits = 0;  // samples that skipped their transform
  uint64_t failures = 0;
  // Packed pixels of max_resolution datasets (docs/datasets.md): packed for
  // an encoded tier, unpacked from one, entries that did not unpack.
  uint64_t packs = 0;
  uint64_t unpacks = 0;
  uint64_t unpack_failures = 0;
  double read_seconds = 0;
  double decode_seconds = 0;
  double augment_seconds = 0;
  double pack_seconds = 0;
  double unpack_seconds = 0;
  std::optional<RemoteTierSnapshot> remote;  // when a remote tier is configured
  std::optional<DiskTierSnapshot> disk;      // when a disk tier is configured
};

// One sampler group of the Scheduler: the jobs on one dataset sharing one
// sampling policy.
struct SamplerGroupSnapshot {
  std::string dataset;  // the dataset's root
  std::string policy;
  uint64_t jobs = 0;
  uint64_t requests = 0;  // item deliveries to jobs
  // Sampler loads: items prepared once for all the jobs that drew them in
  // one wave, whatever that cost (a cache tier's copy counts).
  uint64_t loads = 0;
  double loads_per_request = 0;  // 0 before the first request
  uint64_t substitutions = 0;    // ods: draws replaced by cached items
  uint64_t job_seeds = 0;        // different JobSpec seeds among the jobs
  // SamplingPolicy::OrdersFollowJobSeeds: false when jobs started together
  // on the same items share one order whatever their seeds (dsa, dsa-chain,
  // ods), so a job whose peers gave another seed does not get its own order.
  bool orders_follow_seeds = false;
  // What the loads cost: items read from storage, decoded, and taken from a
  // cache tier with neither; each also per request (docs/operations.md).
  uint64_t file_reads = 0;
  uint64_t decodes = 0;
  uint64_t cache_hits = 0;
  double file_reads_per_request = 0;
  double decodes_per_request = 0;
  double cache_hits_per_request = 0;
};

// The batches galleyd prepared since start, every job's (Scheduler::Totals).
struct BatchTotalsSnapshot {
  uint64_t prepared = 0;
  // Prepared and never taken by a consumer: its job had sought to another
  // epoch or closed before the consumer took it (each such batch is also
  // one of `prepared`).
  uint64_t unread = 0;
};

// One open job (ServedJob).
struct JobSnapshot {
  uint64_t job_id = 0;
  std::string name;
  std::string dataset;  // the dataset's root
  uint32_t owner_uid = 0;
  int32_t owner_pid = 0;
  std::string policy;
  uint32_t batch_size = 0;
  uint64_t epoch_size = 0;
  uint64_t batches_per_epoch = 0;
  uint32_t prefetch = 0;
  uint64_t segment_bytes = 0;
  uint64_t batches = 0;         // published
  uint64_t batches_unread = 0;  // prepared, never taken: left behind by a seek
  uint64_t samples = 0;
  uint64_t skipped = 0;
  uint64_t epochs_completed = 0;
  double produce_seconds = 0;
  double ring_full_seconds = 0;  // the consumer was slower than galleyd
  double peer_hold_seconds = 0;  // held so that a slower peer could share a wave
  uint64_t peer_holds = 0;       // how many holds peer_hold_seconds sums
  // Items the job drew in rounds it shared while its ring was full, not yet
  // in its batches, now and at most (docs/sampling.md §3.4).
  uint64_t drawn_ahead = 0;
  uint64_t drawn_ahead_peak = 0;
  // Items its batches are behind the furthest job of its sampler group
  // (positions across epochs), now and at most.
  uint64_t lag = 0;
  uint64_t lag_peak = 0;
  double consumer_wait_seconds = 0;  // the consumer waited for a batch
  uint64_t consumer_waits = 0;
  double uptime_seconds = 0;
  double samples_per_second = 0;  // mean since the job opened
  // The DDP split (DistributedSplit): jobs on one node with equal
  // world_size, nodes, node_rank and shard_seed load the same items.
  uint32_t rank = 0;
  uint32_t world_size = 1;
  uint32_t nodes = 1;  // 1 when the node layout is not known
  uint32_t node_rank = 0;
  uint64_t shard_seed = 0;  // the split's seed: JobSpec::shard_seed, else seed
  // S3 jobs: credential refreshes admitted, and refused (docs/access.md).
  uint64_t credential_refreshes = 0;
  uint64_t credential_refreshes_refused = 0;
};

// The counts of the object store a set of shards kept as objects is read
// from, since galleyd started (objectstore::ObjectStoreCounters): one store
// serves every such set, so these are the node's.
struct ObjectStoreSnapshot {
  uint64_t gets = 0;  // GET requests sent, retries included
  uint64_t heads = 0;
  uint64_t lists = 0;
  uint64_t bytes = 0;  // body bytes the GETs received
  uint64_t retries = 0;
  uint64_t failures = 0;  // requests that failed after their retries
  uint64_t in_flight = 0;
  uint64_t full_bodies = 0;  // ranged GETs answered with the whole object
};

// A tar shard set's listing (server/dataset/shard_source.h) and the
// process-wide index counters.
struct ShardSetSnapshot {
  uint64_t shards = 0;
  uint64_t samples = 0;
  uint64_t skipped_members = 0;
  uint64_t skipped_samples = 0;
  std::string first_skipped_sample;
  uint64_t damaged_shards = 0;
  std::string first_damage;
  uint64_t from_index_cache = 0;
  uint64_t stale_idx = 0;
  uint64_t from_idx = 0;  // shards listed from a DALI .idx hint
  double index_seconds = 0;
  double index_age_seconds = 0;
  bool stale = false;
  uint64_t daemon_shards_scanned = 0;
  uint64_t daemon_idx_hints_used = 0;
  uint64_t daemon_index_cache_hits = 0;
  uint64_t daemon_stale_idx = 0;
  // Shards kept as objects: the store's counts; absent for files.
  std::optional<ObjectStoreSnapshot> object_store;
  // Shards kept as objects: this set's reads served by a prefetch, and
  // those that made a GET of their own; the GETs it started (its members'
  // ranges, not its listing's streams) and their body bytes; the HEADs
  // that admitted other access keys to it.
  uint64_t prefetched_reads = 0;
  uint64_t on_demand_reads = 0;
  uint64_t gets = 0;
  uint64_t bytes = 0;
  uint64_t verify_heads = 0;
  // Reads served by the bytes the set's listing streamed and kept, and the
  // bytes kept now (ShardOptions::object_listing_keep_bytes).
  uint64_t listing_reads = 0;
  uint64_t listing_kept_bytes = 0;
};

// A dataset of one image per object (an s3:// prefix read as an
// ImageFolder, or a manifest whose cells name objects): what it asked the
// store for, and the node's store counts (shared with every dataset of
// objects: the retries and LIST pages are counted there). Never a
// credential.
struct ObjectFolderSnapshot {
  std::string kind;  // "prefix" or "manifest"
  uint64_t prefixes = 0;
  uint64_t prefetched_reads = 0;  // reads served by a prefetch
  uint64_t on_demand_reads = 0;   // reads that made a GET of their own
  uint64_t gets = 0;              // GETs this dataset started
  uint64_t bytes = 0;             // body bytes they received
  uint64_t verify_heads = 0;      // objects HEADed to admit another access key
  uint64_t manifest_heads = 0;    // HEADs of a manifest object
  uint64_t listings = 0;          // prefix listings (each every page)
  ObjectStoreSnapshot object_store;
};

// A listing under way now: a shard set, an ImageFolder tree or a manifest.
struct IndexingSnapshot {
  std::string path;  // the first shard, the folder or the manifest
  std::string kind;  // "shards", "folder", "manifest"
  std::string unit;  // "shards", "files", "lines"
  uint64_t done = 0;
  std::optional<uint64_t> total;  // unknown while a folder is walked
  double seconds = 0;
  double rate = 0;            // units/s
  double seconds_left = -1;   // -1 while unknown
  uint64_t classes = 0;       // folders: class folders found
  uint64_t classes_done = 0;  // folders: class folders walked
};

// One listed dataset of the DatasetRegistry.
struct DatasetSnapshot {
  std::string key;  // what DatasetRegistry::Forget takes
  std::string root;
  uint32_t index = 0;
  uint64_t items = 0;
  uint64_t classes = 0;
  uint64_t bytes = 0;
  double listed_seconds_ago = 0;
  uint64_t listings = 0;                   // how often this key was listed (1 + re-listings)
  std::string fingerprint;                 // the content fingerprint: the remote tier's key
  std::optional<ShardSetSnapshot> shards;  // tar shard sets only
  // A prefix folder or a manifest of objects only.
  std::optional<ObjectFolderSnapshot> objects;
};

// The job limits in force (JobLimits), as status shows them.
struct LimitsSnapshot {
  uint32_t max_jobs = 0;
  uint64_t max_shm_per_job = 0;
  uint64_t max_shm_total = 0;
  uint32_t max_jobs_per_uid = 0;
  uint64_t max_shm_per_uid = 0;
  uint32_t max_connections_per_uid = 0;
  uint64_t max_memory_per_uid = 0;
};

// galleyd's file descriptors: the process's, and those of tar shards kept
// open between reads (every dataset's together).
struct DescriptorsSnapshot {
  int64_t open = -1;             // open now; -1 when they could not be counted
  uint64_t limit = 0;            // RLIMIT_NOFILE (soft); 0 when unknown
  uint64_t shards_open = 0;      // shard descriptors open now
  uint64_t shards_limit = 0;     // max_open_shards_total
  uint64_t shards_evicted = 0;   // closed to stay within max_open_shards(_total)
  uint64_t shards_released = 0;  // closed because their dataset's last job ended
  uint64_t exhausted = 0;        // times no descriptor was free (EMFILE, ENFILE)
};

// The reply to "status".
struct DaemonStatusSnapshot {
  std::string version;
  uint16_t protocol_version = 0;
  int64_t uid = 0;  // the daemon's effective uid
  bool owner_only = false;
  bool admin = false;  // the asking user
  int64_t pid = 0;
  std::string socket;
  double uptime_seconds = 0;
  uint64_t jobs = 0;       // every user's
  uint64_t your_jobs = 0;  // the jobs the asking user sees
  // galleyd memory the asking user's listings and item lists hold
  // (max_memory_per_uid counts them).
  uint64_t your_memory_bytes = 0;
  uint64_t jobs_opened = 0;
  uint64_t jobs_refused = 0;
  bool draining = false;
  uint64_t protocol_errors = 0;
  BatchTotalsSnapshot batches;
  uint64_t datasets = 0;
  uint64_t shm_bytes = 0;
  LimitsSnapshot limits;
  DescriptorsSnapshot descriptors;
  PipelineSnapshot pipeline;
  std::vector<SamplerGroupSnapshot> samplers;  // those the asking user may see
  // The node's object store (s3:// datasets); zeros when galleyd has none.
  ObjectStoreSnapshot object_store;
};

// The reply to "datasets": what the asking user may see.
struct DatasetsSnapshot {
  std::vector<DatasetSnapshot> datasets;
  std::vector<IndexingSnapshot> indexing;
  std::vector<SamplerGroupSnapshot> samplers;
};

// The reply to "jobs".
struct JobsSnapshot {
  std::vector<JobSnapshot> jobs;
};

// The reply to a job's StatsRequest: the job, its dataset's sampler groups,
// the pipeline.
struct JobStatsSnapshot {
  JobSnapshot job;
  std::vector<SamplerGroupSnapshot> samplers;
  PipelineSnapshot pipeline;
};

// The cache's split in percent of its budget.
struct SplitSnapshot {
  int encoded_pct = 0;
  int decoded_pct = 0;
  int augmented_pct = 0;
};

// One cache tier.
struct TierSnapshot {
  uint64_t budget_bytes = 0;
  uint64_t bytes = 0;
  uint64_t entries = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  double hit_rate = 0;  // hits / (hits + misses); 0 before any lookup
  uint64_t inserts = 0;
  uint64_t rejects = 0;
  uint64_t evictions = 0;
};

struct AugmentedTierSnapshot {
  TierSnapshot tier;
  uint64_t retired = 0;   // entries dropped after serving their reuse limit
  uint64_t replaced = 0;  // entries replaced by a newer epoch's output
  uint64_t reuse_limit = 0;
};

// One input of the cache planner's model, and where its value came from
// ("measured", "override", "datasets", "jobs", ...).
struct PlanInputSnapshot {
  double value = 0;
  std::string source;
};

// The planner's inputs (cache::PlannerInputs), each with its source.
struct PlannerInputsSnapshot {
  PlanInputSnapshot storage_bytes_per_s;
  PlanInputSnapshot decode_augment_per_core_per_s;
  PlanInputSnapshot augment_per_core_per_s;
  PlanInputSnapshot cores;
  PlanInputSnapshot memory_bytes_per_s;
  PlanInputSnapshot jobs_consumption_per_s;
  PlanInputSnapshot dataset_items;
  PlanInputSnapshot encoded_item_bytes;
  PlanInputSnapshot inflation;
  PlanInputSnapshot augmented_item_bytes;
  PlanInputSnapshot identical_pipeline_jobs;
  PlanInputSnapshot augmented_reuse_limit;
  PlanInputSnapshot cache_bytes;
  // With a remote tier: B_cache, its capacity, B_NIC.
  std::optional<PlanInputSnapshot> remote_bytes_per_s;
  std::optional<PlanInputSnapshot> remote_capacity_bytes;
  std::optional<PlanInputSnapshot> nic_bytes_per_s;
};

// The decoded tier's arena (cache::ArenaStats), with the prefault's target.
struct ArenaSnapshot {
  uint64_t capacity_bytes = 0;
  uint64_t populated_bytes = 0;
  uint64_t prefault_target_bytes = 0;  // what a prefaulter commits up to now
  uint64_t allocated_bytes = 0;
  uint64_t blocks = 0;
  uint64_t refused = 0;
};

// The reply to "cache" with caching on: tier statistics, the split and
// demand (CachePlanner::CacheSnapshot), with the planner's inputs and the
// pipeline's cache-related counters added by the ControlServer.
struct CacheSnapshot {
  uint64_t cache_bytes = 0;
  std::string eviction;
  SplitSnapshot split;
  std::string split_source;  // "admin" or "planner"
  TierSnapshot encoded;
  TierSnapshot decoded;
  AugmentedTierSnapshot augmented;
  std::optional<ArenaSnapshot> decoded_arena;
  uint64_t keys_with_demand = 0;
  uint64_t total_demand = 0;
  PlannerInputsSnapshot planner_inputs;
  // Rendered as the "pipeline" object: only its work and hit counters.
  PipelineSnapshot pipeline;
};

// What the planner knows of one dataset: its sample, or why there is none.
struct PlanDatasetSnapshot {
  std::string root;
  bool sampled = false;
  // When sampled:
  uint64_t items = 0;
  double mean_encoded_bytes = 0;
  double inflation = 0;
  uint32_t files_sampled = 0;
  double storage_bytes_per_s = 0;
  // When not:
  std::string error;
  // When sampled: "storage" (read for this dataset's jobs), "memory" (a
  // dataset of objects this galleyd sampled for jobs that have closed
  // since) or "disk cache" (one whose sample a galleyd before this one kept
  // in the disk tier's folder); a kept sample's storage rate is the store's
  // as measured then.
  std::string sample_source;
};

// Per source of items: augmented tier, decoded tier, encoded tier, storage,
// and the remote tier.
struct PerSourceSnapshot {
  double augmented = 0;
  double decoded = 0;
  double encoded = 0;
  double storage = 0;
  double remote = 0;
};

// The last plan the planner applied.
struct AppliedPlanSnapshot {
  double predicted_items_per_s = 0;
  PerSourceSnapshot source_rates;   // items/s if every item came from that source
  PerSourceSnapshot hit_fractions;  // share of requests each source serves
};

// The reply to "plan" with caching on (CachePlanner::Snapshot).
struct PlanSnapshot {
  std::string planner;  // "admin split" or "model-driven"
  PlannerInputsSnapshot inputs;
  double probe_seconds = 0;
  std::vector<PlanDatasetSnapshot> datasets;
  uint64_t plans_made = 0;
  SplitSnapshot split;
  // With a remote tier: the form it is written in, and who chose it
  // ("planner" or "admin").
  std::string remote_form;
  std::string remote_form_source;
  std::optional<AppliedPlanSnapshot> plan;  // none before the first plan
};

// Everything /metrics shows, as an admin sees it; `cache` is empty when
// caching is off.
struct MetricsSnapshot {
  DaemonStatusSnapshot status;
  std::vector<JobSnapshot> jobs;
  std::optional<CacheSnapshot> cache;
};

}  // namespace galley

#endif  // GALLEY_SERVER_SNAPSHOTS_SNAPSHOTS_H_
