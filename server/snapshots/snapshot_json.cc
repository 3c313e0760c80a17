#include "galley/snapshots/snapshot_json.h"

namespace galley {

using nlohmann::json;

void to_json(json& out, const RemoteServerSnapshot& s) {
  out = {{"address", s.address},
         {"reachable", s.reachable},
         {"failures", s.failures},
         {"last_error", s.last_error}};
}

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

void to_json(json& out, const SamplerGroupSnapshot& s) {
  out = {{"dataset", s.dataset},
         {"policy", s.policy},
         {"jobs", s.jobs},
         {"requests", s.requests},
         {"loads", s.loads},
         {"loads_per_request", s.loads_per_request},
         {"file_reads", s.file_reads},
         {"decodes", s.decodes},
         {"cache_hits", s.cache_hits},
         {"file_reads_per_request", s.file_reads_per_request},
         {"decodes_per_request", s.decodes_per_request},
         {"cache_hits_per_request", s.cache_hits_per_request},
         {"substitutions", s.substitutions},
         {"job_seeds", s.job_seeds},
         {"orders_follow_seeds", s.orders_follow_seeds}};
}

void to_json(json& out, const BatchTotalsSnapshot& s) {
  out = {{"prepared", s.prepared}, {"unread", s.unread}};
}

void to_json(json& out, const JobSnapshot& s) {
  out = {{"job_id", s.job_id},
         {"name", s.name},
         {"dataset", s.dataset},
         {"owner_uid", s.owner_uid},
         {"owner_pid", s.owner_pid},
         {"policy", s.policy},
         {"batch_size", s.batch_size},
         {"epoch_size", s.epoch_size},
         {"batches_per_epoch", s.batches_per_epoch},
         {"prefetch", s.prefetch},
         {"segment_bytes", s.segment_bytes},
         {"batches", s.batches},
         {"batches_unread", s.batches_unread},
         {"samples", s.samples},
         {"skipped", s.skipped},
         {"epochs_completed", s.epochs_completed},
         {"produce_seconds", s.produce_seconds},
         {"ring_full_seconds", s.ring_full_seconds},
         {"peer_hold_seconds", s.peer_hold_seconds},
         {"peer_holds", s.peer_holds},
         {"drawn_ahead", s.drawn_ahead},
         {"drawn_ahead_peak", s.drawn_ahead_peak},
         {"lag", s.lag},
         {"lag_peak", s.lag_peak},
         {"consumer_wait_seconds", s.consumer_wait_seconds},
         {"consumer_waits", s.consumer_waits},
         {"uptime_seconds", s.uptime_seconds},
         {"samples_per_second", s.samples_per_second},
         {"rank", s.rank},
         {"world_size", s.world_size},
         {"nodes", s.nodes},
         {"node_rank", s.node_rank},
         {"shard_seed", s.shard_seed},
         {"credential_refreshes", s.credential_refreshes},
         {"credential_refreshes_refused", s.credential_refreshes_refused}};
}

void to_json(json& out, const ObjectStoreSnapshot& o) {
  out = {{"gets", o.gets},           {"heads", o.heads},
         {"lists", o.lists},         {"bytes", o.bytes},
         {"retries", o.retries},     {"failures", o.failures},
         {"in_flight", o.in_flight}, {"full_bodies", o.full_bodies}};
}

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
  }
}

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
         {"shards", s.shards ? json(*s.shards) : json(nullptr)}};
}

void to_json(json& out, const LimitsSnapshot& s) {
  out = {{"max_jobs", s.max_jobs},
         {"max_shm_per_job", s.max_shm_per_job},
         {"max_shm_total", s.max_shm_total},
         {"max_jobs_per_uid", s.max_jobs_per_uid},
         {"max_shm_per_uid", s.max_shm_per_uid},
         {"max_connections_per_uid", s.max_connections_per_uid},
         {"max_memory_per_uid", s.max_memory_per_uid}};
}

void to_json(json& out, const DescriptorsSnapshot& s) {
  out = {{"open", s.open},
         {"limit", s.limit},
         {"shards_open", s.shards_open},
         {"shards_limit", s.shards_limit},
         {"shards_evicted", s.shards_evicted},
         {"shards_released", s.shards_released},
         {"exhausted", s.exhausted}};
}

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

void to_json(json& out, const DatasetsSnapshot& s) {
  out = {{"datasets", s.datasets}, {"indexing", s.indexing}, {"samplers", s.samplers}};
}

void to_json(json& out, const JobsSnapshot& s) { out = {{"jobs", s.jobs}}; }

void to_json(json& out, const JobStatsSnapshot& s) {
  out = {{"job", s.job}, {"samplers", s.samplers}, {"pipeline", s.pipeline}};
}

void to_json(json& out, const SplitSnapshot& s) {
  out = {{"encoded_pct", s.encoded_pct},
         {"decoded_pct", s.decoded_pct},
         {"augmented_pct", s.augmented_pct}};
}

void to_json(json& out, const TierSnapshot& s) {
  out = {{"budget_bytes", s.budget_bytes},
         {"bytes", s.bytes},
         {"entries", s.entries},
         {"hits", s.hits},
         {"misses", s.misses},
         {"hit_rate", s.hit_rate},
         {"inserts", s.inserts},
         {"rejects", s.rejects},
         {"evictions", s.evictions}};
}

void to_json(json& out, const AugmentedTierSnapshot& s) {
  out = s.tier;
  out["retired"] = s.retired;
  out["replaced"] = s.replaced;
  out["reuse_limit"] = s.reuse_limit;
}

void to_json(json& out, const PlanInputSnapshot& s) {
  out = {{"value", s.value}, {"source", s.source}};
}

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

void to_json(json& out, const ArenaSnapshot& s) {
  out = {{"capacity_bytes", s.capacity_bytes},
         {"populated_bytes", s.populated_bytes},
         {"prefault_target_bytes", s.prefault_target_bytes},
         {"allocated_bytes", s.allocated_bytes},
         {"blocks", s.blocks},
         {"refused", s.refused}};
}

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

void to_json(json& out, const PlanDatasetSnapshot& s) {
  out = {{"root", s.root}};
  if (s.sampled) {
    out["items"] = s.items;
    out["mean_encoded_bytes"] = s.mean_encoded_bytes;
    out["inflation"] = s.inflation;
    out["files_sampled"] = s.files_sampled;
    out["storage_bytes_per_s"] = s.storage_bytes_per_s;
  } else {
    out["error"] = s.error;
  }
}

void to_json(json& out, const PerSourceSnapshot& s) {
  out = {{"augmented", s.augmented},
         {"decoded", s.decoded},
         {"encoded", s.encoded},
         {"storage", s.storage},
         {"remote", s.remote}};
}

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
