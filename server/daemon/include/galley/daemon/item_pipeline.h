// ItemPipeline: prepares the items of one scheduling wave in parallel.
//
// Each ItemTask is one item of one dataset with the slot positions it must
// be written to (one per receiving job). The item is read and decoded once;
// each receiving job's own transform then writes straight into its slot in
// shared memory. Runs on a TBB arena of `worker_threads`; Run() is called by
// one thread (the scheduler) at a time. Counters are atomics, readable from
// any thread.
//
// With a TieredCache, each item takes the cheapest path the cache allows:
// a decoded-tier hit skips the read and the decode, an encoded-tier hit skips
// the read; a receiving job whose identical sample (same pipeline, seed and
// epoch) is in the augmented tier skips its transform, and when every
// receiver does, the item is not even decoded. What was prepared is offered
// back: the decoded pixels to the decoded tier and, only when that tier
// refuses them, the file bytes to the encoded tier, so the two tiers hold
// disjoint items as the planner's model assumes (an encoded entry promoted to
// the decoded tier leaves the encoded one). Demand must already be consumed
// for the receivers (the scheduler does it when it plans the wave), so
// admission weighs only the jobs that will still want the item.
//
// With a max_resolution, an image whose longer side is over it is shrunk
// right after its full decode (image/max_resolution.h), before any
// transform, and the shrunk pixels are the item: the decoded tier and the
// remote tier's decoded form keep them as they are, the encoded tier and the
// remote tier's encoded form keep them packed (image/pixel_codec.h), never
// the file's bytes, so a decoded-tier miss unpacks instead of decoding the
// original again, and every tier serves the same pixels. The packed form is
// made only when a tier takes it: when the decoded tier refuses the pixels,
// or the remote tier is written its encoded form. An entry that does not
// unpack is a miss (erased, counted, read again from storage). Such an
// image is never decoded in part (a region of the full-resolution image is
// not a region of the shrunk one), nor is one within the limit while a tier
// may keep it (packing needs all of its pixels). The remote tier keys these
// items apart from the exact dataset's.
//
// With a RemoteCache (shared by every node), an item missing from the local
// tiers is looked up there before storage; what was read from storage is
// written back in the tier's write form (decoded pixels when the planner
// chose them and the full image was decoded, else the file's bytes), and an
// encoded remote hit is upgraded to pixels when decoded is the write form.
// With a StorageThrottle, every storage read is charged to it.
//
// With a DiskTier (node-local, kept across restarts), an item missing from
// the memory tiers is looked up there before the remote tier and storage,
// under the dataset's content fingerprint (RemoteFingerprint): a hit is an
// encoded entry, offered to the memory tiers like bytes just read. Only
// what was read from storage is written to it, in the encoded tier's form
// (the file's bytes, or at a max_resolution the pixels packed, made on the
// disk tier's writer thread), so nothing reaches the disk that galleyd did
// not read itself for a job that passed the access checks. A manifest's
// field record is not kept there: its columns come from the listing, which
// the fingerprint does not cover.
//
// Items that must come from a dataset of objects are prefetched before the
// wave is prepared (Dataset::Prefetch), and, when the scheduler hands the
// next wave over with it (RunBeforeNext), the next wave's behind them
// (Dataset::PrefetchNextWave), so that their round trips pass while this
// wave decodes.
//
// A failure is recorded per slot position; a read that failed because the
// dataset changed under its listing, or its object store stayed
// unreachable (NoSubstituteReason), is marked so, since the scheduler ends
// the job for it instead of substituting.
#ifndef GALLEY_SERVER_DAEMON_ITEM_PIPELINE_H_
#define GALLEY_SERVER_DAEMON_ITEM_PIPELINE_H_

#include <tbb/task_arena.h>

#include <atomic>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "galley/cache/disk_tier.h"
#include "galley/cache/tiered_cache.h"
#include "galley/daemon/daemon_options.h"
#include "galley/daemon/storage_throttle.h"
#include "galley/dataset/content_fingerprint.h"
#include "galley/image/decoder.h"
#include "galley/image/region_decoder.h"
#include "galley/logging/log_throttle.h"
#include "galley/remote/remote_cache.h"
#include "galley/scheduling/item_task.h"
#include "galley/snapshots/snapshots.h"

namespace galley {

struct PipelineCounters {
  std::atomic<uint64_t> file_reads{0};
  std::atomic<uint64_t> bytes_read{0};
  std::atomic<uint64_t> decodes{0};
  std::atomic<uint64_t> region_decodes{0};  // decodes of only the rectangle the crops read
  std::atomic<uint64_t> augments{0};
  std::atomic<uint64_t> decoded_hits{0};    // items that skipped read and decode
  std::atomic<uint64_t> encoded_hits{0};    // items that skipped the read
  std::atomic<uint64_t> augmented_hits{0};  // samples that skipped their transform
  std::atomic<uint64_t> failures{0};
  std::atomic<uint64_t> field_reads{0};  // field records read apart from their item's bytes
  // Packed pixels (max_resolution datasets): packed for an encoded tier,
  // unpacked from one, and entries that did not unpack (read again).
  std::atomic<uint64_t> packs{0};
  std::atomic<uint64_t> unpacks{0};
  std::atomic<uint64_t> unpack_failures{0};
  std::atomic<uint64_t> read_ns{0};
  std::atomic<uint64_t> decode_ns{0};
  std::atomic<uint64_t> augment_ns{0};
  std::atomic<uint64_t> pack_ns{0};
  std::atomic<uint64_t> unpack_ns{0};
};

struct PipelineOptions {
  uint32_t worker_threads = 0;  // 0 = UsableCores(): one per core galleyd may use
  image::DecodeOptions decode;

  // The threads the pipeline runs: worker_threads, or UsableCores() for 0.
  uint32_t threads() const;
  static PipelineOptions From(const DaemonOptions& options);
};

// What of a prepared item goes to the remote tier.
enum class RemoteWrite {
  kNone,
  kFromStorage,  // read from storage: the write form, or the bytes when no pixels
  kPixelsOnly,   // an encoded remote hit: the pixels when decoded is the write form
};

class ItemPipeline final : public ItemPreparer {
 public:
  // `cache` may be null (caching disabled), and so may `remote` (no shared
  // tier), `throttle` (storage at its own speed) and `disk` (no disk tier);
  // each one set must outlive the pipeline.
  explicit ItemPipeline(const PipelineOptions& options, cache::TieredCache* cache = nullptr,
                        RemoteCache* remote = nullptr, StorageThrottle* throttle = nullptr,
                        cache::DiskTier* disk = nullptr);
  ~ItemPipeline() override;

  // Prepares every task; failures are recorded per position in the plans.
  // Every item is looked up in the decoded tier first, so that the wave's
  // hits are taken before any of its misses is offered to the tier (an
  // offer may evict an entry the same wave is about to take: its demand was
  // consumed when the wave was planned, which makes it the first victim).
  // The items that must come from a dataset of objects are prefetched then
  // (Dataset::Prefetch), so their requests are in flight together.
  void Run(std::span<ItemTask> tasks) override;
  // Run(tasks), with the items of `next` that must come from a dataset of
  // objects, and that this wave does not read itself, fetched behind this
  // wave's (Dataset::PrefetchNextWave): the next wave's Run finds them
  // fetched or in flight.
  void RunBeforeNext(std::span<ItemTask> tasks, std::span<const ItemTask> next) override;

  const PipelineCounters& counters() const { return counters_; }
  PipelineSnapshot Snapshot() const;
  uint32_t threads() const { return threads_; }

 private:
  // Starts the storage reads of the wave's items that must come from a
  // dataset of objects (Dataset::Prefetch).
  void PrefetchFromStorage(std::span<const ItemTask> tasks);
  // The same for the next wave's `next` (Dataset::PrefetchNextWave), but
  // for the items of `tasks` too: those reach a tier before the next wave.
  void PrefetchNextFromStorage(std::span<const ItemTask> tasks, std::span<const ItemTask> next);
  // Whether `task`'s item is one a dataset of objects must fetch: no tier
  // holds it (`decoded_entry`: the decoded tier's, looked up already).
  bool MustFetch(const ItemTask& task, bool decoded_held) const;
  // Prepares the tasks on the arena.
  void PrepareAll(std::span<ItemTask> tasks);
  // RunOne inside a boundary that turns any exception into a failed sample.
  void RunOneGuarded(ItemTask& task);
  void RunOne(ItemTask& task);
  // What Prepare made of an item. Its pixels are in exactly one of
  // `cached`, `region` and `image`.
  struct PreparedItem {
    // The decoded tier's entry or a decoded remote hit, read in place.
    cache::BlobPtr cached;
    // Only the rectangle the receivers' crops read, at full resolution.
    std::optional<image::ImageRegion> region;
    // The whole image, decoded from the encoded tier's entry or the file.
    image::RgbImage image;
    // What to offer back to the tiers once the transforms are done: a blob
    // to take `image`'s pixels (set when a tier may keep them), and the
    // file's bytes when they came from outside the encoded tier.
    std::shared_ptr<cache::Blob> decoded_to_offer;
    cache::BlobPtr encoded_to_offer;
    // What of the item goes to the remote tier.
    RemoteWrite write_back = RemoteWrite::kNone;
    // A max_resolution dataset's item read from storage: its encoded form
    // is `decoded_to_offer`'s pixels packed, made when a tier takes it
    // (`encoded_to_offer` stays null).
    bool pack_encoded = false;
    // The item's field record, when it came with the bytes or pixels.
    cache::FieldRecord fields;
  };
  // The item's full-resolution pixels: the decoded tier's entry, or decoded
  // from the encoded tier or the file, with what it had to prepare to offer
  // back to the cache. Records the failure in the plans and returns nullopt
  // when it cannot.
  // When `receivers` is given and every receiver's transform starts with a
  // crop, a JPEG that neither the decoded tier nor the remote tier's decoded
  // form would keep is decoded only over the rectangle the receivers' crops
  // read (same bytes as a full decode): then `region` is set instead of
  // `image`.
  std::optional<PreparedItem> Prepare(ItemTask& task, cache::Key key,
                                      const std::vector<const SlotPosition*>* receivers);
  // The item's bytes from the remote tier (unless `remote` is false) or
  // storage, or an error message. Sets *cached on a decoded remote hit.
  Result<cache::BlobPtr> Fetch(ItemTask& task, cache::Key key, cache::BlobPtr* cached,
                               bool* from_storage, bool remote = true);
  // Unpacks a max_resolution dataset's encoded entry into prepared->image.
  // False, counted and logged, when it does not unpack: the caller treats
  // the entry as a miss.
  bool Unpack(ItemTask& task, const cache::Blob& packed, PreparedItem* prepared);
  // `pixels` packed for an encoded tier, with their fields; null (logged)
  // when packing fails.
  cache::BlobPtr Pack(const cache::Blob& pixels);
  // Writes what was prepared for `task` to the remote tier. With `pack`, the
  // encoded form is `decoded` packed, made here into *encoded when needed.
  void WriteBack(const ItemTask& task, RemoteWrite write,
                 const std::shared_ptr<cache::Blob>& decoded, cache::BlobPtr* encoded, bool pack);
  bool TryRegionDecode(const ItemTask& task, const cache::Blob& encoded,
                       const std::vector<const SlotPosition*>& receivers, bool remote_wants_pixels,
                       std::optional<image::ImageRegion>* region, Status* failure);
  // With `pack`, the encoded form offered when the decoded tier refuses the
  // pixels is `decoded` packed (or `encoded`, when already packed).
  void OfferToCache(cache::Key key, const std::shared_ptr<cache::Blob>& decoded,
                    cache::BlobPtr encoded, bool pack);
  // Queues what was read from storage for `task` to the disk tier: `encoded`
  // when set, else `decoded` packed by the writer.
  void WriteToDisk(const ItemTask& task, cache::Key key, const cache::BlobPtr& encoded,
                   const cache::BlobPtr& decoded);
  // Hands each receiver of `task` whose job has fields its view of
  // `record`, read from storage when null (a blob from the remote tier
  // carries none). A failed read fails the item; a value over a job's
  // max_member_bytes fails that job's position. False when the read failed.
  bool DeliverFields(ItemTask& task, cache::FieldRecord* record);

  PipelineOptions options_;
  cache::TieredCache* const cache_;
  RemoteCache* const remote_;
  StorageThrottle* const throttle_;
  cache::DiskTier* const disk_;
  uint32_t threads_;
  std::unique_ptr<tbb::task_arena> arena_;
  PipelineCounters counters_;
  // Per-sample failure warnings: at most 20 every 10 s, then a count.
  LogThrottle failure_log_{20, std::chrono::seconds(10)};
  // Packed entries that did not unpack: at most 5 a minute, then a count.
  LogThrottle unpack_log_{5, std::chrono::seconds(60)};
};

// The remote tier's name for `dataset` served at `max_resolution`: its
// content fingerprint for 0, else one derived from it and the limit, so
// shrunk pixels never meet the exact dataset's or another limit's.
ContentFingerprint RemoteFingerprint(const Dataset& dataset, uint32_t max_resolution);

// The disk tier's name for `item` of `dataset` at `max_resolution`: the
// remote tier's fingerprint and the item.
cache::DiskKey DiskKeyFor(const Dataset& dataset, uint32_t max_resolution, ItemId item);

// Writes one failure per position of `task` into the plans, with why no
// substitute may stand in for it (SlotPlan::dataset_changed; 0: one may).
void RecordFailure(ItemTask& task, const std::string& message, uint8_t no_substitute = 0);

// Why a read of the item that failed may not be substituted:
// kDatasetChanged when the dataset is no longer what it was listed as (the
// file is gone, NotFound, or the source saw its storage change: a
// truncated, rewritten or replaced shard); kStoreUnreachable when its object
// store stayed unreachable through the retries (Unavailable): a store that
// is down is no bad file, and substitutes from the cache would only hide it.
// 0 otherwise.
uint8_t NoSubstituteReason(const Dataset& dataset, const Status& read_failure);

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_ITEM_PIPELINE_H_
