// The JSON of every query reply, byte for byte, against a recorded copy
// (snapshot_json_golden.json): each snapshot filled with its own numbers
// and strings, every optional part both present and absent, and the
// default-constructed replies. The recorded copy was written by the
// hand-written renderers before the snapshots took nlohmann's macros, so a
// key renamed, added, dropped or given another type or value by a change to
// how a snapshot is rendered fails here; the keys galleyctl, the Python
// module and the metrics read are among them.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "galley/snapshots/snapshot_json.h"
#include "galley/snapshots/snapshots.h"

namespace galley {
namespace {

using nlohmann::json;

// Hands out a different number (or string) for every field it fills.
class Numbers {
 public:
  // A reply added later draws from a range of its own, so that the numbers
  // of those recorded before it stay as they were.
  explicit Numbers(uint64_t first = 1) : next_(first) {}
  uint64_t U() { return next_++; }
  uint32_t U32() { return uint32_t(next_++); }
  int32_t I32() { return int32_t(next_++); }
  int64_t I64() { return int64_t(next_++); }
  // A fraction that a double holds exactly, printed with its decimals.
  double D() { return double(next_++) + 0.25; }
  std::string S(const std::string& what) { return what + "-" + std::to_string(next_++); }

 private:
  uint64_t next_;
};

RemoteTierSnapshot Remote(Numbers& n) {
  RemoteTierSnapshot r;
  r.engine = n.S("engine");
  r.write_form = n.S("form");
  r.lookups = n.U();
  r.encoded_hits = n.U();
  r.decoded_hits = n.U();
  r.misses = n.U();
  r.errors = n.U();
  r.corrupt = n.U();
  r.bytes_read = n.U();
  r.lookup_seconds = n.D();
  r.writes = n.U();
  r.bytes_written = n.U();
  r.write_errors = n.U();
  r.writes_dropped = n.U();
  r.writes_oversized = n.U();
  r.write_queue_bytes = n.U();
  r.servers = {{n.S("host"), true, n.U(), ""}, {n.S("host"), false, n.U(), n.S("error")}};
  return r;
}

DiskTierSnapshot Disk(Numbers& n) {
  DiskTierSnapshot d;
  d.dir = n.S("/var/cache/galley");
  d.budget_bytes = n.U();
  d.bytes = n.U();
  d.entries = n.U();
  d.hits = n.U();
  d.misses = n.U();
  d.writes = n.U();
  d.write_drops = n.U();
  d.write_errors = n.U();
  d.damaged = n.U();
  d.evictions = n.U();
  d.write_queue_bytes = n.U();
  d.foreign_files = n.U();
  d.indexed = true;
  d.index_seconds = n.D();
  return d;
}

// With both tiers, or without either.
PipelineSnapshot Pipeline(Numbers& n, bool tiers) {
  PipelineSnapshot p;
  p.threads = n.U32();
  p.cache = true;
  p.file_reads = n.U();
  p.field_reads = n.U();
  p.bytes_read = n.U();
  p.decodes = n.U();
  p.region_decodes = n.U();
  p.augments = n.U();
  p.decoded_hits = n.U();
  p.encoded_hits = n.U();
  p.augmented_hits = n.U();
  p.failures = n.U();
  p.packs = n.U();
  p.unpacks = n.U();
  p.unpack_failures = n.U();
  p.read_seconds = n.D();
  p.decode_seconds = n.D();
  p.augment_seconds = n.D();
  p.pack_seconds = n.D();
  p.unpack_seconds = n.D();
  if (tiers) {
    p.remote = Remote(n);
    p.disk = Disk(n);
  }
  return p;
}

SamplerGroupSnapshot Group(Numbers& n) {
  SamplerGroupSnapshot g;
  g.dataset = n.S("/data/set");
  g.policy = n.S("policy");
  g.jobs = n.U();
  g.requests = n.U();
  g.loads = n.U();
  g.loads_per_request = n.D();
  g.substitutions = n.U();
  g.job_seeds = n.U();
  g.orders_follow_seeds = true;
  g.file_reads = n.U();
  g.decodes = n.U();
  g.cache_hits = n.U();
  g.file_reads_per_request = n.D();
  g.decodes_per_request = n.D();
  g.cache_hits_per_request = n.D();
  return g;
}

JobSnapshot Job(Numbers& n) {
  JobSnapshot j;
  j.job_id = n.U();
  j.name = n.S("job");
  j.dataset = n.S("/data/set");
  j.owner_uid = n.U32();
  j.owner_pid = n.I32();
  j.policy = n.S("policy");
  j.batch_size = n.U32();
  j.epoch_size = n.U();
  j.batches_per_epoch = n.U();
  j.prefetch = n.U32();
  j.segment_bytes = n.U();
  j.batches = n.U();
  j.batches_unread = n.U();
  j.samples = n.U();
  j.skipped = n.U();
  j.epochs_completed = n.U();
  j.produce_seconds = n.D();
  j.ring_full_seconds = n.D();
  j.peer_hold_seconds = n.D();
  j.peer_holds = n.U();
  j.drawn_ahead = n.U();
  j.drawn_ahead_peak = n.U();
  j.lag = n.U();
  j.lag_peak = n.U();
  j.consumer_wait_seconds = n.D();
  j.consumer_waits = n.U();
  j.uptime_seconds = n.D();
  j.samples_per_second = n.D();
  j.rank = n.U32();
  j.world_size = n.U32();
  j.nodes = n.U32();
  j.node_rank = n.U32();
  j.shard_seed = n.U();
  // Counted apart from `n`, so that the numbers recorded before these
  // fields existed stay as they were.
  j.credential_refreshes = j.shard_seed * 1000 + 1;
  j.credential_refreshes_refused = j.shard_seed * 1000 + 2;
  return j;
}

ObjectStoreSnapshot ObjectStore(Numbers& n) {
  return {n.U(), n.U(), n.U(), n.U(), n.U(), n.U(), n.U(), n.U()};
}

// Kept as objects, or as files.
ShardSetSnapshot Shards(Numbers& n, bool objects) {
  ShardSetSnapshot s;
  s.shards = n.U();
  s.samples = n.U();
  s.skipped_members = n.U();
  s.skipped_samples = n.U();
  s.first_skipped_sample = n.S("sample");
  s.damaged_shards = n.U();
  s.first_damage = n.S("damage");
  s.from_index_cache = n.U();
  s.stale_idx = n.U();
  s.from_idx = n.U();
  s.index_seconds = n.D();
  s.index_age_seconds = n.D();
  s.stale = true;
  s.daemon_shards_scanned = n.U();
  s.daemon_idx_hints_used = n.U();
  s.daemon_index_cache_hits = n.U();
  s.daemon_stale_idx = n.U();
  if (objects) s.object_store = ObjectStore(n);
  s.prefetched_reads = n.U();
  s.on_demand_reads = n.U();
  // Added later: numbers of their own, so that those drawn after them stay.
  Numbers later(9100);
  s.gets = later.U();
  s.bytes = later.U();
  s.verify_heads = later.U();
  s.listing_reads = later.U();
  s.listing_kept_bytes = later.U();
  return s;
}

IndexingSnapshot Indexing(Numbers& n, const std::string& kind, const std::string& unit,
                          bool total) {
  IndexingSnapshot i;
  i.path = n.S("/data/listing");
  i.kind = kind;
  i.unit = unit;
  i.done = n.U();
  if (total) i.total = n.U();
  i.seconds = n.D();
  i.rate = n.D();
  i.seconds_left = n.D();
  i.classes = n.U();
  i.classes_done = n.U();
  return i;
}

DatasetSnapshot Dataset(Numbers& n, std::optional<bool> shards_as_objects) {
  DatasetSnapshot d;
  d.key = n.S("key");
  d.root = n.S("/data/root");
  d.index = n.U32();
  d.items = n.U();
  d.classes = n.U();
  d.bytes = n.U();
  d.listed_seconds_ago = n.D();
  d.listings = n.U();
  d.fingerprint = n.S("fingerprint");
  if (shards_as_objects) d.shards = Shards(n, *shards_as_objects);
  return d;
}

// A prefix folder or a manifest of objects.
DatasetSnapshot ObjectFolderDataset(Numbers& n, const std::string& kind) {
  DatasetSnapshot d = Dataset(n, std::nullopt);
  ObjectFolderSnapshot o;
  o.kind = kind;
  o.prefixes = n.U();
  o.prefetched_reads = n.U();
  o.on_demand_reads = n.U();
  o.gets = n.U();
  o.bytes = n.U();
  o.verify_heads = n.U();
  o.manifest_heads = n.U();
  o.listings = n.U();
  o.object_store = ObjectStore(n);
  d.objects = o;
  return d;
}

DaemonStatusSnapshot Status(Numbers& n) {
  DaemonStatusSnapshot s;
  s.version = n.S("version");
  s.protocol_version = uint16_t(n.U());
  s.uid = n.I64();
  s.owner_only = true;
  s.admin = true;
  s.pid = n.I64();
  s.socket = n.S("/run/galley.sock");
  s.uptime_seconds = n.D();
  s.jobs = n.U();
  s.your_jobs = n.U();
  s.your_memory_bytes = n.U();
  s.jobs_opened = n.U();
  s.jobs_refused = n.U();
  s.draining = true;
  s.protocol_errors = n.U();
  s.batches = {n.U(), n.U()};
  s.datasets = n.U();
  s.shm_bytes = n.U();
  s.limits = {n.U32(), n.U(), n.U(), n.U32(), n.U(), n.U32(), n.U()};
  s.descriptors = {n.I64(), n.U(), n.U(), n.U(), n.U(), n.U(), n.U()};
  s.pipeline = Pipeline(n, true);
  s.samplers = {Group(n), Group(n)};
  s.object_store = ObjectStore(n);
  return s;
}

TierSnapshot Tier(Numbers& n) {
  return {n.U(), n.U(), n.U(), n.U(), n.U(), n.D(), n.U(), n.U(), n.U()};
}

PlanInputSnapshot Input(Numbers& n) { return {n.D(), n.S("source")}; }

// With the remote tier's three inputs, or without them.
PlannerInputsSnapshot Inputs(Numbers& n, bool remote) {
  PlannerInputsSnapshot in;
  in.storage_bytes_per_s = Input(n);
  in.decode_augment_per_core_per_s = Input(n);
  in.augment_per_core_per_s = Input(n);
  in.cores = Input(n);
  in.memory_bytes_per_s = Input(n);
  in.jobs_consumption_per_s = Input(n);
  in.dataset_items = Input(n);
  in.encoded_item_bytes = Input(n);
  in.inflation = Input(n);
  in.augmented_item_bytes = Input(n);
  in.identical_pipeline_jobs = Input(n);
  in.augmented_reuse_limit = Input(n);
  in.cache_bytes = Input(n);
  if (remote) {
    in.remote_bytes_per_s = Input(n);
    in.remote_capacity_bytes = Input(n);
    in.nic_bytes_per_s = Input(n);
  }
  return in;
}

// With the decoded tier's arena and the remote tier, or without them.
CacheSnapshot Cache(Numbers& n, bool full) {
  CacheSnapshot c;
  c.cache_bytes = n.U();
  c.eviction = n.S("eviction");
  c.split = {n.I32(), n.I32(), n.I32()};
  c.split_source = n.S("split");
  c.encoded = Tier(n);
  c.decoded = Tier(n);
  c.augmented = {Tier(n), n.U(), n.U(), n.U()};
  if (full) c.decoded_arena = ArenaSnapshot{n.U(), n.U(), n.U(), n.U(), n.U(), n.U()};
  c.keys_with_demand = n.U();
  c.total_demand = n.U();
  c.planner_inputs = Inputs(n, full);
  c.pipeline = Pipeline(n, full);
  return c;
}

PerSourceSnapshot PerSource(Numbers& n) { return {n.D(), n.D(), n.D(), n.D(), n.D()}; }

PlanDatasetSnapshot PlanDataset(Numbers& n, bool sampled) {
  PlanDatasetSnapshot d;
  d.root = n.S("/data/planned");
  d.sampled = sampled;
  d.items = n.U();
  d.mean_encoded_bytes = n.D();
  d.inflation = n.D();
  d.files_sampled = n.U32();
  d.storage_bytes_per_s = n.D();
  d.error = n.S("error");
  // One of the two values, not a number of its own: the numbers of the
  // replies that follow stay those recorded before the field was added.
  d.sample_source = "disk cache";
  return d;
}

// With a remote form and an applied plan, or before either.
PlanSnapshot Plan(Numbers& n, bool full) {
  PlanSnapshot p;
  p.planner = n.S("planner");
  p.inputs = Inputs(n, full);
  p.probe_seconds = n.D();
  p.datasets = {PlanDataset(n, true), PlanDataset(n, false)};
  p.plans_made = n.U();
  p.split = {n.I32(), n.I32(), n.I32()};
  if (full) {
    p.remote_form = n.S("form");
    p.remote_form_source = n.S("chooser");
    p.plan = AppliedPlanSnapshot{n.D(), PerSource(n), PerSource(n)};
  }
  return p;
}

// Every reply the daemon renders, filled and default-constructed.
json Replies() {
  Numbers n;
  json replies;
  replies["status"] = Status(n);
  replies["status_default"] = DaemonStatusSnapshot();
  DatasetsSnapshot datasets;
  datasets.datasets = {Dataset(n, true), Dataset(n, false), Dataset(n, std::nullopt)};
  datasets.indexing = {Indexing(n, "shards", "shards", true),
                       Indexing(n, "shards", "shards", false),
                       Indexing(n, "folder", "files", false), Indexing(n, "folder", "files", true),
                       Indexing(n, "manifest", "lines", true)};
  datasets.samplers = {Group(n)};
  replies["datasets"] = datasets;
  replies["datasets_default"] = DatasetsSnapshot();
  Numbers from_100k(100000);
  DatasetsSnapshot object_folders;
  object_folders.datasets = {ObjectFolderDataset(from_100k, "prefix"),
                             ObjectFolderDataset(from_100k, "manifest")};
  replies["datasets_of_objects"] = object_folders;
  replies["dataset_default"] = DatasetSnapshot();
  replies["jobs"] = JobsSnapshot{{Job(n), Job(n)}};
  replies["jobs_default"] = JobsSnapshot{{JobSnapshot()}};
  replies["job_stats"] = JobStatsSnapshot{Job(n), {Group(n)}, Pipeline(n, false)};
  replies["job_stats_default"] = JobStatsSnapshot();
  replies["cache"] = Cache(n, true);
  replies["cache_bare"] = Cache(n, false);
  replies["cache_default"] = CacheSnapshot();
  replies["caching_off"] = CachingOffJson();
  replies["plan"] = Plan(n, true);
  replies["plan_bare"] = Plan(n, false);
  replies["plan_default"] = PlanSnapshot();
  return replies;
}

TEST(SnapshotJsonGoldenTest, EveryReplyIsTheRecordedJsonByteForByte) {
  std::ifstream in(GALLEY_SNAPSHOT_JSON_GOLDEN);
  ASSERT_TRUE(in) << "cannot read " << GALLEY_SNAPSHOT_JSON_GOLDEN;
  std::stringstream recorded;
  recorded << in.rdbuf();
  const std::string actual = Replies().dump(2) + "\n";
  if (actual != recorded.str()) {
    // The whole text, to diff against the recorded copy.
    const std::string path = testing::TempDir() + "snapshot_json_actual.json";
    std::ofstream(path) << actual;
    ADD_FAILURE() << "the replies' JSON differs from " << GALLEY_SNAPSHOT_JSON_GOLDEN
                  << "; this build's is in " << path;
  }
}

}  // namespace
}  // namespace galley
