// Dataset: the list of samples galleyd serves from one source, with a stable
// integer item id per sample.
//
// The items come from a DatasetSource: an ImageFolder directory or a
// manifest file (FileSource), or a list of tar shards (ShardSource). The
// sampler, the scheduler and the cache tiers see only ids, labels and bytes.
// Item ids are 32-bit: a dataset holds at most 2^32-1 items.
//
// Thread-safety: immutable after Open; every method may be called from any
// thread. Share it as std::shared_ptr<const Dataset>.
#ifndef GALLEY_SERVER_DATASET_DATASET_H_
#define GALLEY_SERVER_DATASET_DATASET_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "galley/dataset/dataset_source.h"
#include "galley/dataset/file_source.h"
#include "galley/dataset/shard_source.h"
#include "galley/status.h"

namespace galley {

// Which items of a dataset a job uses. Empty (all three lists empty) means
// every item; otherwise the union of the named classes, the [begin, end)
// ranges and the single ids. For a dataset without class names (integer
// labels) a class is named by its label value, e.g. "7".
struct SubsetSpec {
  std::vector<std::string> classes;
  std::vector<std::pair<ItemId, ItemId>> ranges;
  std::vector<ItemId> ids;
};

class Dataset {
 public:
  // Largest file Read() returns; larger ones are ResourceExhausted.
  static constexpr uint64_t kMaxFileBytes = uint64_t{256} << 20;

  // Opens `root`: a directory is read as an ImageFolder, a regular file as a
  // manifest. `allowed_roots` are the directories the daemon may serve; the
  // dataset must lie under one of them (an empty list allows any).
  // Errors: NotFound (root or a listed file missing), PermissionDenied
  // (outside the allowed roots, or a `..`/symlink leaving the root),
  // InvalidArgument (no items, an empty class folder, a malformed manifest,
  // a symlink cycle).
  // `manifest` says how a manifest file is read (file_source.h).
  static Result<std::shared_ptr<const Dataset>> Open(
      const std::filesystem::path& root, const std::vector<std::filesystem::path>& allowed_roots,
      const ManifestOptions& manifest = {});

  // Opens a list of tar shards (ShardSource), each resolved to its canonical
  // path, which must lie under `allowed_roots`. Refuses URLs and compressed
  // tars with a message saying what to do. Errors as Open, plus those of
  // ShardSource::Open.
  static Result<std::shared_ptr<const Dataset>> OpenShards(
      const std::vector<std::string>& shards, const ShardOptions& options,
      const std::vector<std::filesystem::path>& allowed_roots);

  // Opens a list of tar shards kept as objects (s3://bucket/key URLs) in
  // the store `access.endpoint` names (ShardSource::OpenObjects), listed
  // and read with `access`. Refuses compressed tars by name. Errors as
  // ShardSource::OpenObjects.
  static Result<std::shared_ptr<const Dataset>> OpenObjectShards(
      const std::vector<std::string>& urls, std::shared_ptr<objectstore::ObjectStore> store,
      const objectstore::Access& access, const ShardOptions& options);
  // Opens images kept one per object (ObjectFolderSource, internal): `url`
  // an s3:// prefix read as an ImageFolder, or a manifest object; listed and
  // read with `access`. Errors: the store's, naming the object or prefix;
  // those of an ImageFolder or manifest.
  static Result<std::shared_ptr<const Dataset>> OpenObjectFolder(
      const std::string& url, const std::shared_ptr<objectstore::ObjectStore>& store,
      const objectstore::Access& access, const ShardOptions& options,
      const ManifestOptions& manifest);
  // Opens a local manifest (`path`, canonical, under `allowed_roots`) whose
  // image cells are s3:// URLs, the objects read with `access`.
  static Result<std::shared_ptr<const Dataset>> OpenObjectManifest(
      const std::filesystem::path& path, const std::vector<std::filesystem::path>& allowed_roots,
      const std::shared_ptr<objectstore::ObjectStore>& store, const objectstore::Access& access,
      const ShardOptions& options, const ManifestOptions& manifest);
  // Whether an s3:// URL holds a glob's magic (*, ? or [).
  static bool IsObjectGlob(const std::string& url);
  // The keys an s3:// glob matches, as Python's glob matches a path (a `*`
  // or `?` does not cross '/', nor match a leading '.' of a segment; `[...]`
  // classes), found by listing the glob's longest literal prefix with
  // `access`; sorted. NotFound "no object matches 's3://...'" for none; the
  // store's errors naming the prefix; Cancelled once `stop` (may be null)
  // asks, before the next page is asked for.
  static Result<std::vector<std::string>> ExpandObjectGlob(const std::string& pattern,
                                                           objectstore::ObjectStore& store,
                                                           const objectstore::Access& access,
                                                           ListingStop* stop = nullptr);
  // Whether `shard` names an object (s3://...) rather than a file.
  static bool IsObjectUrl(const std::string& shard);

  // The key under which jobs share a shard dataset: the canonical shard
  // paths and the keys, so a glob and a list naming the same files agree;
  // for objects (`endpoint` their store's canonical URL, else ""), the
  // endpoint and the URLs.
  static std::string ShardSetKey(const std::vector<std::string>& shards,
                                 const ShardOptions& options, const std::string& endpoint = "");

  // The canonical root: the ImageFolder directory, the manifest file, or the
  // first shard.
  const std::filesystem::path& root() const { return root_; }
  size_t size() const { return source_->size(); }
  // Class names, sorted; a label is an index into them. Empty for a manifest
  // whose labels are all integers, and for shards.
  const std::vector<std::string>& classes() const { return source_->classes(); }
  // Label of an item; -1 for an id out of range.
  int64_t label(ItemId id) const { return id < size() ? source_->label(id) : -1; }
  // Where an item lives (a file, or shard:key.ext); empty for an id out of
  // range. For messages only.
  std::filesystem::path path(ItemId id) const;
  // The item's name in the listing: its path relative to the root for an
  // ImageFolder or manifest, shard:member for shards; empty for an id out
  // of range.
  std::string name(ItemId id) const { return id < size() ? source_->Name(id) : std::string(); }
  // Sum of the items' sizes at open time, for the cache planner.
  uint64_t total_bytes() const { return source_->total_bytes(); }
  // The memory the listing keeps (DatasetSource::held_bytes).
  uint64_t held_bytes() const { return source_->held_bytes(); }
  // What the listing says the items hold, the same on every node that sees
  // the same files (content_fingerprint.h): the remote tier's key.
  const ContentFingerprint& content_fingerprint() const { return source_->content_fingerprint(); }
  // What a saved loader state names the dataset by: the same for a copy
  // under another path (content_fingerprint.h).
  const ResumeKey& resume_key() const { return source_->resume_key(); }
  // Whether the storage changed since the listing (a shard was replaced).
  bool stale() const { return source_->stale(); }
  // See DatasetSource::VerifyObjects: whether `access` may read every
  // object of the listing, each the listed version.
  Status VerifyObjects(const objectstore::Access& access, bool* changed,
                       ListingStop* stop = nullptr) const {
    return source_->VerifyObjects(access, changed, stop);
  }
  // See DatasetSource::Prefetch.
  void Prefetch(std::span<const ItemId> ids) const { source_->Prefetch(ids); }
  // See DatasetSource::PrefetchNextWave.
  void PrefetchNextWave(std::span<const ItemId> ids) const { source_->PrefetchNextWave(ids); }
  // Whether the items are objects in S3-compatible storage, whose reads
  // are worth prefetching.
  bool reads_objects() const { return object_counters() != nullptr; }
  // The store's counts for a dataset of objects, else null.
  const objectstore::ObjectStoreCounters* object_counters() const {
    return source_->object_counters();
  }
  // A prefix folder's or a manifest of objects' own counts; none for others.
  std::optional<ObjectFolderCounts> object_folder_counts() const {
    return source_->object_folder_counts();
  }
  // See DatasetSource::Verify: whether the storage still matches the
  // listing, and whether `checker`'s user may read the `served` items.
  Status Verify(AccessChecker* checker, std::span<const ItemId> served, bool* changed) const {
    return source_->Verify(checker, served, changed);
  }
  // Closes the descriptors the source keeps open between reads (its last
  // job ended); later reads open them again.
  void ReleaseDescriptors() const { source_->ReleaseDescriptors(); }
  // The shard source, or null for files.
  const ShardSource* shard_source() const { return shards_; }

  // The item's bytes. InvalidArgument for an id out of range; otherwise the
  // source's errors (NotFound, PermissionDenied, DataLoss,
  // ResourceExhausted).
  Result<std::vector<uint8_t>> Read(ItemId id) const;
  // At most the first `max_bytes` of the item, and its whole size in
  // `*item_bytes` (DatasetSource::ReadHead); errors as Read.
  Result<std::vector<uint8_t>> ReadHead(ItemId id, uint64_t max_bytes, uint64_t* item_bytes) const;
  // The fields each item carries (DatasetSource::field_names); empty for
  // a dataset listed without them.
  const std::vector<std::string>& field_names() const { return source_->field_names(); }
  // A header-row manifest's image column (DatasetSource::image_column).
  const std::string& image_column() const { return source_->image_column(); }
  // What a batch of each field collates to (DatasetSource::field_collations).
  const std::vector<std::string>& field_collations() const { return source_->field_collations(); }
  bool has_fields() const { return !field_names().empty(); }
  // The item's field record; errors as Read, plus InvalidArgument for a
  // member that is not what its name says ("shard: sample KEY: .json is not
  // valid JSON").
  Result<std::vector<uint8_t>> ReadFields(ItemId id) const;
  // The item's bytes, and its field record into `*record`, in as few reads
  // as the source can.
  Result<std::vector<uint8_t>> ReadWithFields(ItemId id, std::vector<uint8_t>* record) const;

  // The sorted, de-duplicated ids a subset names. InvalidArgument for an
  // unknown class, an id or range outside the dataset, or a reversed range.
  Result<std::vector<ItemId>> Select(const SubsetSpec& subset) const;

 private:
  Dataset() = default;

  std::filesystem::path root_;
  std::unique_ptr<const DatasetSource> source_;
  const ShardSource* shards_ = nullptr;  // source_, when it is a ShardSource
};

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_DATASET_H_
