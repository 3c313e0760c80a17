// DatasetRegistry: the daemon's one list of open datasets.
//
// Jobs whose sources resolve to the same files (an ImageFolder or manifest
// by canonical path; a shard set by its canonical shards and keys, however
// the job spelled them) share one Dataset instance, hence one sampler group
// and one set of cache keys, if they also ask for the same max_resolution
// (each value is a listing of its own). Each instance gets a number that is never
// reused (`index`, the dataset half of cache::MakeKey), so a dataset listed
// again gets new cache keys and nothing cached from the old listing is
// served for it.
//
// Freshness: every Open re-checks the storage against the listing
// (Dataset::Verify: the identities of its directories and files); when
// something was added, removed or replaced, the dataset is listed again and
// the new instance replaces the old one for this and later jobs (jobs
// already running keep theirs). Forget drops a listing so the next job lists
// afresh.
//
// Descriptors: every shard set keeps its open shard descriptors in one
// ShardDescriptorCache of max_open_shards_total (shard_descriptors.h), so
// listings kept for later jobs cannot add up to the process's limit.
//
// Access: the peer must be allowed to read the root (before anything is
// listed) and every item its job is served, and to search every directory
// leading to them (server/dataset/access.h); otherwise PermissionDenied
// names the path. The check runs for every job, also when the items are in
// a cache tier. Shards kept as objects (s3:// URLs) are read with the job's
// own credentials (JobSpec::s3) at an endpoint of allowed_s3_endpoints: the
// job that lists them HEADs and streams each with its credentials, and a
// later job sharing the listing first HEADs every shard with its own
// (Dataset::VerifyObjects); refused, it is refused (PermissionDenied).
//
// Memory: a listing is charged (UserMemory) to the user whose job asked for
// it first, for as long as the registry or any job keeps it; when a new
// listing would put that user over their share, the user's listings that no
// job holds are dropped first, and if that is not enough the open is
// refused (ResourceExhausted) and the new listing freed.
//
// Jobs opening the same dataset together (DDP ranks) share one listing: the
// first lists it, and the others wait for that listing and then take it as
// a later job would (for objects, HEADing every shard with their own
// credentials); if it fails, the next of them lists.
//
// Thread-safety: every method may be called from any thread; listings and
// checks run without the registry's lock, so a slow listing never blocks
// another dataset's open or a query.
#ifndef GALLEY_SERVER_DAEMON_DATASET_REGISTRY_H_
#define GALLEY_SERVER_DAEMON_DATASET_REGISTRY_H_

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "galley/daemon/daemon_options.h"
#include "galley/daemon/user_memory.h"
#include "galley/dataset/access.h"
#include "galley/dataset/dataset.h"
#include "galley/dataset/shard_descriptors.h"
#include "galley/job_spec.h"
#include "galley/mutex.h"
#include "galley/snapshots/snapshots.h"
#include "galley/status.h"

namespace galley {

// One job's view of its dataset.
struct OpenedDataset {
  std::shared_ptr<const Dataset> dataset;
  uint32_t index = 0;          // never reused; the cache keys' dataset number
  std::vector<ItemId> subset;  // what the job is served: sorted, distinct
};

struct DatasetRegistryOptions {
  // Directories datasets may be served from; SetAllowedRoots replaces them.
  std::vector<std::string> allowed_roots;
  // Shard descriptors every listing together keeps open (resolved: never 0).
  uint32_t max_open_shards_total = 0;
  // What every shard set is opened with: the index cache, descriptors per
  // set, index threads. Each job names its own image and label keys
  // (ShardOptionsFor).
  ShardOptions shards;
  // The bounds on a manifest's lines and columns (max_manifest_line_bytes,
  // max_manifest_columns); each job names its own header and image column.
  uint64_t max_manifest_line_bytes = ManifestOptions::kDefaultMaxLineBytes;
  uint32_t max_manifest_columns = ManifestOptions::kDefaultMaxColumns;
  // Where shards kept as objects are read; null: s3:// shards are refused.
  std::shared_ptr<objectstore::ObjectStore> object_store;
  // The endpoints (scheme and authority) jobs may name for their objects;
  // "aws" stands for AWS's regional endpoints. Empty: none.
  std::vector<std::string> allowed_s3_endpoints;
  // Images kept one per object: whether jobs with other access keys share
  // a listing once each HEADed every object (false: DaemonOptions::
  // s3_folder_sharing "per_key", a listing per access key).
  bool share_object_folders_across_keys = true;

  static DatasetRegistryOptions From(const DaemonOptions& options);
};

class DatasetRegistry {
 public:
  // `memory` (may be null: nothing is charged) must outlive the registry.
  explicit DatasetRegistry(const DatasetRegistryOptions& options, UserMemory* memory = nullptr);

  // Picks the job's items from a listed dataset (the job's classes, ranges
  // and ids); its errors are the caller's.
  using Selector = std::function<Result<std::vector<ItemId>>(const Dataset&)>;

  // The dataset `spec` names, listed or shared, fresh, with the subset
  // `select` picks and checked for `peer`. Errors: those of Dataset::Open /
  // OpenShards, of `select`, PermissionDenied naming what `peer` may not
  // read, and Cancelled when `stop` (may be null) stopped a listing.
  Result<OpenedDataset> Open(const JobSpec& spec, const Credentials& peer, const Selector& select,
                             ListingStop* stop = nullptr);

  // Who asks Forget to drop a listing. A listing costs a walk of the whole
  // dataset to make again, so besides the admins only those with a stake in
  // it may drop it: the owner of its root, and users whose jobs read it now.
  struct Forgetter {
    // Null for an admin, who may forget any listing. For anyone else, a
    // listing whose root they may not read is not found, as if absent.
    AccessChecker* checker = nullptr;
    uid_t uid = 0;
    // The roots of the datasets the user's open jobs read.
    std::vector<std::filesystem::path> reading;
  };

  // Drops the listings of `name` (a dataset root or shard as given to
  // galleyctl, or a snapshot's key) that `by` may forget. NotFound when
  // nothing matches that `by` may read; PermissionDenied, naming who may,
  // when `by` may read a match but forget none. Jobs running on a dropped
  // listing keep it; the next job lists it again.
  Status Forget(const std::string& name, const Forgetter& by);

  // Allowed roots from a reloaded configuration; later opens use them.
  // When they change, every listing is dropped: each was checked against
  // the old roots, so the next job on it lists (and checks) it again. Jobs
  // already running keep theirs.
  void SetAllowedRoots(const std::vector<std::string>& roots);

  // Every listed dataset, with its shard figures for a shard set.
  std::vector<DatasetSnapshot> Snapshot() const;
  size_t size() const;
  // The counts of the object store s3:// datasets are read through; zeros
  // when there is none.
  ObjectStoreSnapshot ObjectStoreCounts() const;
  // The shard descriptors of every listing together.
  ShardDescriptorCounts ShardDescriptors() const { return shard_descriptors_->Counts(); }

 private:
  struct Entry {
    // Keeps the listing's memory charge alive as long as the dataset.
    std::shared_ptr<const Dataset> dataset;
    uid_t charged_uid = 0;
    uint32_t index = 0;
    std::chrono::steady_clock::time_point listed_at;
    uint64_t listings = 0;
  };

  // The key under which jobs share the dataset `spec` names.
  std::string KeyOf(const JobSpec& spec) const;
  // PermissionDenied unless `checker`'s user may read the dataset's root
  // (list the folder; read the manifest, or every shard).
  Status CheckRoots(const JobSpec& spec, AccessChecker& checker) const;
  // Lists the dataset anew.
  Result<std::shared_ptr<const Dataset>> List(const JobSpec& spec, ListingStop* stop) const;
  // For shards kept as objects: the job's access, checked against
  // allowed_s3_endpoints. InvalidArgument for a list mixing objects and
  // files or lacking the job's access; PermissionDenied for an endpoint
  // outside the list. nullopt for files.
  Result<std::optional<objectstore::Access>> ObjectAccessOf(const JobSpec& spec) const;
  // Installs `dataset` under `key` unless `replacing` is no longer the one
  // there (another job listed it first); returns the entry now in force.
  Entry Install(const std::string& key, std::shared_ptr<const Dataset> dataset,
                const Dataset* replacing, uid_t charged_uid);
  // `listed` with its memory charged to `uid` (an aliasing pointer that
  // owns the charge): the user's idle listings are dropped first when they
  // are needed to make room. ResourceExhausted when the user is over.
  Result<std::shared_ptr<const Dataset>> Charged(std::shared_ptr<const Dataset> listed, uid_t uid);
  // Drops `uid`'s listings that no job holds; how many.
  size_t DropIdleListingsOf(uid_t uid);

  UserMemory* const memory_;
  const ShardOptions shard_options_;
  const uint64_t max_manifest_line_bytes_;
  const uint32_t max_manifest_columns_;
  const std::shared_ptr<ShardDescriptorCache> shard_descriptors_;
  const std::shared_ptr<objectstore::ObjectStore> object_store_;
  const std::vector<std::string> allowed_s3_endpoints_;
  const bool share_object_folders_across_keys_;
  // Salts what names an access key in a listing's key ("per_key"), so the
  // key shows no credential, nor one comparable across daemons.
  const uint64_t key_salt_;

  mutable Mutex mu_;
  std::vector<std::filesystem::path> allowed_roots_ GUARDED_BY(mu_);
  std::map<std::string, Entry> entries_ GUARDED_BY(mu_);
  // Keys of datasets a job is listing for the first time. A job opening one
  // waits for that listing (`listed_`) instead of making its own beside it:
  // DDP ranks open together, and each listing of a shard set in object
  // storage streams every shard whole.
  std::set<std::string> first_listings_ GUARDED_BY(mu_);
  CondVar listed_;
  uint32_t next_index_ GUARDED_BY(mu_) = 0;
};

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_DATASET_REGISTRY_H_
