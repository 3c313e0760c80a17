// DiskTier: a byte-budgeted store of encoded entries on a node-local disk,
// below the memory tiers and kept across galleyd restarts (docs/cache.md,
// "The disk tier").
//
// An entry is what the encoded tier keeps of an item (a Blob's bytes, its
// dimensions and its field record), named by a DiskKey: the dataset's
// content fingerprint and the item, so that an entry found after a restart
// is used only for the very same dataset content. Each entry is one file,
// `DIR/entries-v1/XX/<fingerprint>-<item>`, XX one of 256 fan-out folders;
// the file holds a 64-byte header (magic, version, key, dimensions, lengths,
// XXH3-64 checksum of everything else) before the payload and the record
// (the layout is in disk_tier.cc). A file that is short, damaged, of another
// key or not galleyd's own is a miss: removed and counted as damaged.
//
// Writes are queued and made by one writer thread, so Put never waits on
// the disk; a queue over `write_queue_bytes` drops the write (counted). The
// writer makes each file under a temporary name (`<entry>.tmp-<pid>`) and
// renames it into place, so a reader (this process or a later one) sees a
// whole entry or none; the start-up scan removes other processes' leftovers.
// There is no fsync: a file torn by a power loss fails its checksum and is
// read again from storage, which costs one read, while an fsync per entry
// would cost every write a disk flush.
//
// The directory is the index: at open a thread lists the fan-out folders,
// sums the entries' bytes, orders them by modification time and trims the
// tier to its budget, while lookups already open the files by name. Names
// that are not entries (foreign files) are left alone and not counted.
// An entry is charged its file size rounded up to 4 KiB blocks; the
// in-memory index costs about 125 bytes per entry.
//
// Eviction: least recently used first (written or read), except that an
// entry whose item some job still needs this epoch (the DemandTracker's
// count for the item's key in this run's memory tiers) is passed over for
// one that no job needs; after a restart, until an entry is read, its order
// is its file's modification time.
//
// One galleyd per directory: Open takes an exclusive lock on DIR/lock.
//
// Beside the entries, `DIR/records-v1` holds small files galleyd keeps
// across restarts for itself (the cache planner's dataset samples,
// dataset_sample_store.h); the tier makes the folder and neither indexes,
// charges nor trims it.
//
// Thread-safety: every public method may be called from any thread. `mu_`
// guards the index, the queue and the counters; file reads run outside it.
#ifndef GALLEY_CACHE_DISK_TIER_H_
#define GALLEY_CACHE_DISK_TIER_H_

#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "galley/cache/blob.h"
#include "galley/cache/demand_tracker.h"
#include "galley/mutex.h"
#include "galley/status.h"
#include "galley/unique_fd.h"

namespace galley::cache {

// An item of one dataset's content: the content fingerprint's two halves
// (dataset/content_fingerprint.h) and the item's number.
struct DiskKey {
  uint64_t dataset_high = 0;
  uint64_t dataset_low = 0;
  uint32_t item = 0;
  bool operator==(const DiskKey&) const = default;
};

struct DiskTierOptions {
  // Absolute path of the tier's folder; created 0700 when missing. An
  // existing one must be a folder galleyd's user owns (not a symlink); a
  // mode that lets others in is narrowed to 0700.
  std::filesystem::path dir;
  // Bytes the entries may take on disk (each file rounded up to 4 KiB).
  uint64_t budget_bytes = uint64_t{16} << 30;
  // Bytes of writes waiting for the writer thread before Put drops one.
  uint64_t write_queue_bytes = uint64_t{64} << 20;
  // Largest payload plus record read back (a larger file is damaged): the
  // largest file a dataset may hold (Dataset::kMaxFileBytes).
  uint64_t max_entry_bytes = uint64_t{256} << 20;
};

struct DiskTierStats {
  uint64_t hits = 0;
  uint64_t misses = 0;        // damaged entries included
  uint64_t writes = 0;        // entries written
  uint64_t write_drops = 0;   // Puts dropped: the queue was full
  uint64_t write_errors = 0;  // writes the file system refused (full disk, I/O error)
  uint64_t damaged = 0;       // entries that failed their checks, removed
  uint64_t evictions = 0;
  uint64_t bytes = 0;  // charged bytes on disk now
  uint64_t entries = 0;
  uint64_t budget_bytes = 0;
  uint64_t write_queue_bytes = 0;  // waiting for the writer now
  uint64_t foreign_files = 0;      // names in the folders that are not entries
  bool indexed = false;            // the scan of what an earlier run left is done
  double index_seconds = 0;        // how long that scan took
};

class DiskTier {
 public:
  // Makes the entries' encoded form on the writer thread (a max_resolution
  // dataset's packed pixels); null: nothing is written.
  using Encoder = std::function<BlobPtr(const Blob&)>;

  // Opens (making it when missing) the tier in options.dir and starts its
  // writer and index threads. `demand` may be null; when set it must
  // outlive the tier. InvalidArgument for a relative path; PermissionDenied
  // for a folder owned by another user or a symlink; Unavailable when
  // another galleyd holds the folder; Internal when it cannot be made.
  static Result<std::unique_ptr<DiskTier>> Open(const DiskTierOptions& options,
                                                const DemandTracker* demand = nullptr);
  // Stops the threads; writes still queued are dropped.
  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  // The entry for `key`, checked, or null (a miss). `cache_key` is the
  // item's key in this run's memory tiers, which eviction asks the demand of.
  std::shared_ptr<Blob> Get(const DiskKey& key, Key cache_key) EXCLUDES(mu_);

  // Whether an entry file for `key` is there: a stat, no read and no count.
  // Get may still find it damaged (a miss). For a caller deciding whether
  // to start a slow read from storage before it asks Get.
  bool MayHold(const DiskKey& key) const;

  // Queues `blob` (or encode(*blob), made by the writer) as the entry for
  // `key`, unless there is one. False when the write was dropped: the queue
  // was full, or the entry is larger than the budget.
  bool Put(const DiskKey& key, Key cache_key, BlobPtr blob, Encoder encode = nullptr) EXCLUDES(mu_);

  // Removes the entry for `key`; whether there was one in the index.
  bool Erase(const DiskKey& key) EXCLUDES(mu_);

  // Waits until every write queued so far is made (or dropped).
  void WaitForWrites() EXCLUDES(mu_);
  // Waits until the scan at open is done.
  void WaitForIndex() EXCLUDES(mu_);

  DiskTierStats Stats() const EXCLUDES(mu_);
  const std::filesystem::path& dir() const { return options_.dir; }
  // DIR/records-v1, made (0700, galleyd's own) by Open.
  std::filesystem::path records_dir() const;
  // Where the entry for `key` is (or would be) kept.
  std::filesystem::path EntryPath(const DiskKey& key) const;

 private:
  struct PendingWrite {
    DiskKey key;
    Key cache_key = 0;
    BlobPtr blob;
    Encoder encode;
    uint64_t queued_bytes = 0;
  };
  // One indexed entry; `order` is its place in lru_ (front: first to go).
  struct Entry {
    uint64_t charged_bytes = 0;
    Key cache_key = 0;
    bool has_cache_key = false;
    std::list<uint64_t>::iterator order;
  };

  DiskTier(const DiskTierOptions& options, const DemandTracker* demand);
  // The index's name for `key`: its fingerprint's number here, then the item.
  uint64_t IndexKeyLocked(const DiskKey& key) REQUIRES(mu_);
  DiskKey DiskKeyOf(uint64_t index_key) const REQUIRES(mu_);
  std::string Subfolder(const DiskKey& key) const;
  static std::string FileName(const DiskKey& key);
  // Removes `path` when it still is the file `inode` (a writer may have put
  // a sound entry there since), and the entry from the index.
  void DropDamaged(const DiskKey& key, const std::string& path, ino_t inode) EXCLUDES(mu_);
  void RemoveLocked(uint64_t index_key) REQUIRES(mu_);
  // Evicts until `bytes` more fit; returns the files to unlink.
  std::vector<std::string> MakeRoomLocked(uint64_t bytes) REQUIRES(mu_);
  // Writes one entry's file; false (logged) when the file system refuses.
  bool WriteFile(const DiskKey& key, const Blob& blob, uint64_t* charged);
  void WriterLoop() EXCLUDES(mu_);
  void IndexLoop() EXCLUDES(mu_);

  const DiskTierOptions options_;
  const DemandTracker* const demand_;
  const std::filesystem::path entries_dir_;
  const std::string temp_suffix_;  // ".tmp-<pid>": this process's files being written
  UniqueFd lock_fd_;               // flock'ed: one galleyd per folder

  mutable Mutex mu_;
  CondVar queue_cv_;  // a write was queued, or stop_
  CondVar idle_cv_;   // the writer emptied the queue, or the index is done
  bool stop_ GUARDED_BY(mu_) = false;
  std::deque<PendingWrite> queue_ GUARDED_BY(mu_);
  uint64_t queued_bytes_ GUARDED_BY(mu_) = 0;
  bool writing_ GUARDED_BY(mu_) = false;  // the writer holds a write taken off the queue
  // Each dataset's fingerprint once, numbered in the order first seen.
  std::vector<std::pair<uint64_t, uint64_t>> fingerprints_ GUARDED_BY(mu_);
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> fingerprint_numbers_ GUARDED_BY(mu_);
  std::unordered_map<uint64_t, Entry> index_ GUARDED_BY(mu_);
  std::list<uint64_t> lru_ GUARDED_BY(mu_);
  uint64_t bytes_ GUARDED_BY(mu_) = 0;
  bool indexed_ GUARDED_BY(mu_) = false;
  DiskTierStats stats_ GUARDED_BY(mu_);

  uint64_t write_failures_ = 0;  // the writer thread's own
  std::thread writer_;
  std::thread indexer_;
};

}  // namespace galley::cache

#endif  // GALLEY_CACHE_DISK_TIER_H_
