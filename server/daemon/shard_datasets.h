// The daemon's glue for tar shard datasets: the ShardOptions a job asks for,
// the checks a job over shards must pass, and what galleyctl shows of them.
//
// Thread-safety: free functions of their arguments; call from any thread.
#ifndef GALLEY_SERVER_DAEMON_SHARD_DATASETS_H_
#define GALLEY_SERVER_DAEMON_SHARD_DATASETS_H_

#include <sys/types.h>

#include <nlohmann/json.hpp>

#include "galley/job_spec.h"
#include "galley/status.h"
#include "server/daemon/daemon_options.h"
#include "server/dataset/dataset.h"

namespace galley {

// The job's image_key/label_key with the daemon's index cache and
// descriptor limits.
ShardOptions ShardOptionsFor(const JobSpec& spec, const DaemonOptions& options);

// For a shard dataset with on_error "raise": InvalidArgument naming the
// first skipped sample (shard and key) or damaged shard. Ok otherwise.
// (Who may read which shard is the DatasetRegistry's check.)
Status CheckShardJob(const Dataset& dataset, const JobSpec& spec);

// Shard counts, skipped members and samples, damage, index age and the
// process-wide index counters; null for other datasets.
nlohmann::json DescribeShards(const Dataset& dataset);

// Listings under way now (shard sets, ImageFolder trees, manifests): path,
// kind, unit (shards, files, lines), done, total (null while unknown),
// seconds, rate (units/s) and estimated seconds left (-1 while unknown);
// shard sets also carry first_shard and shards, folders classes and
// classes_done.
nlohmann::json DescribeIndexing();

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_SHARD_DATASETS_H_
