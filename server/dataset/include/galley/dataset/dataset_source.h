// DatasetSource: where a dataset's items come from. One implementation per
// storage format (FileSource: ImageFolder trees and manifests; ShardSource:
// tar shards), so the sampler and the cache tiers see only item ids, labels
// and bytes, never the format.
//
// An implementation lists its items once, when it is built, in a stable
// order (the item id is the rank), and reads one item's bytes on demand.
//
// Thread-safety: implementations are immutable after construction apart from
// internal, locked caches; every method may be called from any thread.
#ifndef GALLEY_SERVER_DATASET_DATASET_SOURCE_H_
#define GALLEY_SERVER_DATASET_DATASET_SOURCE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "galley/dataset/access.h"
#include "galley/dataset/content_fingerprint.h"
#include "galley/dataset/listing_stop.h"
#include "galley/ids.h"
#include "galley/objectstore/object_store.h"
#include "galley/status.h"

namespace galley {

// How a set of objects (tar shards, or one image per object) served its
// reads, counted by the set itself: what it asked its store for, not what
// the store did to answer (its retries and LIST pages are the store's
// counts, ObjectStoreCounters, node-wide).
struct ObjectReadCounts {
  uint64_t prefetched = 0;          // reads served from a GET Prefetch started
  uint64_t on_demand = 0;           // reads that each made a GET of their own
  uint64_t gets = 0;                // GETs the set started (prefetches and reads on demand)
  uint64_t bytes = 0;               // body bytes those GETs received
  uint64_t verify_heads = 0;        // HEADs VerifyObjects sent to admit other credentials
  uint64_t listing_reads = 0;       // reads served by the bytes the listing streamed and kept
  uint64_t listing_kept_bytes = 0;  // those bytes kept now
};

// A dataset of one image per object (an s3:// prefix read as an
// ImageFolder, or a manifest whose cells name objects): what it is and
// what it asked the store for.
struct ObjectFolderCounts {
  bool manifest = false;  // a manifest of objects; else a prefix folder
  uint64_t prefixes = 0;  // the prefixes its listings cover
  ObjectReadCounts reads;
  // Listings of a prefix it asked for (each every page of the prefix): at
  // its open, and each job's own at VerifyObjects.
  uint64_t listings = 0;
  // HEADs of a manifest object: at its open, and at each VerifyObjects.
  uint64_t manifest_heads = 0;
};

class DatasetSource {
 public:
  virtual ~DatasetSource() = default;

  virtual size_t size() const = 0;
  // Label of item `id` < size().
  virtual int64_t label(ItemId id) const = 0;
  // Class names, sorted; a label indexes them. Empty when labels are plain
  // integers.
  virtual const std::vector<std::string>& classes() const = 0;
  // Where item `id` < size() lives, for messages: a path, or shard:member.
  virtual std::string Locate(ItemId id) const = 0;
  // Item `id` < size() as the listing names it: where it lives, unless the
  // source names items relative to its root (FileSource).
  virtual std::string Name(ItemId id) const { return Locate(id); }
  // The item's bytes; `id` < size().
  virtual Result<std::vector<uint8_t>> Read(ItemId id) const = 0;
  // At most the first `max_bytes` of item `id` < size(), and its whole
  // size in `*item_bytes`: for a reader that wants only the file's header
  // (the cache planner's sample), not a large item's every byte. By
  // default the item is read whole and cut.
  virtual Result<std::vector<uint8_t>> ReadHead(ItemId id, uint64_t max_bytes,
                                                uint64_t* item_bytes) const {
    GALLEY_ASSIGN_OR_RETURN(auto bytes, Read(id));
    *item_bytes = bytes.size();
    if (bytes.size() > max_bytes) bytes.resize(max_bytes);
    return bytes;
  }
  // The fields each item carries besides its image (JobSpec::fields), in
  // order; empty for a source listed without fields.
  virtual const std::vector<std::string>& field_names() const {
    static const std::vector<std::string> none;
    return none;
  }
  // The manifest column that names the images, as its header row spells
  // it; "" for a source without a header row (a folder, shards, a
  // headerless manifest).
  virtual const std::string& image_column() const {
    static const std::string none;
    return none;
  }
  // Per field, what a batch of its values collates to in the job, decided
  // over the whole dataset: "int", "float", "bool", or "" (the job decides
  // by the values, a shard member by its extension). Empty when every one
  // is "".
  virtual const std::vector<std::string>& field_collations() const {
    static const std::vector<std::string> none;
    return none;
  }
  // The item's field record (wire/field_record.h), its values checked
  // (sample_fields.h); `id` < size(). Empty without fields.
  virtual Result<std::vector<uint8_t>> ReadFields(ItemId /*id*/) const {
    return std::vector<uint8_t>();
  }
  // Read and ReadFields together, for a source that can do both in one
  // read of the storage (a shard's members usually lie side by side).
  virtual Result<std::vector<uint8_t>> ReadWithFields(ItemId id,
                                                      std::vector<uint8_t>* record) const {
    GALLEY_ASSIGN_OR_RETURN(*record, ReadFields(id));
    return Read(id);
  }
  // Sum of the items' encoded sizes, for the cache planner.
  virtual uint64_t total_bytes() const = 0;
  // The memory the listing keeps (its items' names, labels, records and
  // offsets), from its containers' capacities.
  virtual uint64_t held_bytes() const = 0;
  // What the listing says the items hold (content_fingerprint.h), computed
  // when the source is built.
  virtual const ContentFingerprint& content_fingerprint() const = 0;
  // The listing as a copy of the dataset keeps it, and its modification
  // times apart (content_fingerprint.h), computed when the source is built.
  virtual const ResumeKey& resume_key() const = 0;
  // Whether the storage changed under the listing (a replaced or truncated
  // shard), so the dataset should be listed again at the next open.
  virtual bool stale() const { return false; }
  // Closes whatever descriptors the source keeps open between reads (its
  // jobs ended); later reads open them again. Nothing for sources that
  // keep none.
  virtual void ReleaseDescriptors() const {}
  // One pass over the storage as it is now. `*changed` tells whether it
  // still matches the listing: false unless an item or a listed directory
  // was added, removed, replaced or rewritten (device, inode, size, mtime or
  // ctime differ). With a `checker`, the items `served` (sorted ids) and the
  // directories leading to them are checked for its user: PermissionDenied
  // names the first it may not read. The pass always completes, so
  // `*changed` is set whatever is returned.
  virtual Status Verify(AccessChecker* checker, std::span<const ItemId> served,
                        bool* changed) const = 0;
  // For a source in object storage: whether `access` (a job's own
  // credentials) may read every object of the listing, each HEADed once,
  // and `*changed` when one is no longer the listed version. Only then may
  // the job be served what another job's credentials fetched. Nothing for
  // other sources. `stop` (may be null) ends the LISTs and HEADs early,
  // Cancelled, admitting nothing: the asking client has gone.
  virtual Status VerifyObjects(const objectstore::Access& /*access*/, bool* changed,
                               ListingStop* /*stop*/) const {
    *changed = false;
    return Status::Ok();
  }
  // The items of a wave that will be read from storage next: a source whose
  // reads wait on the network (objects) starts fetching them all now, and
  // Read then waits for its item's bytes; items not named here are read on
  // demand. Nothing for sources read from local storage.
  virtual void Prefetch(std::span<const ItemId> /*ids*/) const {}
  // The items the next wave will read from storage, while this one is
  // prepared: a source of objects fetches them with what its bounds leave
  // over once this wave's fetches are started, and the next wave's
  // Prefetch of the same items finds them fetched or in flight instead of
  // starting them. Items never prefetched by a wave are dropped as
  // Prefetch's are. Nothing for sources read from local storage.
  virtual void PrefetchNextWave(std::span<const ItemId> /*ids*/) const {}
  // The counts of the store a source of objects reads from; null for
  // others.
  virtual const objectstore::ObjectStoreCounters* object_counters() const { return nullptr; }
  // A dataset of one image per object: its own counts; none for others.
  virtual std::optional<ObjectFolderCounts> object_folder_counts() const { return std::nullopt; }
};

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_DATASET_SOURCE_H_
