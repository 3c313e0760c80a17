// ShardSource: the samples of a list of tar shards in the WebDataset layout,
// read by byte range: files (Open), or objects in S3-compatible storage
// (OpenObjects; docs/datasets.md, "Datasets in object storage").
//
// Each shard is listed once from its headers (ListTar), in parallel across
// shards; the listing is kept in an on-disk index cache keyed by the shard's
// (path, size, mtime, inode), so a restart or a second job does not rescan.
// Members are grouped into samples by WebDataset's rules: the key is the
// member path up to the first dot of its base name, the extension the rest,
// compared lower-case; names without a dot, dotfiles, and names with a `..`
// component or a leading '/' are skipped. A sample holding two members of
// one name is left out (ShardStats names it). Unlike WebDataset, members of a
// sample are grouped across the whole shard, not only when adjacent. Item
// ids: shards in the order given, then samples in the order of their first
// member. A shard not in the cache is listed with the reads planned from the
// DALI `.idx` file beside it, if any (PlannedTarReader: one read per indexed
// member instead of one per header, payload and extended header); the
// listing still comes from the headers, and an index that does not describe
// it exactly is counted as stale (the shard then counts as scanned).
//
// Items are read with pread through descriptors kept open in a
// ShardDescriptorCache (shard_descriptors.h): at most
// ShardOptions::max_open_shards for this set, and at most the cache's
// capacity for all the sets sharing it (least recently used closed first).
// ReleaseDescriptors, and destruction, close the set's. A shard that cannot
// be opened for want of a descriptor fails its reads with ResourceExhausted
// saying so (descriptor_exhaustion.h), after the cache has given back half
// of its descriptors and the open was tried once more. Before each read the
// shard's size, mtime and inode are compared with the listing: a replaced or
// truncated shard fails its reads with DataLoss and marks the source stale.
//
// Objects: each shard is HEADed (size, ETag) and listed by one streaming
// GET of the whole object (TarStreamLister), the label payloads taken from
// the stream as it passes; the listing is cached under (endpoint, URL, size,
// ETag). Members are then read by ranged GETs naming the listed ETag
// (If-Match): another version of the object fails its reads with DataLoss
// and marks the source stale, as a changed file does. Prefetch starts the
// GETs of a wave's items ahead of their reads, a bounded number in flight
// (ShardOptions::object_requests_in_flight, object_prefetch_bytes), members
// close together in one shard fetched by one GET; PrefetchNextWave the next
// wave's behind them, within half those bounds. Every request carries the
// Access of a job whose credentials HEADed every shard (VerifyObjects).
//
// Member names are never used as file-system paths.
//
// Thread-safety: every method may be called from any thread; the descriptor
// set is guarded by an internal mutex.
#ifndef GALLEY_SERVER_DATASET_SHARD_SOURCE_H_
#define GALLEY_SERVER_DATASET_SHARD_SOURCE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "galley/dataset/dataset_source.h"
#include "galley/dataset/listing_stop.h"
#include "galley/dataset/shard_descriptors.h"
#include "galley/objectstore/object_store.h"

namespace galley {

struct ShardListing;  // shard_storage.h
struct ShardOrigin;
struct ShardExtent;  // shard_storage.h

struct ShardOptions {
  // Extension of the image member; "" picks the first of jpg, jpeg, png,
  // webp present in each sample.
  std::string image_key;
  // "cls" (text integer in the .cls member), "json:FIELD" (integer FIELD of
  // the .json member) or "" (unlabelled: labels are -1; with `fields`, a
  // sample's .cls where it holds a label of 0 or more, else -1, leaving no
  // sample out).
  std::string label_key = "cls";
  // Members each item carries besides its image (JobSpec::fields): member
  // extensions, compared lower-case, or "__key__" / "__url__". A sample
  // lacking one is left out of the listing; ShardStats counts and names it.
  std::vector<std::string> fields;
  // Folder of the on-disk index cache (created 0700); "" disables it.
  std::filesystem::path index_cache_dir;
  // Cache files beyond this total are removed, oldest first.
  uint64_t index_cache_max_bytes = uint64_t{1} << 30;
  // Open shard descriptors this set keeps at most (readers in flight may
  // briefly hold a few more).
  size_t max_open_shards = 128;
  // Where the descriptors are kept, shared with other sets under one bound
  // (galleyd's max_open_shards_total). Null: a cache of the set's own, of
  // max_open_shards.
  std::shared_ptr<ShardDescriptorCache> descriptors;
  // Threads listing shards; 0 = the number of cores.
  unsigned index_threads = 0;
  // Asked before each shard is listed; null: the listing runs to its end.
  ListingStop* stop = nullptr;
  // Objects only (OpenObjects): the GETs of prefetched members a set keeps
  // in flight at most (1..4096), and the bytes those and the fetched ones
  // not yet read may hold (at least one request's worth is always allowed).
  uint32_t object_requests_in_flight = 64;
  uint64_t object_prefetch_bytes = uint64_t{256} << 20;
  // Objects only: the bytes of the shards a listing streams that the set
  // keeps, whole shards in listing order, so that their first reads fetch
  // nothing again (each shard's kept until every item read it once); 0
  // keeps none (galleyd's s3_listing_keep_bytes).
  uint64_t object_listing_keep_bytes = 0;
  // Objects only: how long a read the store refused because its
  // credentials expired (IsCredentialRefusal) waits for credentials no
  // refusal has struck yet, admitted by a job's open or refresh.
  std::chrono::milliseconds object_refresh_wait{60000};
};

// What indexing found, for galleyctl and error messages.
struct ShardStats {
  uint64_t shards = 0;
  uint64_t samples = 0;
  uint64_t skipped_members = 0;      // non-regular, unsafe names, no key
  uint64_t skipped_samples = 0;      // left out: no image, no usable label, a member missing
                                     // or twice
  std::string first_skipped_sample;  // "shard: key (why)", for messages
  // The first kMaxLeftOutNamed samples left out, "shard: key (why)", in
  // item order: what a job is told (JobOpened's left_out_samples).
  std::vector<std::string> left_out;
  // Samples left out for lacking a member, by the member's extension (the
  // image's, the label's or a field's): what the messages count.
  std::map<std::string, uint64_t> missing_members;
  // Samples left out for holding two members of one name, by extension.
  std::map<std::string, uint64_t> duplicated_members;
  // The extensions the samples hold, at most kMaxExtensionsNamed of them:
  // a message about a member no sample has lists them.
  std::set<std::string> member_extensions;
  uint64_t damaged_shards = 0;
  std::string first_damage;  // "shard: what", for messages
  uint64_t from_cache = 0;   // shards whose listing came from the index cache
  uint64_t stale_idx = 0;    // DALI .idx files that disagree with the shard
  uint64_t from_idx = 0;     // shards listed with reads planned from a good .idx
  double index_seconds = 0;
};

// How many left-out samples ShardStats names, and member extensions it keeps.
inline constexpr size_t kMaxLeftOutNamed = 1000;
inline constexpr size_t kMaxExtensionsNamed = 64;

// What `stats` left out, in words for a message: how many samples lack
// which member, a member no sample has (a misspelt field, with the members
// the samples do have) and the first sample left out. "" when none.
std::string DescribeLeftOut(const ShardStats& stats);

// What names the object store `endpoint` points at, the same however it
// was spelled (no trailing '/'; AWS's regional endpoint when its URL is
// empty): part of the index cache's key, the fingerprint and the key under
// which jobs share a set of objects.
std::string ObjectEndpointName(const objectstore::Endpoint& endpoint);

// Process-wide counts of shard listings, for tests and galleyctl.
struct ShardIndexCounters {
  std::atomic<uint64_t> scanned{0};         // shards listed header by header
  std::atomic<uint64_t> idx_hints_used{0};  // shards listed from a good .idx
  std::atomic<uint64_t> cache_hits{0};      // shards listed from the index cache
  std::atomic<uint64_t> stale_idx{0};       // .idx files found stale
};
ShardIndexCounters& GlobalShardIndexCounters();

class ShardSource final : public DatasetSource {
 public:
  // Largest member Read() returns; larger ones are ResourceExhausted.
  static constexpr uint64_t kMaxMemberBytes = uint64_t{256} << 20;

  // Lists `shards` (canonical paths of regular files). Errors:
  // InvalidArgument for a compressed or non-tar file, or bad options;
  // NotFound / PermissionDenied when a shard cannot be opened.
  static Result<std::unique_ptr<ShardSource>> Open(const std::vector<std::filesystem::path>& shards,
                                                   const ShardOptions& options);
  // Lists the objects `urls` (s3://bucket/key) of the store at
  // `access.endpoint` with `access`, which the source keeps for its reads
  // until VerifyObjects admits other credentials. Errors: InvalidArgument
  // for a malformed URL, a compressed or non-tar object, or bad options;
  // the store's errors (NotFound, PermissionDenied, Unavailable, ...)
  // naming the object.
  static Result<std::unique_ptr<ShardSource>> OpenObjects(
      const std::vector<std::string>& urls, std::shared_ptr<objectstore::ObjectStore> store,
      const objectstore::Access& access, const ShardOptions& options);
  ~ShardSource() override;

  size_t size() const override { return items_.size(); }
  int64_t label(ItemId id) const override { return items_[id].label; }
  const std::vector<std::string>& classes() const override { return no_classes_; }
  std::string Locate(ItemId id) const override;
  Result<std::vector<uint8_t>> Read(ItemId id) const override;
  const std::vector<std::string>& field_names() const override { return field_names_; }
  // Each member is read straight into its place in the record, which is
  // sized once: a member's bytes are in memory once.
  Result<std::vector<uint8_t>> ReadFields(ItemId id) const override;
  // One pread when the image and the field members are small and lie close
  // together (a shard written sample by sample has them so), then copied
  // out of it; otherwise the image and each member are read straight into
  // the buffer that keeps them (Read, ReadFields), so that a large member is
  // never in memory twice.
  Result<std::vector<uint8_t>> ReadWithFields(ItemId id,
                                              std::vector<uint8_t>* record) const override;
  // One pread of at most `max_bytes`, whatever the member's size.
  Result<std::vector<uint8_t>> ReadHead(ItemId id, uint64_t max_bytes,
                                        uint64_t* item_bytes) const override;
  uint64_t total_bytes() const override { return total_bytes_; }
  uint64_t held_bytes() const override;
  // Each shard's file name, size and mtime, and each item's byte range.
  const ContentFingerprint& content_fingerprint() const override { return content_fingerprint_; }
  // Each shard's file name and size and each item's shard, byte range, key
  // and label; the shards' modification times apart.
  const ResumeKey& resume_key() const override { return resume_key_; }
  bool stale() const override;
  // Closes the set's open descriptors; later reads open them again.
  void ReleaseDescriptors() const override;
  // Compares each shard's identity with the listing; checks the shards that
  // hold served items.
  Status Verify(AccessChecker* checker, std::span<const ItemId> served,
                bool* changed) const override;
  // Objects: HEADs every shard with `access`; PermissionDenied (or the
  // store's error) naming the first it may not read. `*changed` when one is
  // no longer the listed version (size or ETag). Once every HEAD agrees,
  // `access` is the one later reads carry (the latest admitted). Files:
  // nothing.
  Status VerifyObjects(const objectstore::Access& access, bool* changed,
                       ListingStop* stop) const override;
  // Objects: starts the GETs of `ids`' members (DatasetSource::Prefetch).
  void Prefetch(std::span<const ItemId> ids) const override;
  // Objects: the same for the next wave's (DatasetSource::PrefetchNextWave).
  void PrefetchNextWave(std::span<const ItemId> ids) const override;
  // The object store's counts, or null for files.
  const objectstore::ObjectStoreCounters* object_counters() const override;
  // Objects: how the reads were served; zeros for files.
  ObjectReadCounts object_reads() const;

  const ShardStats& stats() const { return stats_; }
  // Seconds since the listing was made (or loaded from the cache).
  double index_age_seconds() const;
  const std::vector<std::filesystem::path>& shards() const;

  // Where the shards are kept (shard_storage.h).
  class Storage;

 private:
  struct Item {
    uint32_t shard;
    uint64_t offset;
    uint64_t size;
    int64_t label;
  };
  struct Extent {
    uint64_t offset = 0;
    uint64_t size = 0;
  };

  ShardSource() = default;

  // Lists shards[i] with `list_shard(i, idx_stats)` (in parallel), groups
  // the samples and builds the source; `make_storage` makes its storage
  // from the shards as listed.
  static Result<std::unique_ptr<ShardSource>> Build(
      const std::vector<std::string>& shards, const ShardOptions& options,
      const std::function<Result<ShardListing>(size_t, ShardStats*)>& list_shard,
      const std::function<std::unique_ptr<Storage>(std::vector<ShardOrigin>)>& make_storage);
  // The one range ReadWithFields reads item `id`'s image and fields in,
  // when they lie close enough together; nullopt: read one by one.
  std::optional<Extent> JointExtent(ItemId id) const;
  // Exactly the ranges Read (without fields) or ReadWithFields will ask
  // for `ids`, for Prefetch and PrefetchNextWave.
  std::vector<ShardExtent> ReadExtents(std::span<const ItemId> ids) const;

  // Fills `out` with the bytes at `offset` of shard `shard`, checked to
  // come from the listed version of the shard. The caller bounds `out` by
  // kMaxMemberBytes before it makes it.
  Status ReadExtentInto(uint32_t shard, uint64_t offset, std::span<uint8_t> out) const;
  // The `extent` of shard `shard` in a buffer of its own.
  Result<std::vector<uint8_t>> ReadExtent(uint32_t shard, Extent extent,
                                          const std::string& what) const;
  // The record of item `id`, sized once: `fill(f, out)` writes the bytes of
  // field f into their place `out` in it (not called for "__key__" and
  // "__url__"); each value is then checked (sample_fields.h).
  Result<std::vector<uint8_t>> BuildRecord(
      ItemId id, const std::function<Status(size_t, std::span<uint8_t>)>& fill) const;
  std::string_view KeyOf(ItemId id) const;

  std::vector<Item> items_;
  // Sample keys (with the image extension), concatenated; item i is
  // [key_offsets_[i], key_offsets_[i+1]).
  std::string key_pool_;
  std::vector<uint64_t> key_offsets_{0};
  std::vector<std::string> field_names_;
  // Item i's field members: [i * fields, (i + 1) * fields); synthetic
  // fields have an empty extent.
  std::vector<Extent> field_extents_;
  std::vector<std::string> no_classes_;
  uint64_t total_bytes_ = 0;
  ContentFingerprint content_fingerprint_;
  ResumeKey resume_key_;
  ShardStats stats_;
  std::chrono::steady_clock::time_point listed_at_;
  std::vector<std::filesystem::path> paths_;  // each shard's path or URL
  std::unique_ptr<Storage> storage_;
};

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_SHARD_SOURCE_H_
