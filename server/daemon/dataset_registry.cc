#include "galley/daemon/dataset_registry.h"

#include <spdlog/spdlog.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <random>
#include <system_error>

#include "galley/daemon/node_probe.h"
#include "galley/daemon/shard_datasets.h"
#include "galley/dataset/manifest_table.h"

// Under a sanitizer the allocator is the sanitizer's, and glibc's own arenas
// are never set up: malloc_trim would initialize them from whichever
// connection thread gets there first, racing the others (a crash in mtrim).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GALLEY_SANITIZED_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define GALLEY_SANITIZED_ALLOCATOR 1
#endif
#endif

namespace galley {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Checks, before anything is listed, that `checker`'s user may read the
// dataset's root: list a directory (read and search), read a manifest or a
// shard. A path the daemon cannot resolve is NotFound only when the user
// could have seen that themselves.
Status CheckRoot(const std::string& given, AccessChecker& checker) {
  std::error_code error;
  const fs::path canonical = fs::canonical(given, error);
  if (error) {
    const fs::path parent = fs::path(given).lexically_normal().parent_path();
    if (!parent.empty()) GALLEY_RETURN_IF_ERROR(checker.CheckDirectory(fs::absolute(parent)));
    return Status::NotFound(given + ": " + error.message());
  }
  struct stat info {};
  if (::stat(canonical.c_str(), &info) != 0) return Status::NotFound(given + ": cannot stat");
  GALLEY_RETURN_IF_ERROR(checker.CheckFile(canonical, info));
  if (S_ISDIR(info.st_mode)) GALLEY_RETURN_IF_ERROR(checker.CheckDirectory(canonical));
  return Status::Ok();
}

// A job's admission to a listing of objects another job made (its LIST and
// HEADs, Dataset::VerifyObjects); one stopped by `stop` is logged as a
// stopped listing is.
Status AdmitToObjects(const Dataset& dataset, const objectstore::Access& access, bool* changed,
                      ListingStop* stop) {
  Status admitted = dataset.VerifyObjects(access, changed, stop);
  if (admitted.code() == StatusCode::kCancelled) {
    spdlog::info("dataset {}: {}", dataset.root().string(), admitted.message());
  }
  return admitted;
}

}  // namespace

DatasetRegistryOptions DatasetRegistryOptions::From(const DaemonOptions& options) {
  DatasetRegistryOptions o;
  o.allowed_roots = options.allowed_roots;
  o.max_open_shards_total = options.max_open_shards_total;
  o.shards.max_open_shards = options.max_open_shards;
  o.shards.index_threads = UsableCores();
  o.shards.index_cache_max_bytes = options.tar_index_max_bytes;
  o.max_manifest_line_bytes = options.max_manifest_line_bytes;
  o.max_manifest_columns = options.max_manifest_columns;
  o.allowed_s3_endpoints = options.allowed_s3_endpoints;
  o.share_object_folders_across_keys = options.s3_folder_sharing != "per_key";
  o.shards.object_requests_in_flight = options.s3_requests_in_flight;
  o.shards.object_prefetch_bytes = options.s3_prefetch_bytes;
  o.shards.object_listing_keep_bytes = options.s3_listing_keep_bytes;
  o.shards.object_refresh_wait = std::chrono::milliseconds(options.s3_refresh_wait_ms);
  // tar_index_dir "" is the user's cache folder, "none" no index cache.
  if (options.tar_index_dir == "none") return o;
  if (!options.tar_index_dir.empty()) {
    o.shards.index_cache_dir = options.tar_index_dir;
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    o.shards.index_cache_dir = fs::path(xdg) / "galley" / "tar-index";
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    o.shards.index_cache_dir = fs::path(home) / ".cache" / "galley" / "tar-index";
  }
  return o;
}

DatasetRegistry::DatasetRegistry(const DatasetRegistryOptions& options, UserMemory* memory)
    : memory_(memory),
      shard_options_(options.shards),
      max_manifest_line_bytes_(options.max_manifest_line_bytes),
      max_manifest_columns_(options.max_manifest_columns),
      shard_descriptors_(std::make_shared<ShardDescriptorCache>(options.max_open_shards_total)),
      object_store_(options.object_store),
      allowed_s3_endpoints_(options.allowed_s3_endpoints),
      share_object_folders_across_keys_(options.share_object_folders_across_keys),
      key_salt_(std::random_device()() * 0x100000001b3ULL ^ std::random_device()()) {
  SetAllowedRoots(options.allowed_roots);
}

void DatasetRegistry::SetAllowedRoots(const std::vector<std::string>& roots) {
  MutexLock lock(&mu_);
  std::vector<fs::path> updated(roots.begin(), roots.end());
  if (updated == allowed_roots_) return;
  allowed_roots_ = std::move(updated);
  if (!entries_.empty()) {
    spdlog::info("allowed roots changed: {} listings dropped, to be checked again",
                 entries_.size());
  }
  entries_.clear();
}

std::string DatasetRegistry::KeyOf(const JobSpec& spec) const {
  // Shrunk images are other items: their own listing, hence their own
  // sampler group and cache keys.
  const std::string shrunk =
      spec.max_resolution != 0 ? "\tmax_resolution:" + std::to_string(spec.max_resolution) : "";
  if (!spec.shards.empty()) {
    // Objects: the endpoint is part of the key (the job's credentials never
    // are: jobs with other credentials share the listing once admitted).
    const std::string endpoint = spec.s3 && Dataset::IsObjectUrl(spec.shards.front())
                                     ? ObjectEndpointName(ObjectAccessFor(*spec.s3).endpoint)
                                     : std::string();
    std::string key =
        Dataset::ShardSetKey(spec.shards, ShardOptionsFor(spec, shard_options_), endpoint);
    // On the options line, before the shard paths: those stay one per line
    // to the end, as galleyctl reads them.
    const size_t first_shard = key.find('\n', key.find('\n', key.find('\n') + 1) + 1);
    return key.insert(first_shard, shrunk);
  }
  std::string key;
  if (Dataset::IsObjectUrl(spec.dataset)) {
    key = spec.dataset;
  } else {
    std::error_code error;
    const std::string canonical = fs::weakly_canonical(spec.dataset, error).string();
    key = error ? spec.dataset : canonical;
  }
  // Objects (a prefix, a manifest object, or a local manifest naming
  // objects): the endpoint is part of the key, as for shards.
  if (spec.s3) {
    key += "\tendpoint:" + ObjectEndpointName(ObjectAccessFor(*spec.s3).endpoint);
    if (!share_object_folders_across_keys_) {
      // A listing per access key, named by a salted hash of it.
      const uint64_t principal =
          std::hash<std::string>()(std::to_string(key_salt_) + "\n" + spec.s3->access_key_id);
      key += "\tprincipal:" + std::to_string(principal);
    }
  }
  // A manifest read with a header row, or with another image column, is
  // another listing of the same file.
  const ManifestOptions manifest = ManifestOptionsFor(spec);
  if (manifest.header_row && !HasHeaderByName(spec.dataset)) key += "\theader";
  if (!manifest.image_column.empty()) key += "\timage:" + manifest.image_column;
  return key + shrunk;
}

Result<std::optional<objectstore::Access>> DatasetRegistry::ObjectAccessOf(
    const JobSpec& spec) const {
  const size_t objects =
      std::count_if(spec.shards.begin(), spec.shards.end(), Dataset::IsObjectUrl);
  // A prefix or manifest object; or a local manifest sent with the job's
  // S3 access, whose cells name objects.
  const bool folder = spec.shards.empty() && (Dataset::IsObjectUrl(spec.dataset) || spec.s3);
  if (objects == 0 && !folder) return std::optional<objectstore::Access>();
  if (objects != spec.shards.size()) {
    return Status::InvalidArgument(
        "the shard list mixes s3:// objects and files; a dataset is kept in one place");
  }
  if (!spec.s3) {
    return Status::InvalidArgument(
        "datasets kept as s3:// objects need the job's S3 access (endpoint and credentials), "
        "which the galley client resolves and sends as the AWS CLI would");
  }
  objectstore::Access access = ObjectAccessFor(*spec.s3);
  const std::string endpoint = ObjectEndpointName(access.endpoint);
  if (!EndpointAllowed(endpoint, allowed_s3_endpoints_)) {
    return Status::PermissionDenied(
        "the S3 endpoint " + endpoint +
        " is not one this galleyd may read from; the node's admin must add it to "
        "allowed_s3_endpoints (galleyd.conf, or --allowed-s3-endpoint, repeatable)");
  }
  if (object_store_ == nullptr) {
    return Status::InvalidArgument("this galleyd was built without S3 support");
  }
  return std::optional<objectstore::Access>(std::move(access));
}

Status DatasetRegistry::CheckRoots(const JobSpec& spec, AccessChecker& checker) const {
  if (spec.shards.empty()) return CheckRoot(spec.dataset, checker);
  // Every shard, not only those holding the job's items: a shard the user
  // may not read is not indexed, nor counted, on their behalf.
  for (const std::string& shard : spec.shards) GALLEY_RETURN_IF_ERROR(CheckRoot(shard, checker));
  return Status::Ok();
}

Result<std::shared_ptr<const Dataset>> DatasetRegistry::List(const JobSpec& spec,
                                                             ListingStop* stop) const {
  std::vector<fs::path> roots;
  {
    MutexLock lock(&mu_);
    roots = allowed_roots_;
  }
  Result<std::shared_ptr<const Dataset>> listed = Status::Internal("not listed");
  if (spec.shards.empty()) {
    ManifestOptions manifest = ManifestOptionsFor(spec);
    manifest.max_line_bytes = max_manifest_line_bytes_;
    manifest.max_columns = max_manifest_columns_;
    manifest.stop = stop;
    auto access = ObjectAccessOf(spec);
    if (!access.ok()) return access.status();
    if (!access->has_value()) {
      listed = Dataset::Open(spec.dataset, roots, manifest);
    } else if (Dataset::IsObjectUrl(spec.dataset)) {
      listed = Dataset::OpenObjectFolder(spec.dataset, object_store_, **access, shard_options_,
                                         manifest);
    } else {
      listed = Dataset::OpenObjectManifest(spec.dataset, roots, object_store_, **access,
                                           shard_options_, manifest);
    }
  } else {
    ShardOptions shard = ShardOptionsFor(spec, shard_options_);
    shard.descriptors = shard_descriptors_;
    shard.stop = stop;
    auto access = ObjectAccessOf(spec);
    if (!access.ok()) return access.status();
    listed = access->has_value()
                 ? Dataset::OpenObjectShards(spec.shards, object_store_, **access, shard)
                 : Dataset::OpenShards(spec.shards, shard, roots);
  }
  if (!listed.ok() && listed.status().code() == StatusCode::kCancelled) {
    spdlog::info("dataset {}: {}", spec.shards.empty() ? spec.dataset : spec.shards.front(),
                 listed.status().message());
  }
#if defined(__GLIBC__) && !defined(GALLEY_SANITIZED_ALLOCATOR)
  // Listing a million items frees millions of small allocations (walked
  // file names, shard member names and label payloads), many in the
  // listing threads' own arenas; glibc keeps those pages resident until
  // asked to give them back.
  ::malloc_trim(0);
#endif
  return listed;
}

Result<std::shared_ptr<const Dataset>> DatasetRegistry::Charged(
    std::shared_ptr<const Dataset> listed, uid_t uid) {
  if (memory_ == nullptr) return listed;
  const std::string what = "the listing of " + listed->root().string();
  auto charge = memory_->Take(uid, listed->held_bytes(), what);
  if (!charge.ok() && DropIdleListingsOf(uid) > 0) {
    charge = memory_->Take(uid, listed->held_bytes(), what);
  }
  if (!charge.ok()) return charge.status();
  // The charge lives in the pointer's control block: it is given back when
  // the last holder, the registry or a job, lets the dataset go.
  struct Holder {
    std::shared_ptr<const Dataset> dataset;
    UserMemory::Charge charge;
  };
  auto holder = std::make_shared<Holder>(Holder{listed, std::move(charge).value()});
  return std::shared_ptr<const Dataset>(holder, listed.get());
}

size_t DatasetRegistry::DropIdleListingsOf(uid_t uid) {
  MutexLock lock(&mu_);
  size_t dropped = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.charged_uid == uid && it->second.dataset.use_count() == 1) {
      spdlog::info("dataset {}: listing dropped to make room in uid {}'s memory share",
                   it->second.dataset->root().string(), uid);
      it = entries_.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  return dropped;
}

DatasetRegistry::Entry DatasetRegistry::Install(const std::string& key,
                                                std::shared_ptr<const Dataset> dataset,
                                                const Dataset* replacing, uid_t charged_uid) {
  MutexLock lock(&mu_);
  auto [it, inserted] = entries_.try_emplace(key);
  Entry& entry = it->second;
  if (!inserted && entry.dataset.get() != replacing) return entry;  // another job was first
  const uint64_t listings = inserted ? 0 : entry.listings;
  entry = Entry{std::move(dataset), charged_uid, next_index_++, Clock::now(), listings + 1};
  spdlog::info("dataset {}: {} items{}", entry.dataset->root().string(), entry.dataset->size(),
               listings > 0 ? " (listed again: the storage changed)" : "");
  return entry;
}

Result<OpenedDataset> DatasetRegistry::Open(const JobSpec& given, const Credentials& peer,
                                            const Selector& select, ListingStop* stop) {
  AccessChecker checker(peer);
  GALLEY_ASSIGN_OR_RETURN(const std::optional<objectstore::Access> object_access,
                          ObjectAccessOf(given));
  // Globs over s3:// keys are expanded here, by the job's own LIST: the
  // listing shared is the one of the keys they match now.
  const JobSpec* expanded = &given;
  JobSpec with_shards;
  if (object_access && std::any_of(given.shards.begin(), given.shards.end(),
                                   [](const std::string& s) { return Dataset::IsObjectGlob(s); })) {
    with_shards = given;
    with_shards.shards.clear();
    for (const std::string& shard : given.shards) {
      if (!Dataset::IsObjectGlob(shard)) {
        with_shards.shards.push_back(shard);
        continue;
      }
      GALLEY_ASSIGN_OR_RETURN(
          auto matched, Dataset::ExpandObjectGlob(shard, *object_store_, *object_access, stop));
      with_shards.shards.insert(with_shards.shards.end(), matched.begin(), matched.end());
    }
    expanded = &with_shards;
  }
  if (object_access && given.shards.empty() && Dataset::IsObjectUrl(given.dataset) &&
      given.dataset.back() != '/') {
    // s3://bucket/name is a manifest object if one has that name, else the
    // prefix name/: one listing under one key, however it was spelt.
    auto url = objectstore::S3Url::Parse(given.dataset);
    if (url.ok() && !url->key.empty()) {
      auto info = object_store_->Head(*object_access, url->bucket, url->key);
      if (!info.ok() && info.status().code() == StatusCode::kNotFound) {
        with_shards = given;
        with_shards.dataset += '/';
        expanded = &with_shards;
      }
    }
  }
  const JobSpec& spec = *expanded;
  const std::string key = KeyOf(spec);
  // The same check whether or not another job listed the dataset first.
  // (Objects are checked by the store, with the job's own credentials; a
  // local manifest naming objects is a file the user must be able to read.)
  if (!object_access || (spec.shards.empty() && !Dataset::IsObjectUrl(spec.dataset))) {
    GALLEY_RETURN_IF_ERROR(CheckRoots(spec, checker));
  }
  Entry entry;
  bool first_lister = false;
  {
    MutexLock lock(&mu_);
    // Another job's first listing of the dataset under way: this job takes
    // it once made, as if it had come later. If that listing fails (its
    // job's credentials refused, its client gone), this job lists.
    while (first_listings_.contains(key) && !entries_.contains(key)) {
      if (StopRequested(stop)) return stop->Why();
      listed_.WaitFor(&mu_, std::chrono::milliseconds(100));
    }
    if (auto it = entries_.find(key); it != entries_.end()) {
      entry = it->second;
    } else {
      first_listings_.insert(key);
      first_lister = true;
    }
  }
  // However this job's listing ends, the jobs waiting for it go on.
  struct FirstListingDone {
    DatasetRegistry* registry;
    const std::string* key;
    ~FirstListingDone() {
      if (key == nullptr) return;
      MutexLock lock(&registry->mu_);
      registry->first_listings_.erase(*key);
      registry->listed_.SignalAll();
    }
  } done{this, first_lister ? &key : nullptr};
  if (entry.dataset != nullptr && object_access) {
    // Listed with another job's credentials: served to this job only once
    // its own have HEADed every shard, each the listed version.
    bool changed = false;
    GALLEY_RETURN_IF_ERROR(AdmitToObjects(*entry.dataset, *object_access, &changed, stop));
    if (changed) {
      GALLEY_ASSIGN_OR_RETURN(auto listed, List(spec, stop));
      GALLEY_ASSIGN_OR_RETURN(listed, Charged(std::move(listed), peer.uid));
      const Dataset* ours = listed.get();
      entry = Install(key, std::move(listed), entry.dataset.get(), peer.uid);
      if (entry.dataset.get() != ours) {
        // Another job's listing came first: its shards, HEADed with ours.
        GALLEY_RETURN_IF_ERROR(AdmitToObjects(*entry.dataset, *object_access, &changed, stop));
      }
    }
  }
  if (entry.dataset == nullptr) {
    GALLEY_ASSIGN_OR_RETURN(auto listed, List(spec, stop));
    GALLEY_ASSIGN_OR_RETURN(listed, Charged(std::move(listed), peer.uid));
    entry = Install(key, std::move(listed), nullptr, peer.uid);
  }
  // At most one re-listing: a dataset changing faster than it can be listed
  // is served as last listed, and its changed files fail as sample errors.
  for (int attempt = 0;; ++attempt) {
    GALLEY_ASSIGN_OR_RETURN(auto subset, select(*entry.dataset));
    bool changed = false;
    Status access = entry.dataset->Verify(&checker, subset, &changed);
    if (!changed || attempt == 1) {
      GALLEY_RETURN_IF_ERROR(access);
      return OpenedDataset{entry.dataset, entry.index, std::move(subset)};
    }
    GALLEY_ASSIGN_OR_RETURN(auto listed, List(spec, stop));
    GALLEY_ASSIGN_OR_RETURN(listed, Charged(std::move(listed), peer.uid));
    entry = Install(key, std::move(listed), entry.dataset.get(), peer.uid);
  }
}

Status DatasetRegistry::Forget(const std::string& name, const Forgetter& by) {
  std::error_code error;
  const std::string canonical = fs::weakly_canonical(name, error).string();
  MutexLock lock(&mu_);
  size_t dropped = 0;
  std::string refused_root;
  for (auto it = entries_.begin(); it != entries_.end();) {
    const fs::path& root = it->second.dataset->root();
    const bool named = it->first == name || it->first == canonical || root.string() == canonical ||
                       root.string() == name;
    bool allowed = named;
    if (named && by.checker != nullptr) {
      struct stat info {};
      const bool readable =
          ::stat(root.c_str(), &info) == 0 && by.checker->CheckFile(root, info).ok();
      const bool reading =
          std::find(by.reading.begin(), by.reading.end(), root) != by.reading.end();
      allowed = readable && (info.st_uid == by.uid || reading);
      if (readable && !allowed) refused_root = root.string();
    }
    if (allowed) {
      spdlog::info("dataset {}: listing forgotten", root.string());
      it = entries_.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  if (dropped > 0) return Status::Ok();
  if (!refused_root.empty()) {
    return Status::PermissionDenied(
        "forget " + name + ": only root, galleyd's user, members of admin_group, the owner of " +
        refused_root +
        " and users with a job open on it may forget its listing; galleyd lists a dataset again "
        "by itself when its files change");
  }
  return Status::NotFound("no dataset listed as " + name);
}

std::vector<DatasetSnapshot> DatasetRegistry::Snapshot() const {
  std::vector<DatasetSnapshot> out;
  std::vector<std::shared_ptr<const Dataset>> datasets;
  {
    MutexLock lock(&mu_);
    const auto now = Clock::now();
    for (const auto& [key, entry] : entries_) {
      const Dataset& d = *entry.dataset;
      out.push_back({key, d.root().string(), entry.index, d.size(), d.classes().size(),
                     d.total_bytes(), std::chrono::duration<double>(now - entry.listed_at).count(),
                     entry.listings, d.content_fingerprint().Hex(), std::nullopt, std::nullopt});
      datasets.push_back(entry.dataset);
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].shards = SnapshotShards(*datasets[i]);
    out[i].objects = SnapshotObjectFolder(*datasets[i]);
  }
  return out;
}

ObjectStoreSnapshot DatasetRegistry::ObjectStoreCounts() const {
  if (object_store_ == nullptr) return {};
  return SnapshotObjectStore(object_store_->counters());
}

size_t DatasetRegistry::size() const {
  MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace galley
