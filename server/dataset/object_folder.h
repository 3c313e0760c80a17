// ObjectFolderSource: the items of images kept one per object in
// S3-compatible storage (docs/datasets.md, "Datasets in object storage"):
// a prefix read as an ImageFolder, or a manifest object (or text) whose
// image cells name objects. Internal to galley_dataset; Dataset opens it.
//
// A prefix (s3://bucket/prefix/) is listed by ListObjectsV2 (every page)
// with the job's credentials and read as torchvision reads a folder: the
// first path segment under the prefix is the class, classes sorted, keys
// kept by the ImageFolder's extensions, then each class's "directories" in
// path order and each one's keys by name; a key directly under the prefix is
// in no class and left out, as a file beside the class folders is. A
// manifest is listed as a local one (file_source.h), each image cell an
// s3://bucket/key URL or a key relative to the manifest's own "folder"; the
// objects it names are found by listing the prefixes that hold them (one
// LIST per folder, not a HEAD per object).
//
// Every object is kept with the size and ETag the listing gave and read
// whole by one GET naming that ETag (If-Match): another version is
// DataLoss and marks the source stale, so the next job lists it again.
// Prefetch keeps the GETs of a wave's items in flight
// (ShardOptions::object_requests_in_flight, object_prefetch_bytes), and
// PrefetchNextWave the next wave's behind them, within half those bounds.
//
// Sharing with another job (VerifyObjects, docs/access.md): the job's own
// LIST of every listed prefix must give the same keys with the same sizes
// and ETags (a manifest object: its own HEAD, the same ETag); then a job
// signing with an access key id already admitted shares at once, and any
// other HEADs every object first.
//
// Thread-safety: every method may be called from any thread; the admitted
// key ids are guarded by an internal mutex.
#ifndef GALLEY_SERVER_DATASET_OBJECT_FOLDER_H_
#define GALLEY_SERVER_DATASET_OBJECT_FOLDER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "galley/dataset/dataset_source.h"
#include "galley/dataset/file_source.h"
#include "galley/dataset/shard_source.h"
#include "galley/mutex.h"
#include "galley/objectstore/object_store.h"
#include "object_shards.h"

namespace galley {

// What a local file is now (size, mtime, inode, device); none when it
// cannot be stat'ed.
std::optional<FileIdentity> LocalFileIdentity(const std::string& path);

class ObjectFolderSource final : public DatasetSource {
 public:
  // Largest object Read() returns; larger ones are ResourceExhausted.
  static constexpr uint64_t kMaxObjectBytes = uint64_t{256} << 20;
  // Largest manifest object read.
  static constexpr uint64_t kMaxManifestBytes = uint64_t{1} << 30;

  // Lists `url` with `access`: a key that is empty or ends in '/' is a
  // prefix; another is HEADed, and is a manifest if it exists, else the
  // prefix `key/`. `options` gives the bounds of the prefetch (and the
  // HEADs in flight, object_requests_in_flight), `manifest` how a manifest
  // is read. Errors: the store's (NotFound, PermissionDenied, ...) naming
  // the object or prefix; NotFound for a prefix holding no object;
  // InvalidArgument as a local ImageFolder or manifest refuses.
  static Result<std::unique_ptr<ObjectFolderSource>> Open(
      const std::string& url, const std::shared_ptr<objectstore::ObjectStore>& store,
      const objectstore::Access& access, const ShardOptions& options,
      const ManifestOptions& manifest);
  // Lists manifest `text`, named `name` (a local file's path), whose image
  // cells are s3:// URLs or keys relative to `base` (an s3:// prefix; ""
  // when only full URLs are allowed).
  // With `file`, the manifest is that local file as it was read, and
  // Verify tells when it changed.
  static Result<std::unique_ptr<ObjectFolderSource>> OpenManifest(
      const std::string& name, const std::string& text, const std::string& base,
      const std::shared_ptr<objectstore::ObjectStore>& store, const objectstore::Access& access,
      const ShardOptions& options, const ManifestOptions& manifest,
      std::optional<FileIdentity> file = std::nullopt);

  size_t size() const override { return labels_.size(); }
  int64_t label(ItemId id) const override { return labels_[id]; }
  const std::vector<std::string>& classes() const override { return classes_; }
  // The object's s3:// URL.
  std::string Locate(ItemId id) const override;
  // Its key relative to the prefix (cls/name.jpg), or the manifest's cell.
  std::string Name(ItemId id) const override;
  Result<std::vector<uint8_t>> Read(ItemId id) const override;
  const std::vector<std::string>& field_names() const override;
  const std::string& image_column() const override;
  const std::vector<std::string>& field_collations() const override;
  Result<std::vector<uint8_t>> ReadFields(ItemId id) const override;
  uint64_t total_bytes() const override { return total_bytes_; }
  uint64_t held_bytes() const override;
  // The endpoint, each object's bucket, key, size and ETag, and the labels.
  const ContentFingerprint& content_fingerprint() const override { return content_fingerprint_; }
  // Names relative to the prefix, sizes and labels; the ETags apart.
  const ResumeKey& resume_key() const override { return resume_key_; }
  bool stale() const override { return stale_.load() || storage_->changed(); }
  // A local user's permissions do not apply: `*changed` is stale(), or a
  // local manifest's file changed.
  Status Verify(AccessChecker* checker, std::span<const ItemId> served,
                bool* changed) const override;
  Status VerifyObjects(const objectstore::Access& access, bool* changed,
                       ListingStop* stop) const override;
  void Prefetch(std::span<const ItemId> ids) const override;
  void PrefetchNextWave(std::span<const ItemId> ids) const override;
  const objectstore::ObjectStoreCounters* object_counters() const override {
    return &store_->counters();
  }
  // Prefix or manifest, the prefixes listed, the reads (storage_'s), the
  // listings and manifest HEADs this source sent.
  std::optional<ObjectFolderCounts> object_folder_counts() const override;

  // The prefixes a LIST proves: the folder's, or the folders holding a
  // manifest's objects.
  const std::vector<objectstore::S3Url>& listed_prefixes() const { return prefixes_; }
  // For tests: the most prefetch GETs in flight at once.
  uint64_t max_prefetches_in_flight() const { return storage_->max_prefetches_in_flight(); }

 private:
  // The one range of each of `ids`' objects a read asks for.
  std::vector<ShardExtent> ReadExtents(std::span<const ItemId> ids) const;

  struct Listed {
    std::string relative;  // what Name() gives
    objectstore::S3Url url;
    uint64_t size = 0;
    std::string etag;
    int64_t label = -1;
  };

  ObjectFolderSource(std::shared_ptr<objectstore::ObjectStore> store,
                     const objectstore::Access& access)
      : store_(std::move(store)), endpoint_(ObjectEndpointName(access.endpoint)) {}

  // Lists prefix `prefix` as an ImageFolder into `items`.
  Status ListFolder(const objectstore::Access& access, const objectstore::S3Url& prefix,
                    ListingStop* stop, std::vector<Listed>* items);
  // Sizes and ETags of the objects `items` name, by listing the prefixes
  // that hold them.
  Status FindObjects(const objectstore::Access& access, ListingStop* stop,
                     std::vector<Listed>* items);
  // The listing kept: storage, names, fingerprints.
  void Keep(std::vector<Listed> items, const objectstore::Access& access,
            const ShardOptions& options);
  // What the prefixes list now, with `access`, folded as the listing was:
  // whether it matches.
  Result<bool> ListsTheSame(const objectstore::Access& access, ListingStop* stop) const;

  const std::shared_ptr<objectstore::ObjectStore> store_;
  const std::string endpoint_;
  // The prefixes listed: one for a folder; the folders holding a
  // manifest's objects.
  std::vector<objectstore::S3Url> prefixes_;
  bool folder_ = false;
  // A manifest kept as an object: its URL and ETag.
  std::optional<objectstore::S3Url> manifest_url_;
  std::string manifest_etag_;
  // A manifest's name for messages (its URL or path).
  std::string manifest_name_;
  // A local manifest: what its file was when listed (size, mtime, inode),
  // compared by Verify.
  std::optional<FileIdentity> manifest_file_;
  // A manifest's names, labels and fields.
  std::unique_ptr<FileSource> table_;
  // What the listing's objects fold to (keys, sizes, ETags, in the order
  // the prefixes list them): a new LIST is compared with it.
  ContentFingerprint digest_;

  std::vector<std::string> classes_;
  std::vector<int64_t> labels_;
  std::string name_pool_;
  std::vector<uint64_t> name_offsets_{0};
  std::unique_ptr<ObjectShards> storage_;
  uint64_t total_bytes_ = 0;
  uint64_t held_bytes_ = 0;  // the listing's, but for table_
  ContentFingerprint content_fingerprint_;
  ResumeKey resume_key_;
  mutable std::atomic<bool> stale_{false};
  // Prefix listings sent (each every page): the open's, VerifyObjects'.
  mutable std::atomic<uint64_t> listings_{0};
  // HEADs of the manifest object: the open's, VerifyObjects'.
  mutable std::atomic<uint64_t> manifest_heads_{0};

  mutable Mutex mu_;
  // Access key ids whose requests were admitted to the listing: its own
  // listing's, and those that HEADed every object. Never shown.
  mutable std::set<std::string> admitted_ GUARDED_BY(mu_);
};

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_OBJECT_FOLDER_H_
