#include "object_folder.h"

#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

#include "galley/dataset/dataset.h"
#include "galley/dataset/listing_progress.h"

namespace galley {

namespace os = objectstore;

namespace {

// `status` with `what` in front, unless the message names it already.
Status Naming(const std::string& what, const Status& status) {
  if (status.message().find(what) != std::string::npos) return status;
  return Status(status.code(), what + ": " + status.message());
}

// Whether every '/'-separated segment of `relative` could be a file name:
// none empty, "." or "..". No file system holds another, so a local copy of
// the folder could not list it.
bool FileLikeKey(std::string_view relative) {
  size_t begin = 0;
  while (true) {
    const size_t end = relative.find('/', begin);
    const std::string_view segment = relative.substr(
        begin, end == std::string_view::npos ? std::string_view::npos : end - begin);
    if (segment.empty() || segment == "." || segment == "..") return false;
    if (end == std::string_view::npos) return true;
    begin = end + 1;
  }
}

// A key under a folder prefix, relative to it, as the ImageFolder sees it:
// its class (the first segment; "" for a key beside the class folders),
// and whether it is an image the folder lists.
struct FolderKey {
  std::string_view class_name;
  bool image = false;
};

FolderKey ClassifyFolderKey(std::string_view relative) {
  const size_t slash = relative.find('/');
  if (slash == std::string_view::npos || slash == 0) return {};
  FolderKey key{relative.substr(0, slash), false};
  // A key ending in '/' is a "folder" marker (what consoles create): the
  // folder exists, holding nothing.
  if (relative.back() == '/') return key;
  key.image = FileLikeKey(relative) && HasImageExtension(relative);
  return key;
}

void FoldListed(ContentFingerprintBuilder& digest, const os::ObjectInfo& info) {
  digest.AddString(info.key);
  digest.AddInteger(info.size);
  digest.AddString(info.etag);
}

std::string PrefixUrl(const os::S3Url& prefix) { return prefix.ToString(); }

}  // namespace

Result<std::unique_ptr<ObjectFolderSource>> ObjectFolderSource::Open(
    const std::string& url, const std::shared_ptr<os::ObjectStore>& store, const os::Access& access,
    const ShardOptions& options, const ManifestOptions& manifest) {
  if (store == nullptr) return Status::InvalidArgument("this galleyd reads no object storage");
  GALLEY_ASSIGN_OR_RETURN(os::S3Url parsed, os::S3Url::Parse(url));
  if (!parsed.key.empty() && parsed.key.back() != '/') {
    // An object is a manifest; no object of that name, a prefix.
    auto info = store->Head(access, parsed.bucket, parsed.key);
    if (info.ok()) {
      const std::string name = parsed.ToString();
      if (info->size > kMaxManifestBytes) {
        return Status::InvalidArgument(name + " is larger than " +
                                       std::to_string(kMaxManifestBytes) +
                                       " bytes, the most a manifest object may hold");
      }
      auto text = store->Get(access, parsed.bucket, parsed.key, 0, 0, info->etag);
      if (!text.ok()) return Naming(name, text.status());
      os::S3Url base = parsed;
      base.key = base.key.substr(0, base.key.rfind('/') + 1);
      GALLEY_ASSIGN_OR_RETURN(
          auto source, OpenManifest(name, std::string(text->begin(), text->end()), base.ToString(),
                                    store, access, options, manifest));
      source->manifest_url_ = parsed;
      source->manifest_etag_ = info->etag;
      source->manifest_heads_ = 1;  // the HEAD above
      return source;
    }
    if (info.status().code() != StatusCode::kNotFound) return Naming(url, info.status());
    parsed.key += '/';
  }
  std::unique_ptr<ObjectFolderSource> source(new ObjectFolderSource(store, access));
  source->folder_ = true;
  source->prefixes_.push_back(parsed);
  std::vector<Listed> items;
  GALLEY_RETURN_IF_ERROR(source->ListFolder(access, parsed, manifest.stop, &items));
  source->Keep(std::move(items), access, options);
  return source;
}

Status ObjectFolderSource::ListFolder(const os::Access& access, const os::S3Url& prefix,
                                      ListingStop* stop, std::vector<Listed>* items) {
  const std::string url = PrefixUrl(prefix);
  ListingRegistration registration(url, "folder", "files", 0);
  ListingProgress& progress = registration.progress();
  std::map<std::string, uint64_t> class_images;  // sorted as torchvision sorts them
  ContentFingerprintBuilder digest("object-listing");
  bool any = false;
  listings_++;
  const Status listed =
      store_->List(access, prefix.bucket, prefix.key, [&](const os::ObjectInfo& info) -> Status {
        if (StopRequestedNow(stop)) return stop->Why();
        any = true;
        const std::string_view relative = std::string_view(info.key).substr(prefix.key.size());
        const FolderKey key = ClassifyFolderKey(relative);
        if (key.class_name.empty()) return Status::Ok();
        uint64_t& images = class_images[std::string(key.class_name)];
        if (!key.image) return Status::Ok();
        ++images;
        FoldListed(digest, info);
        items->push_back(
            {std::string(relative), os::S3Url{prefix.bucket, info.key}, info.size, info.etag, -1});
        progress.done++;
        return Status::Ok();
      });
  if (!listed.ok()) return Naming(url, listed);
  if (!any) return Status::NotFound(url + ": no object has this prefix");
  if (class_images.empty()) return NoClassFolders(url);
  std::map<std::string_view, int64_t> labels;
  for (const auto& [name, images] : class_images) {
    if (images == 0) return EmptyClassFolder(name);
    labels.emplace(name, static_cast<int64_t>(classes_.size()));
    classes_.push_back(name);
  }
  progress.classes = classes_.size();
  progress.classes_done = classes_.size();
  for (Listed& item : *items) {
    item.label = labels.at(std::string_view(item.relative).substr(0, item.relative.find('/')));
  }
  // make_dataset: each class in turn, its directories in path order (as
  // sorted(os.walk()) gives them), each directory's files by name.
  auto order = [](const Listed& item) {
    const std::string_view relative = item.relative;
    const size_t slash = relative.rfind('/');
    return std::make_tuple(item.label, relative.substr(0, slash), relative.substr(slash + 1));
  };
  std::sort(items->begin(), items->end(),
            [&](const Listed& a, const Listed& b) { return order(a) < order(b); });
  digest_ = digest.Finish();
  return Status::Ok();
}

Result<std::unique_ptr<ObjectFolderSource>> ObjectFolderSource::OpenManifest(
    const std::string& name, const std::string& text, const std::string& base,
    const std::shared_ptr<os::ObjectStore>& store, const os::Access& access,
    const ShardOptions& options, const ManifestOptions& manifest,
    std::optional<FileIdentity> file) {
  if (store == nullptr) return Status::InvalidArgument("this galleyd reads no object storage");
  std::optional<os::S3Url> base_url;
  if (!base.empty()) {
    GALLEY_ASSIGN_OR_RETURN(base_url, os::S3Url::Parse(base));
  }
  auto check = [&](const std::string& cell, const std::string& where) -> Result<std::string> {
    if (cell.rfind("s3://", 0) == 0) {
      auto url = os::S3Url::Parse(cell);
      if (!url.ok()) return Status::InvalidArgument(where + url.status().message());
      if (url->key.empty() || url->key.back() == '/') {
        return Status::InvalidArgument(where + "'" + cell + "' names no object");
      }
      return url->ToString();
    }
    if (!base_url) {
      return Status::InvalidArgument(where + "'" + cell +
                                     "' is not an s3:// URL: a manifest naming objects names "
                                     "each by its s3://bucket/key URL, or keeps its own object "
                                     "beside them and names them relative to it");
    }
    if (cell.find("://") != std::string::npos) {
      return Status::InvalidArgument(where + "'" + cell +
                                     "' is a URL of another kind; galley reads s3:// objects");
    }
    if (!FileLikeKey(cell)) {
      return Status::PermissionDenied(where + "key '" + cell +
                                      "' leaves the manifest's folder (a leading '/', an empty, "
                                      "'.' or '..' segment)");
    }
    return cell;
  };
  std::unique_ptr<ObjectFolderSource> source(new ObjectFolderSource(store, access));
  source->manifest_name_ = name;
  source->manifest_file_ = file;
  GALLEY_ASSIGN_OR_RETURN(source->table_,
                          FileSource::OpenManifestText(name, text, manifest, check));
  const FileSource& table = *source->table_;
  source->classes_ = table.classes();
  std::vector<Listed> items;
  items.reserve(table.size());
  for (ItemId id = 0; id < table.size(); ++id) {
    std::string cell = table.Name(id);
    os::S3Url url;
    if (cell.rfind("s3://", 0) == 0) {
      GALLEY_ASSIGN_OR_RETURN(url, os::S3Url::Parse(cell));
    } else {
      url = {base_url->bucket, base_url->key + cell};
    }
    items.push_back({std::move(cell), std::move(url), 0, "", table.label(id)});
  }
  if (items.empty()) return Status::InvalidArgument("dataset " + name + " has no items");
  GALLEY_RETURN_IF_ERROR(source->FindObjects(access, manifest.stop, &items));
  source->Keep(std::move(items), access, options);
  return source;
}

namespace {

// "bucket\nkey": what finds a listed object among a manifest's.
std::string ObjectId(const std::string& bucket, std::string_view key) {
  std::string id = bucket;
  id += '\n';
  id += key;
  return id;
}

}  // namespace

Status ObjectFolderSource::FindObjects(const os::Access& access, ListingStop* stop,
                                       std::vector<Listed>* items) {
  // The folders holding the objects, each listed once; a folder inside
  // another is listed with it.
  std::set<std::pair<std::string, std::string>> folders;
  std::unordered_map<std::string, std::vector<size_t>> wanted;
  for (size_t i = 0; i < items->size(); ++i) {
    const os::S3Url& url = (*items)[i].url;
    folders.emplace(url.bucket, url.key.substr(0, url.key.rfind('/') + 1));
    wanted[ObjectId(url.bucket, url.key)].push_back(i);
  }
  for (const auto& [bucket, key] : folders) {
    if (!prefixes_.empty() && prefixes_.back().bucket == bucket &&
        key.rfind(prefixes_.back().key, 0) == 0) {
      continue;
    }
    prefixes_.push_back({bucket, key});
  }
  ContentFingerprintBuilder digest("object-listing");
  ListingRegistration registration(manifest_name_, "manifest", "objects", items->size());
  for (const os::S3Url& prefix : prefixes_) {
    listings_++;
    const Status listed =
        store_->List(access, prefix.bucket, prefix.key, [&](const os::ObjectInfo& info) -> Status {
          if (StopRequestedNow(stop)) return stop->Why();
          auto it = wanted.find(ObjectId(prefix.bucket, info.key));
          if (it == wanted.end()) return Status::Ok();
          FoldListed(digest, info);
          for (size_t i : it->second) {
            (*items)[i].size = info.size;
            (*items)[i].etag = info.etag;
            registration.progress().done++;
          }
          return Status::Ok();
        });
    if (!listed.ok()) return Naming(PrefixUrl(prefix), listed);
  }
  for (const Listed& item : *items) {
    if (item.etag.empty()) {
      return Status::NotFound(manifest_name_ + ": object " + item.url.ToString() +
                              " does not exist");
    }
  }
  digest_ = digest.Finish();
  return Status::Ok();
}

void ObjectFolderSource::Keep(std::vector<Listed> items, const os::Access& access,
                              const ShardOptions& options) {
  ContentFingerprintBuilder fingerprint("objects");
  ContentFingerprintBuilder copy("objects-copy");
  ContentFingerprintBuilder versions("objects-versions");
  std::vector<ObjectShards::Shard> objects;
  objects.reserve(items.size());
  labels_.reserve(items.size());
  name_offsets_.reserve(items.size() + 1);
  for (Listed& item : items) {
    name_pool_ += item.relative;
    name_offsets_.push_back(name_pool_.size());
    labels_.push_back(item.label);
    total_bytes_ += item.size;
    fingerprint.AddString(endpoint_);
    fingerprint.AddString(item.url.bucket);
    fingerprint.AddString(item.url.key);
    fingerprint.AddInteger(item.size);
    fingerprint.AddString(item.etag);
    fingerprint.AddInteger(static_cast<uint64_t>(item.label));
    copy.AddString(item.relative);
    copy.AddInteger(item.size);
    copy.AddInteger(static_cast<uint64_t>(item.label));
    versions.AddString(item.etag);
    objects.push_back({std::move(item.url), item.size, std::move(item.etag)});
  }
  for (const std::string& name : classes_) {
    fingerprint.AddString(name);
    copy.AddString(name);
  }
  copy.AddInteger(labels_.size());
  content_fingerprint_ = fingerprint.Finish();
  resume_key_ = {copy.Finish(), versions.Finish()};
  held_bytes_ = name_pool_.capacity() + sizeof(uint64_t) * name_offsets_.capacity() +
                sizeof(int64_t) * labels_.capacity();
  for (const ObjectShards::Shard& object : objects) {
    held_bytes_ += sizeof(object) + object.url.bucket.capacity() + object.url.key.capacity() +
                   object.etag.capacity();
  }
  for (const std::string& name : classes_) held_bytes_ += sizeof(std::string) + name.capacity();
  storage_ = std::make_unique<ObjectShards>(store_, access, std::move(objects), options,
                                            options.object_requests_in_flight);
  MutexLock lock(&mu_);
  admitted_.insert(access.credentials.access_key_id);
}

Result<bool> ObjectFolderSource::ListsTheSame(const os::Access& access, ListingStop* stop) const {
  ContentFingerprintBuilder digest("object-listing");
  std::unordered_map<std::string, bool> wanted;
  if (!folder_) {
    for (size_t i = 0; i < storage_->count(); ++i) {
      const ObjectShards::Shard& object = storage_->shard(static_cast<uint32_t>(i));
      wanted.emplace(ObjectId(object.url.bucket, object.url.key), true);
    }
  }
  for (const os::S3Url& prefix : prefixes_) {
    listings_++;
    const Status listed =
        store_->List(access, prefix.bucket, prefix.key, [&](const os::ObjectInfo& info) -> Status {
          if (StopRequestedNow(stop)) return stop->Why();
          const bool kept =
              folder_
                  ? ClassifyFolderKey(std::string_view(info.key).substr(prefix.key.size())).image
                  : wanted.contains(ObjectId(prefix.bucket, info.key));
          if (kept) FoldListed(digest, info);
          return Status::Ok();
        });
    if (!listed.ok()) return Naming(PrefixUrl(prefix), listed);
  }
  return digest.Finish() == digest_;
}

Status ObjectFolderSource::VerifyObjects(const os::Access& access, bool* changed,
                                         ListingStop* stop) const {
  *changed = false;
  if (manifest_url_) {
    // The manifest itself: this job's own HEAD, the listed version.
    manifest_heads_++;
    auto info = store_->Head(access, manifest_url_->bucket, manifest_url_->key);
    if (!info.ok() && info.status().code() != StatusCode::kNotFound) {
      return Naming(manifest_url_->ToString(), info.status());
    }
    if (!info.ok() || info->etag != manifest_etag_) {
      *changed = true;
      stale_ = true;
      return Status::Ok();
    }
  }
  // This job's own LIST: it may list the prefixes, and sees the keys, sizes
  // and ETags the listing holds.
  GALLEY_ASSIGN_OR_RETURN(const bool same, ListsTheSame(access, stop));
  if (!same) {
    *changed = true;
    stale_ = true;
    return Status::Ok();
  }
  const std::string& key_id = access.credentials.access_key_id;
  {
    MutexLock lock(&mu_);
    if (admitted_.contains(key_id)) {
      // The same access key as one admitted: the same permissions.
      storage_->Admit(access);
      return Status::Ok();
    }
  }
  // Other credentials: every object HEADed with them, each the listed
  // version, before anything fetched for another job is served.
  GALLEY_RETURN_IF_ERROR(storage_->VerifyObjects(access, changed, stop));
  if (*changed) {
    stale_ = true;
    return Status::Ok();
  }
  MutexLock lock(&mu_);
  admitted_.insert(key_id);
  return Status::Ok();
}

std::optional<FileIdentity> LocalFileIdentity(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  return FileIdentity{static_cast<uint64_t>(info.st_size),
                      static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec,
                      static_cast<uint64_t>(info.st_ino), static_cast<uint64_t>(info.st_dev)};
}

Status ObjectFolderSource::Verify(AccessChecker* /*checker*/, std::span<const ItemId> /*served*/,
                                  bool* changed) const {
  if (manifest_file_ && LocalFileIdentity(manifest_name_) != manifest_file_) stale_ = true;
  *changed = stale();
  return Status::Ok();
}

std::optional<ObjectFolderCounts> ObjectFolderSource::object_folder_counts() const {
  ObjectFolderCounts counts;
  counts.manifest = !folder_;
  counts.prefixes = prefixes_.size();
  counts.reads = storage_->object_reads();
  counts.listings = listings_.load();
  counts.manifest_heads = manifest_heads_.load();
  return counts;
}

std::string ObjectFolderSource::Locate(ItemId id) const {
  return storage_->shard(id).url.ToString();
}

std::string ObjectFolderSource::Name(ItemId id) const {
  return name_pool_.substr(name_offsets_[id], name_offsets_[id + 1] - name_offsets_[id]);
}

Result<std::vector<uint8_t>> ObjectFolderSource::Read(ItemId id) const {
  const ObjectShards::Shard& object = storage_->shard(id);
  if (object.size > kMaxObjectBytes) {
    return Status::ResourceExhausted(object.url.ToString() + " is larger than " +
                                     std::to_string(kMaxObjectBytes) + " bytes");
  }
  std::vector<uint8_t> bytes(object.size);
  GALLEY_RETURN_IF_ERROR(storage_->ReadInto(id, 0, bytes));
  return bytes;
}

const std::vector<std::string>& ObjectFolderSource::field_names() const {
  return table_ != nullptr ? table_->field_names() : DatasetSource::field_names();
}

const std::string& ObjectFolderSource::image_column() const {
  return table_ != nullptr ? table_->image_column() : DatasetSource::image_column();
}

const std::vector<std::string>& ObjectFolderSource::field_collations() const {
  return table_ != nullptr ? table_->field_collations() : DatasetSource::field_collations();
}

Result<std::vector<uint8_t>> ObjectFolderSource::ReadFields(ItemId id) const {
  if (table_ == nullptr) return std::vector<uint8_t>();
  return table_->ReadFields(id);
}

uint64_t ObjectFolderSource::held_bytes() const {
  return held_bytes_ + (table_ != nullptr ? table_->held_bytes() : 0);
}

std::vector<ShardExtent> ObjectFolderSource::ReadExtents(std::span<const ItemId> ids) const {
  std::vector<ShardExtent> extents;
  extents.reserve(ids.size());
  for (ItemId id : ids) {
    if (id < size()) extents.push_back({id, 0, storage_->shard(id).size});
  }
  return extents;
}

void ObjectFolderSource::Prefetch(std::span<const ItemId> ids) const {
  storage_->Prefetch(ReadExtents(ids));
}

void ObjectFolderSource::PrefetchNextWave(std::span<const ItemId> ids) const {
  storage_->PrefetchNextWave(ReadExtents(ids));
}

bool Dataset::IsObjectGlob(const std::string& url) {
  return IsObjectUrl(url) && url.find_first_of("*?[") != std::string::npos;
}

Result<std::vector<std::string>> Dataset::ExpandObjectGlob(const std::string& pattern,
                                                           os::ObjectStore& store,
                                                           const os::Access& access,
                                                           ListingStop* stop) {
  const size_t magic = pattern.find_first_of("*?[");
  const size_t bucket_end = pattern.find('/', 5);
  if (magic == std::string::npos || bucket_end == std::string::npos || magic < bucket_end) {
    return Status::InvalidArgument("'" + pattern +
                                   "': a glob over s3:// names its bucket literally "
                                   "(s3://bucket/train-*.tar)");
  }
  if (pattern.back() == '/') {
    return Status::InvalidArgument("'" + pattern +
                                   "': a glob over s3:// matches objects (tar shards); name "
                                   "one prefix (s3://bucket/prefix/) for a folder of images");
  }
  GALLEY_ASSIGN_OR_RETURN(const os::S3Url literal, os::S3Url::Parse(pattern.substr(0, magic)));
  const std::string key_pattern = pattern.substr(bucket_end + 1);
  std::vector<std::string> matched;
  const Status listed =
      store.List(access, literal.bucket, literal.key, [&](const os::ObjectInfo& info) -> Status {
        if (StopRequestedNow(stop)) return stop->Why();
        // FNM_PATHNAME: a wildcard does not cross '/'; FNM_PERIOD: nor does
        // it match a leading '.', as Python's glob hides dot files.
        if (::fnmatch(key_pattern.c_str(), info.key.c_str(), FNM_PATHNAME | FNM_PERIOD) == 0) {
          matched.push_back("s3://" + literal.bucket + "/" + info.key);
        }
        return Status::Ok();
      });
  if (!listed.ok()) return Naming(literal.ToString(), listed);
  if (matched.empty()) return Status::NotFound("no object matches '" + pattern + "'");
  std::sort(matched.begin(), matched.end());
  return matched;
}

}  // namespace galley
