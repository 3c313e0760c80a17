// The Prometheus text exposition (format 0.0.4) of galleyd's snapshots: the
// one place that names the metrics /metrics serves (docs/operations.md
// lists them). It reads the same snapshot fields as the JSON replies
// (snapshot_json.h), so a field renamed or removed there breaks this file's
// build instead of silently dropping a metric.
//
// Thread-safety: a free function of its argument; call from any thread.
#ifndef GALLEY_SERVER_SNAPSHOTS_PROMETHEUS_TEXT_H_
#define GALLEY_SERVER_SNAPSHOTS_PROMETHEUS_TEXT_H_

#include <string>

#include "galley/snapshots/snapshots.h"

namespace galley {

// Every metric family with its HELP and TYPE lines, then its samples: one
// per daemon, per sampler group (dataset, policy), per job (job, name) or
// per cache tier (tier). Families without samples (no job open, caching
// off) keep their HELP and TYPE lines.
std::string RenderPrometheus(const MetricsSnapshot& metrics);

}  // namespace galley

#endif  // GALLEY_SERVER_SNAPSHOTS_PROMETHEUS_TEXT_H_
