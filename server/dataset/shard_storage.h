// The parts of a ShardSource that depend on where its shards are kept:
// ShardSource::Storage reads their bytes (files by pread: LocalShards in
// shard_source.cc; objects by ranged GET: ObjectShards in object_shards.h),
// and what names each shard version (ShardOrigin) goes into the index cache
// and the fingerprints. Internal to galley_dataset.
//
// Thread-safety: a Storage allows every method from any thread. The index
// cache functions may be called from any thread.
#ifndef GALLEY_SERVER_DATASET_SHARD_STORAGE_H_
#define GALLEY_SERVER_DATASET_SHARD_STORAGE_H_

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "galley/dataset/access.h"
#include "galley/dataset/content_fingerprint.h"
#include "galley/dataset/shard_source.h"
#include "galley/dataset/tar_index.h"
#include "galley/status.h"

namespace galley {

// What identifies one version of a shard: a file's size, mtime, inode and
// device; an object's size (its ETag is in ShardOrigin::name's cache key).
struct FileIdentity {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t inode = 0;
  uint64_t device = 0;
  bool operator==(const FileIdentity&) const = default;
};

// One listed shard version.
struct ShardOrigin {
  std::string name;  // canonical path, or s3:// URL: what messages and __url__ show
  FileIdentity identity;
  struct stat info {};      // a file as listed: the change time and inode the fingerprint folds
  bool inode_kept = false;  // InodesAgreeAcrossMounts
  std::string etag;         // an object's, quotes removed
  // What the index cache is keyed by with `identity`: the path, or the
  // endpoint, URL and ETag.
  std::string cache_key;
  // An object's bytes as its listing streamed them, when the set keeps
  // them for its first reads (ShardOptions::object_listing_keep_bytes);
  // null otherwise.
  std::shared_ptr<const std::vector<uint8_t>> streamed;
};

// A shard's listing plus the payloads of its label members: what the index
// cache stores.
struct ShardListing {
  ShardOrigin origin;
  TarListing tar;
  std::vector<std::string> inline_payloads;  // one per member; empty if not kept
  bool from_cache = false;
};

// Whether a member's payload is kept in the listing (a .cls or .json label
// of at most 64 KiB), so that a cached listing needs no payload read.
bool KeepsInlinePayload(const TarMember& member);

// The index cache folder `dir`, made private to the daemon's user; false
// when it cannot be used (another owner, not a directory).
bool PrepareIndexCacheDir(const std::filesystem::path& dir);
// The listing of `origin` (its cache_key and identity) from the cache, into
// `listing`; false on a miss.
bool LoadCachedListing(const std::filesystem::path& dir, const ShardOrigin& origin,
                       ShardListing* listing);
// Stores `listing` (private, atomically), keeping the folder within
// `max_bytes`, oldest first. Failures only cost a listing later.
void StoreCachedListing(const std::filesystem::path& dir, const ShardListing& listing,
                        uint64_t max_bytes);

// A byte range of one shard that an item's read will ask for.
struct ShardExtent {
  uint32_t shard = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  // clang-tidy 14 mistakes the defaulted comparison for a literal 0.
  auto operator<=>(const ShardExtent&) const = default;  // NOLINT(modernize-use-nullptr)
};

class ShardSource::Storage {
 public:
  virtual ~Storage() = default;
  // Fills `out` with the bytes at `offset` of `shard`, checked to come from
  // the listed version: DataLoss when the shard changed (changed() is then
  // true).
  virtual Status ReadInto(uint32_t shard, uint64_t offset, std::span<uint8_t> out) = 0;
  // ReadInto from the storage itself, never from bytes kept in memory (a
  // listing's): what ReadHead measures the storage's read rate by.
  virtual Status ReadFromStorage(uint32_t shard, uint64_t offset, std::span<uint8_t> out) {
    return ReadInto(shard, offset, out);
  }
  virtual bool changed() const = 0;
  // Gives back what is kept between reads (descriptors).
  virtual void Release() {}
  // ShardSource::Verify for the shards; `holds_served[s]` when shard s
  // holds an item served to `checker`'s user.
  virtual Status Verify(AccessChecker* checker, const std::vector<bool>& holds_served,
                        bool* changed) = 0;
  // ShardSource::VerifyObjects.
  virtual Status VerifyObjects(const objectstore::Access& /*access*/, bool* changed,
                               ListingStop* /*stop*/) {
    *changed = false;
    return Status::Ok();
  }
  // The reads ahead that will ask for `extents`, started now (DatasetSource::
  // Prefetch); nothing where reads are cheap.
  virtual void Prefetch(std::span<const ShardExtent> /*extents*/) {}
  // The reads the next wave will ask for, fetched ahead behind the current
  // wave's (DatasetSource::PrefetchNextWave); nothing where reads are cheap.
  virtual void PrefetchNextWave(std::span<const ShardExtent> /*extents*/) {}
  // What names shard `shard` in the content fingerprint, and in the resume
  // key (`copy`: what a copy keeps; `versions`: the times or versions apart).
  virtual void AddFingerprint(uint32_t shard, ContentFingerprintBuilder& fingerprint) const = 0;
  virtual void AddResumeKey(uint32_t shard, ContentFingerprintBuilder& copy,
                            ContentFingerprintBuilder& versions) const = 0;
  // Where the shards are read from, and the store's counts, for galleyctl;
  // null for files.
  virtual const objectstore::ObjectStoreCounters* object_counters() const { return nullptr; }
  // Objects: the reads served by a prefetch, and those that made a GET of
  // their own.
  virtual ObjectReadCounts object_reads() const { return {}; }
};

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_SHARD_STORAGE_H_
