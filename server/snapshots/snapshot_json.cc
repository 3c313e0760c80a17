#include "galley/snapshots/snapshot_json.h"

namespace galley {

using nlohmann::json;

// Adds what the fields give: all hits, and the hit rate.
void to_json(json& out, const RemoteTierSnapshot& s) {
  const uint64_t hits = s.encoded_hits + s.decoded_hits;
  out = {{"engine", s.engine},
         {"write_form", s.write_form},
         {"lookups", s.lookups},
         {"hits", hits},
         {"encoded_hits", s.encoded_hits},
         {"decoded_hits", s.decoded_hits},
         {"misses", s.misses},
         {"hit_rate", s.lookups > 0 ? double(hits) / double(s.lookups) : 0.0},
         {"errors", s.errors},
         {"corrupt", s.corrupt},
         {"bytes_read", s.bytes_read},
         {"lookup_seconds", s.lookup_seconds},
         {"writes", s.writes},
         {"bytes_written", s.bytes_written},
         {"write_errors", s.write_errors},
         {"writes_dropped", s.writes_dropped},
         {"writes_oversized", s.writes_oversized},
         {"write_queue_bytes", s.write_queue_bytes},
         {"servers", s.servers}};
}

// Adds the hit rate.
void to_json(json& out, const DiskTierSnapshot& s) {
  const uint64_t lookups = s.hits + s.misses;
  out = {{"dir", s.dir},
         {"budget_bytes", s.budget_bytes},
         {"bytes", s.bytes},
         {"entries", s.entries},
         {"hits", s.hits},
         {"misses", s.misses},
         {"hit_rate", lookups > 0 ? double(s.hits) / double(lookups) : 0.0},
         {"writes", s.writes},
         {"write_drops", s.write_drops},
         {"write_errors", s.write_errors},
         {"damaged", s.damaged},
         {"evictions", s.evictions},
         {"write_queue_bytes", s.write_queue_bytes},
         {"foreign_files", s.foreign_files},
         {"indexed", s.indexed},
         {"index_seconds", s.index_seconds}};
}

// A tier that is not configured is null (this nlohmann has no std::optional
// conversion, so no macro).
void to_json(json& out, const PipelineSnapshot& s) {
  out = {{"threads", s.threads},
         {"file_reads", s.file_reads},
         {"field_reads", s.field_reads},
         {"bytes_read", s.bytes_read},
         {"decodes", s.decodes},
         {"region_decodes", s.region_decodes},
         {"augments", s.augments},
         {"cache", s.cache},
         {"decoded_hits", s.decoded_hits},
         {"encoded_hits", s.encoded_hits},
         {"augmented_hits", s.augmented_hits},
         {"failures", s.failures},
         {"packs", s.packs},
         {"unpacks", s.unpacks},
         {"unpack_failures", s.unpack_failures},
         {"read_seconds", s.read_seconds},
         {"decode_seconds", s.decode_seconds},
         {"augment_seconds", s.augment_seconds},
         {"pack_seconds", s.pack_seconds},
         {"unpack_seconds", s.unpack_seconds},
         {"remote", s.remote ? json(*s.remote) : json(nullptr)},
         {"disk", s.disk ? json(*s.disk) : json(nullptr)}};
}

// The object store's counts and this set's reads only for shards kept as
// objects.
void to_json(json& out, const ShardSetSnapshot& s) {
  out = {{"shards", s.shards},
         {"samples", s.samples},
         {"skipped_members", s.skipped_members},
         {"skipped_samples", s.skipped_samples},
         {"first_skipped_sample", s.first_skipped_sample},
         {"damaged_shards", s.damaged_shards},
         {"first_damage", s.first_damage},
         {"from_index_cache", s.from_index_cache},
         {"stale_idx", s.stale_idx},
         {"from_idx", s.from_idx},
         {"index_seconds", s.index_seconds},
         {"index_age_seconds", s.index_age_seconds},
         {"stale", s.stale},
         {"daemon_shards_scanned", s.daemon_shards_scanned},
         {"daemon_idx_hints_used", s.daemon_idx_hints_used},
         {"daemon_index_cache_hits", s.daemon_index_cache_hits},
         {"daemon_stale_idx", s.daemon_stale_idx}};
  if (s.object_store) {
    out["object_store"] = *s.object_store;
    out["prefetched_reads"] = s.prefetched_reads;
    out["on_demand_reads"] = s.on_demand_reads;
    out["gets"] = s.gets;
    out["bytes"] = s.bytes;
    out["verify_heads"] = s.verify_heads;
    out["listing_reads"] = s.listing_reads;
    out["listing_kept_bytes"] = s.listing_kept_bytes;
  }
}

void to_json(json& out, const ObjectFolderSnapshot& s) {
  out = {{"kind", s.kind},
         {"prefixes", s.prefixes},
         {"prefetched_reads", s.prefetched_reads},
         {"on_demand_reads", s.on_demand_reads},
         {"gets", s.gets},
         {"bytes", s.bytes},
         {"verify_heads", s.verify_heads},
         {"manifest_heads", s.manifest_heads},
         {"listings", s.listings},
         {"object_store", s.object_store}};
}

// An unknown total is null, and each kind adds its own keys.
void to_json(json& out, const IndexingSnapshot& s) {
  out = {{"path", s.path},
         {"kind", s.kind},
         {"unit", s.unit},
         {"done", s.done},
         {"total", s.total ? json(*s.total) : json(nullptr)},
         {"seconds", s.seconds},
         {"rate", s.rate},
         {"seconds_left", s.seconds_left}};
  if (s.kind == "shards") {
    out["first_shard"] = s.path;
    out["shards"] = s.total.value_or(0);
  } else if (s.kind == "folder") {
    out["classes"] = s.classes;
    out["classes_done"] = s.classes_done;
  }
}

// A dataset that is not a shard set has null shards, and one that is not
// a folder or manifest of objects null objects.
void to_json(json& out, const DatasetSnapshot& s) {
  out = {{"root", s.root},
         {"key", s.key},
         {"items", s.items},
         {"classes", s.classes},
         {"bytes", s.bytes},
         {"index", s.index},
         {"listings", s.listings},
         {"fingerprint", s.fingerprint},
         {"listed_seconds_ago", s.listed_seconds_ago},
         {"shards", s.shards ? json(*s.shards) : json(nullptr)},
         {"objects", s.objects ? json(*s.objects) : json(nullptr)}};
}

// Its keys are its fields, but the macro also writes from_json, which needs
// one for every member, and the pipeline's JSON is written by hand.
void to_json(json& out, const DaemonStatusSnapshot& s) {
  out = {{"version", s.version},
         {"protocol_version", s.protocol_version},
         {"uid", s.uid},
         {"owner_only", s.owner_only},
         {"admin", s.admin},
         {"pid", s.pid},
         {"socket", s.socket},
         {"uptime_seconds", s.uptime_seconds},
         {"jobs", s.jobs},
         {"your_jobs", s.your_jobs},
         {"your_memory_bytes", s.your_memory_bytes},
         {"jobs_opened", s.jobs_opened},
         {"jobs_refused", s.jobs_refused},
         {"draining", s.draining},
         {"protocol_errors", s.protocol_errors},
         {"batches", s.batches},
         {"datasets", s.datasets},
         {"shm_bytes", s.shm_bytes},
         {"limits", s.limits},
         {"descriptors", s.descriptors},
         {"object_store", s.object_store},
         {"pipeline", s.pipeline},
         {"samplers", s.samplers}};
}

// As for DaemonStatusSnapshot: its datasets' and listings' JSON is written
// by hand, so the macro's from_json would not build.
void to_json(json& out, const DatasetsSnapshot& s) {
  out = {{"datasets", s.datasets}, {"indexing", s.indexing}, {"samplers", s.samplers}};
}

// As for DaemonStatusSnapshot: the pipeline's JSON is written by hand.
void to_json(json& out, const JobStatsSnapshot& s) {
  out = {{"job", s.job}, {"samplers", s.samplers}, {"pipeline", s.pipeline}};
}

// The tier's keys, with the augmented tier's own beside them.
void to_json(json& out, const AugmentedTierSnapshot& s) {
  out = s.tier;
  out["retired"] = s.retired;
  out["replaced"] = s.replaced;
  out["reuse_limit"] = s.reuse_limit;
}

// The remote tier's inputs only when there is one.
void to_json(json& out, const PlannerInputsSnapshot& s) {
  out = {{"storage_bytes_per_s", s.storage_bytes_per_s},
         {"decode_augment_per_core_per_s", s.decode_augment_per_core_per_s},
         {"augment_per_core_per_s", s.augment_per_core_per_s},
         {"cores", s.cores},
         {"memory_bytes_per_s", s.memory_bytes_per_s},
         {"jobs_consumption_per_s", s.jobs_consumption_per_s},
         {"dataset_items", s.dataset_items},
         {"encoded_item_bytes", s.encoded_item_bytes},
         {"inflation", s.inflation},
         {"augmented_item_bytes", s.augmented_item_bytes},
         {"identical_pipeline_jobs", s.identical_pipeline_jobs},
         {"augmented_reuse_limit", s.augmented_reuse_limit},
         {"cache_bytes", s.cache_bytes}};
  if (s.remote_bytes_per_s) out["remote_bytes_per_s"] = *s.remote_bytes_per_s;
  if (s.remote_capacity_bytes) out["remote_capacity_bytes"] = *s.remote_capacity_bytes;
  if (s.nic_bytes_per_s) out["nic_bytes_per_s"] = *s.nic_bytes_per_s;
}

// Groups fields under "tiers" and "demand", adds "enabled", and shows only
// the pipeline's work and hit counters.
void to_json(json& out, const CacheSnapshot& s) {
  const PipelineSnapshot& p = s.pipeline;
  out = {{"enabled", true},
         {"cache_bytes", s.cache_bytes},
         {"eviction", s.eviction},
         {"split", s.split},
         {"split_source", s.split_source},
         {"tiers", {{"encoded", s.encoded}, {"decoded", s.decoded}, {"augmented", s.augmented}}},
         {"decoded_arena", s.decoded_arena ? json(*s.decoded_arena) : json(nullptr)},
         {"demand", {{"keys_with_demand", s.keys_with_demand}, {"total_demand", s.total_demand}}},
         {"planner_inputs", s.planner_inputs},
         {"pipeline",
          {{"file_reads", p.file_reads},
           {"decodes", p.decodes},
           {"augments", p.augments},
           {"decoded_hits", p.decoded_hits},
           {"encoded_hits", p.encoded_hits},
           {"augmented_hits", p.augmented_hits},
           {"packs", p.packs},
           {"unpacks", p.unpacks},
           {"unpack_failures", p.unpack_failures}}},
         {"remote", p.remote ? json(*p.remote) : json(nullptr)}};
}

// The sample's keys when sampled, else the error alone.
void to_json(json& out, const PlanDatasetSnapshot& s) {
  out = {{"root", s.root}};
  if (s.sampled) {
    out["items"] = s.items;
    out["mean_encoded_bytes"] = s.mean_encoded_bytes;
    out["inflation"] = s.inflation;
    out["files_sampled"] = s.files_sampled;
    out["storage_bytes_per_s"] = s.storage_bytes_per_s;
    out["sample_source"] = s.sample_source;
  } else {
    out["error"] = s.error;
  }
}

// The remote form only with a remote tier, the applied plan's keys flattened
// into the reply, or a note before the first plan.
void to_json(json& out, const PlanSnapshot& s) {
  out = {{"planner", s.planner},   {"inputs", s.inputs},         {"probe_seconds", s.probe_seconds},
         {"datasets", s.datasets}, {"plans_made", s.plans_made}, {"split", s.split}};
  if (!s.remote_form.empty()) {
    out["remote_form"] = s.remote_form;
    out["remote_form_source"] = s.remote_form_source;
  }
  if (s.plan) {
    out["predicted_items_per_s"] = s.plan->predicted_items_per_s;
    out["source_rates"] = s.plan->source_rates;
    out["hit_fractions"] = s.plan->hit_fractions;
  } else {
    out["note"] = "no plan yet: the planner runs when a job opens its first dataset";
  }
}

json CachingOffJson() { return {{"enabled", false}, {"cache_bytes", 0}}; }

}  // namespace galley
