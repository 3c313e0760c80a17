// The JSON form of galleyd's snapshots (snapshots.h): the one place that
// names the keys of the query replies galleyctl, the Python module and the
// tests read (docs/operations.md lists them).
//
// to_json overloads in the snapshots' namespace, so nlohmann::json converts
// a snapshot implicitly: `nlohmann::json reply = snapshot;`.
//
// Thread-safety: free functions of their arguments; call from any thread.
#ifndef GALLEY_SERVER_SNAPSHOTS_SNAPSHOT_JSON_H_
#define GALLEY_SERVER_SNAPSHOTS_SNAPSHOT_JSON_H_

#include <nlohmann/json.hpp>

#include "galley/snapshots/snapshots.h"

namespace galley {

void to_json(nlohmann::json& out, const RemoteServerSnapshot& s);
void to_json(nlohmann::json& out, const RemoteTierSnapshot& s);
void to_json(nlohmann::json& out, const PipelineSnapshot& s);
void to_json(nlohmann::json& out, const SamplerGroupSnapshot& s);
void to_json(nlohmann::json& out, const BatchTotalsSnapshot& s);
void to_json(nlohmann::json& out, const JobSnapshot& s);
void to_json(nlohmann::json& out, const ObjectStoreSnapshot& s);
void to_json(nlohmann::json& out, const ShardSetSnapshot& s);
void to_json(nlohmann::json& out, const IndexingSnapshot& s);
void to_json(nlohmann::json& out, const DatasetSnapshot& s);
void to_json(nlohmann::json& out, const LimitsSnapshot& s);
void to_json(nlohmann::json& out, const DaemonStatusSnapshot& s);
void to_json(nlohmann::json& out, const DatasetsSnapshot& s);
void to_json(nlohmann::json& out, const JobsSnapshot& s);
void to_json(nlohmann::json& out, const JobStatsSnapshot& s);
void to_json(nlohmann::json& out, const SplitSnapshot& s);
void to_json(nlohmann::json& out, const TierSnapshot& s);
void to_json(nlohmann::json& out, const AugmentedTierSnapshot& s);
void to_json(nlohmann::json& out, const PlanInputSnapshot& s);
void to_json(nlohmann::json& out, const PlannerInputsSnapshot& s);
void to_json(nlohmann::json& out, const CacheSnapshot& s);
void to_json(nlohmann::json& out, const PlanDatasetSnapshot& s);
void to_json(nlohmann::json& out, const PerSourceSnapshot& s);
void to_json(nlohmann::json& out, const PlanSnapshot& s);

// The reply to "cache" and "plan" when caching is off.
nlohmann::json CachingOffJson();

}  // namespace galley

#endif  // GALLEY_SERVER_SNAPSHOTS_SNAPSHOT_JSON_H_
