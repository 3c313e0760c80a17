// The daemon's glue for tar shard datasets: the ShardOptions a job asks for,
// the checks a job over shards must pass, and what galleyctl shows of them.
//
// Thread-safety: free functions of their arguments; call from any thread.
#ifndef GALLEY_SERVER_DAEMON_SHARD_DATASETS_H_
#define GALLEY_SERVER_DAEMON_SHARD_DATASETS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "galley/dataset/dataset.h"
#include "galley/job_spec.h"
#include "galley/snapshots/snapshots.h"
#include "galley/status.h"

namespace galley {

// The daemon's shard options (DatasetRegistryOptions::shards) with the
// job's image_key, label_key and fields.
ShardOptions ShardOptionsFor(const JobSpec& spec, const ShardOptions& daemon_wide);

// The objectstore form of a job's S3 access.
objectstore::Access ObjectAccessFor(const ObjectStoreAccess& access);

// Whether `endpoint` (ObjectEndpointName's form) is one of `allowed`, each
// compared in the same form; "aws" allows AWS's own endpoints
// (https://s3.amazonaws.com and https://s3.REGION.amazonaws.com).
bool EndpointAllowed(const std::string& endpoint, const std::vector<std::string>& allowed);

// How a job's manifest is read: with a header row when the job names
// fields, the images in the column image_key names.
ManifestOptions ManifestOptionsFor(const JobSpec& spec);

// For a shard dataset with on_error "raise": InvalidArgument naming the
// first skipped sample (shard and key) or damaged shard. Ok otherwise.
// (Who may read which shard is the DatasetRegistry's check.)
Status CheckShardJob(const Dataset& dataset, const JobSpec& spec);

// Where each of the job's fields is among the dataset's (JobPlan::
// field_map); InvalidArgument naming a field the dataset lacks, or a
// dataset without fields. With JobSpec::image_in_fields the dataset's image
// column is taken out of the job's fields first; InvalidArgument, worded as
// the Python client words it for a manifest it reads, when they leave that
// column out or name nothing else.
Result<std::vector<uint32_t>> JobFieldMap(const Dataset& dataset, const JobSpec& spec);

// Shard counts, skipped members and samples, damage, index age and the
// process-wide index counters; nothing for other datasets.
std::optional<ShardSetSnapshot> SnapshotShards(const Dataset& dataset);

// A prefix folder's or a manifest of objects' own counts with the node's
// store counts; nothing for other datasets.
std::optional<ObjectFolderSnapshot> SnapshotObjectFolder(const Dataset& dataset);

// A snapshot of an object store's counts.
ObjectStoreSnapshot SnapshotObjectStore(const objectstore::ObjectStoreCounters& counters);

// Listings under way now (shard sets, ImageFolder trees, manifests): path,
// kind, unit (shards, files, lines), done, total (unknown while a folder is
// walked), seconds, rate (units/s) and estimated seconds left (-1 while
// unknown); folders also carry classes and classes_done.
std::vector<IndexingSnapshot> SnapshotIndexing();

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_SHARD_DATASETS_H_
