// The JSON form of galleyd's snapshots (snapshots.h): the one place that
// names the keys of the query replies galleyctl, the Python module and the
// tests read (docs/operations.md lists them).
//
// to_json overloads in the snapshots' namespace, so nlohmann::json converts
// a snapshot implicitly: `nlohmann::json reply = snapshot;`. Where a reply's
// keys are exactly a snapshot's fields, nlohmann's macro writes them; the
// others are written by hand. tests/unit/snapshot_json_golden.json holds
// every reply as galleyctl, the Python module and the tests read it.
//
// Thread-safety: free functions of their arguments; call from any thread.
#ifndef GALLEY_SERVER_SNAPSHOTS_SNAPSHOT_JSON_H_
#define GALLEY_SERVER_SNAPSHOTS_SNAPSHOT_JSON_H_

#include <nlohmann/json.hpp>

#include "galley/snapshots/snapshots.h"

namespace galley {

// Snapshots whose JSON is their fields, each under its own name: nlohmann's
// macro writes them (and a from_json nothing calls; the macro defines both).
// A field added to one of these structs becomes a key when its name is
// added to the struct's list here; a field renamed without its list does
// not build.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RemoteServerSnapshot, address, reachable, failures, last_error)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SamplerGroupSnapshot, dataset, policy, jobs, requests, loads,
                                   loads_per_request, substitutions, job_seeds, orders_follow_seeds,
                                   file_reads, decodes, cache_hits, file_reads_per_request,
                                   decodes_per_request, cache_hits_per_request)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(BatchTotalsSnapshot, prepared, unread)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(JobSnapshot, job_id, name, dataset, owner_uid, owner_pid, policy,
                                   batch_size, epoch_size, batches_per_epoch, prefetch,
                                   segment_bytes, batches, batches_unread, samples, skipped,
                                   epochs_completed, produce_seconds, ring_full_seconds,
                                   peer_hold_seconds, peer_holds, drawn_ahead, drawn_ahead_peak,
                                   lag, lag_peak, consumer_wait_seconds, consumer_waits,
                                   uptime_seconds, samples_per_second, rank, world_size, nodes,
                                   node_rank, shard_seed, credential_refreshes,
                                   credential_refreshes_refused)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ObjectStoreSnapshot, gets, heads, lists, bytes, retries,
                                   failures, in_flight, full_bodies)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LimitsSnapshot, max_jobs, max_shm_per_job, max_shm_total,
                                   max_jobs_per_uid, max_shm_per_uid, max_connections_per_uid,
                                   max_memory_per_uid)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DescriptorsSnapshot, open, limit, shards_open, shards_limit,
                                   shards_evicted, shards_released, exhausted)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(JobsSnapshot, jobs)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SplitSnapshot, encoded_pct, decoded_pct, augmented_pct)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TierSnapshot, budget_bytes, bytes, entries, hits, misses,
                                   hit_rate, inserts, rejects, evictions)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PlanInputSnapshot, value, source)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ArenaSnapshot, capacity_bytes, populated_bytes,
                                   prefault_target_bytes, allocated_bytes, blocks, refused)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PerSourceSnapshot, augmented, decoded, encoded, storage, remote)

// Snapshots whose JSON is not just their fields, written by hand in
// snapshot_json.cc; each says there what differs.
void to_json(nlohmann::json& out, const RemoteTierSnapshot& s);
void to_json(nlohmann::json& out, const DiskTierSnapshot& s);
void to_json(nlohmann::json& out, const PipelineSnapshot& s);
void to_json(nlohmann::json& out, const ShardSetSnapshot& s);
void to_json(nlohmann::json& out, const IndexingSnapshot& s);
void to_json(nlohmann::json& out, const DatasetSnapshot& s);
void to_json(nlohmann::json& out, const DaemonStatusSnapshot& s);
void to_json(nlohmann::json& out, const DatasetsSnapshot& s);
void to_json(nlohmann::json& out, const JobStatsSnapshot& s);
void to_json(nlohmann::json& out, const AugmentedTierSnapshot& s);
void to_json(nlohmann::json& out, const PlannerInputsSnapshot& s);
void to_json(nlohmann::json& out, const CacheSnapshot& s);
void to_json(nlohmann::json& out, const PlanDatasetSnapshot& s);
void to_json(nlohmann::json& out, const PlanSnapshot& s);

// The reply to "cache" and "plan" when caching is off.
nlohmann::json CachingOffJson();

}  // namespace galley

#endif  // GALLEY_SERVER_SNAPSHOTS_SNAPSHOT_JSON_H_
