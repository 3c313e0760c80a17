#include "galley/daemon/item_pipeline.h"

#include <spdlog/spdlog.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "galley/daemon/node_probe.h"
#include "galley/dataset/sample_fields.h"
#include "galley/image/max_resolution.h"
#include "galley/image/pixel_codec.h"
#include "wire/field_record.h"

// Debian's TBB is not built with ThreadSanitizer, so in a GALLEY_SANITIZE=thread
// build the ordering that parallel_for gives (the caller's writes before the
// tasks, the tasks' writes before it returns) is invisible and every task
// would look like a race with its caller. These annotations state that
// ordering; in other builds they are nothing.
#if defined(__SANITIZE_THREAD__)
#define GALLEY_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GALLEY_THREAD_SANITIZER 1
#endif
#endif
#ifdef GALLEY_THREAD_SANITIZER
#include <sanitizer/tsan_interface.h>
#endif

namespace galley {
namespace {

using Clock = std::chrono::steady_clock;

// Marks what this thread wrote so far as visible to a later AcquireFrom(tag).
inline void ReleaseTo([[maybe_unused]] const void* tag) {
#ifdef GALLEY_THREAD_SANITIZER
  __tsan_release(const_cast<void*>(tag));
#endif
}

inline void AcquireFrom([[maybe_unused]] const void* tag) {
#ifdef GALLEY_THREAD_SANITIZER
  __tsan_acquire(const_cast<void*>(tag));
#endif
}

uint64_t NsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

}  // namespace

void RecordFailure(ItemTask& task, const std::string& message, uint8_t no_substitute) {
  for (auto& d : task.deliveries) {
    d.plan->errors[d.position] = message;
    d.plan->dataset_changed[d.position] = no_substitute;
  }
}

uint8_t NoSubstituteReason(const Dataset& dataset, const Status& read_failure) {
  if (read_failure.code() == StatusCode::kNotFound || dataset.stale()) return kDatasetChanged;
  // Only an object store's reads fail Unavailable (after their retries).
  if (read_failure.code() == StatusCode::kUnavailable) return kStoreUnreachable;
  return 0;
}

ContentFingerprint RemoteFingerprint(const Dataset& dataset, uint32_t max_resolution) {
  const ContentFingerprint& content = dataset.content_fingerprint();
  if (max_resolution == 0) return content;
  // "packed": the encoded form holds packed pixels (pixel_codec.h), which a
  // galleyd that stored the file's bytes there would misread; the two never
  // share a name.
  ContentFingerprintBuilder shrunk("max_resolution packed");
  shrunk.AddInteger(content.high);
  shrunk.AddInteger(content.low);
  shrunk.AddInteger(max_resolution);
  return shrunk.Finish();
}

cache::DiskKey DiskKeyFor(const Dataset& dataset, uint32_t max_resolution, ItemId item) {
  const ContentFingerprint fingerprint = RemoteFingerprint(dataset, max_resolution);
  return cache::DiskKey{fingerprint.high, fingerprint.low, item};
}

uint32_t PipelineOptions::threads() const {
  return worker_threads != 0 ? worker_threads : UsableCores();
}

PipelineOptions PipelineOptions::From(const DaemonOptions& options) {
  PipelineOptions o;
  o.worker_threads = options.worker_threads;
  o.decode.max_pixels = options.max_image_pixels;
  return o;
}

ItemPipeline::ItemPipeline(const PipelineOptions& options, cache::TieredCache* cache,
                           RemoteCache* remote, StorageThrottle* throttle, cache::DiskTier* disk)
    : options_(options),
      cache_(cache),
      remote_(remote),
      throttle_(throttle),
      disk_(disk),
      threads_(options.threads()),
      arena_(std::make_unique<tbb::task_arena>(static_cast<int>(threads_))) {}

ItemPipeline::~ItemPipeline() = default;

bool ItemPipeline::MustFetch(const ItemTask& task, bool decoded_held) const {
  const Dataset& dataset = task.dataset();
  if (!dataset.reads_objects()) return false;
  if (cache_ != nullptr) {
    const cache::Key key = cache::MakeKey(task.job_plan->dataset_index, task.item);
    if (decoded_held || cache_->encoded().Contains(key)) return false;
  }
  // The disk tier counts: after a restart it holds what the memory tiers
  // lost, and a GET started for such an item would be bytes fetched for
  // nothing.
  return disk_ == nullptr ||
         !disk_->MayHold(DiskKeyFor(dataset, task.job_plan->spec.max_resolution, task.item));
}

void ItemPipeline::PrefetchFromStorage(std::span<const ItemTask> tasks) {
  // One thread per core would otherwise wait on one object request at a
  // time: a dataset of objects starts fetching every item of the wave that
  // no cache tier holds, and each task's read then waits for its own.
  std::map<const Dataset*, std::vector<ItemId>> wanted;
  for (const ItemTask& task : tasks) {
    if (MustFetch(task, task.decoded_entry != nullptr))
      wanted[&task.dataset()].push_back(task.item);
  }
  for (const auto& [dataset, ids] : wanted) dataset->Prefetch(ids);
}

void ItemPipeline::PrefetchNextFromStorage(std::span<const ItemTask> tasks,
                                           std::span<const ItemTask> next) {
  // An item of this wave that the next one reads again is in a tier by
  // then, or read on demand when no tier kept it: fetching it twice ahead
  // would be bytes fetched for nothing.
  std::set<std::pair<const Dataset*, ItemId>> this_wave;
  if (cache_ != nullptr) {
    for (const ItemTask& task : tasks) {
      if (task.dataset().reads_objects()) this_wave.insert({&task.dataset(), task.item});
    }
  }
  std::map<const Dataset*, std::vector<ItemId>> wanted;
  for (const ItemTask& task : next) {
    if (this_wave.contains({&task.dataset(), task.item})) continue;
    const bool decoded_held = cache_ != nullptr && cache_->decoded().Contains(cache::MakeKey(
                                                       task.job_plan->dataset_index, task.item));
    if (MustFetch(task, decoded_held)) wanted[&task.dataset()].push_back(task.item);
  }
  for (const auto& [dataset, ids] : wanted) dataset->PrefetchNextWave(ids);
}

void ItemPipeline::Run(std::span<ItemTask> tasks) { RunBeforeNext(tasks, {}); }

void ItemPipeline::RunBeforeNext(std::span<ItemTask> tasks, std::span<const ItemTask> next) {
  if (cache_ != nullptr) {
    // The wave's hits first: the entries are held by the tasks (a Get hands
    // out a reference), so an offer from a task that missed may evict them
    // but not take them from this wave. Without this, an item the wave's
    // jobs no longer need after it (demand 0, the first victim) was pushed
    // out by an earlier task's miss before its own task looked it up: 7% of
    // the misses of jobs at different speeds (docs/sampling.md §3.5).
    for (ItemTask& task : tasks) {
      task.decoded_entry =
          cache_->decoded().Get(cache::MakeKey(task.job_plan->dataset_index, task.item));
      task.decoded_looked_up = true;
    }
  }
  PrefetchFromStorage(tasks);
  // After this wave's: its fetches start first.
  if (!next.empty()) PrefetchNextFromStorage(tasks, next);
  PrepareAll(tasks);
}

void ItemPipeline::PrepareAll(std::span<ItemTask> tasks) {
  // A static tag: the tasks acquire before reading anything their caller
  // wrote, even the lambda's captures.
  static const char tag = 0;
  ReleaseTo(&tag);
  arena_->execute([&] {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, tasks.size(), 1),
                      [&](const tbb::blocked_range<size_t>& range) {
                        AcquireFrom(&tag);
                        for (size_t i = range.begin(); i != range.end(); ++i) {
                          RunOneGuarded(tasks[i]);
                        }
                        ReleaseTo(&tag);
                      });
  });
  AcquireFrom(&tag);
}

bool ItemPipeline::TryRegionDecode(const ItemTask& task, const cache::Blob& encoded,
                                   const std::vector<const SlotPosition*>& receivers,
                                   bool remote_wants_pixels,
                                   std::optional<image::ImageRegion>* region, Status* failure) {
  // A max_resolution dataset's tiers keep its packed pixels, which need the
  // whole image, shrunk or not.
  if (task.job_plan->spec.max_resolution != 0 &&
      (cache_ != nullptr || remote_ != nullptr || disk_ != nullptr))
    return false;
  for (const SlotPosition* d : receivers) {
    if (!d->plan->job->plan->pipeline->SupportsRegion()) return false;
  }
  auto header = image::ReadHeader(encoded.bytes);
  if (!header.ok() || header->format != image::ImageFormat::kJpeg || header->orientation != 1) {
    return false;
  }
  // An image to be shrunk needs all of its pixels.
  if (image::MaxResolutionSize(header->width, header->height, task.job_plan->spec.max_resolution) !=
      image::ImageSize{header->width, header->height}) {
    return false;
  }
  if (cache_ != nullptr) {
    // The full image is worth decoding when the decoded tier would keep it:
    // it has room, or its policy would make room (the item is worth more
    // than what it would push out); the item's next request then skips the
    // decode. Asking only for free room froze a full tier with the items
    // that filled it (docs/sampling.md §3.5: 11-29% more misses for jobs
    // out of step).
    const uint64_t size = uint64_t{3} * header->width * header->height + cache::kEntryOverheadBytes;
    if (cache_->decoded().WouldAdmit(cache::MakeKey(task.job_plan->dataset_index, task.item),
                                     size)) {
      return false;
    }
  }
  // The remote tier's decoded form needs the whole image: a region would
  // leave it only the file's bytes to write. Pixels larger than its entries
  // go as bytes anyway, so those are still decoded in part.
  if (remote_wants_pixels && remote_->Fits(uint64_t{3} * header->width * header->height)) {
    return false;
  }
  int x0 = header->width, y0 = header->height, x1 = 0, y1 = 0;
  for (const SlotPosition* d : receivers) {
    const ServedJob& job = *d->plan->job;
    auto window = job.plan->pipeline->RegionWindow(header->width, header->height,
                                                   job.plan->spec.seed, d->plan->epoch, task.item);
    if (!window.ok()) return false;
    x0 = std::min(x0, window->x);
    y0 = std::min(y0, window->y);
    x1 = std::max(x1, window->x + window->width);
    y1 = std::max(y1, window->y + window->height);
  }
  if (x1 <= x0 || y1 <= y0) return false;
  auto decoded = image::DecodeRegion(encoded.bytes, options_.decode, x0, y0, x1 - x0, y1 - y0);
  if (!decoded.ok()) {
    // InvalidArgument: a JPEG the region decoder does not handle (CMYK...);
    // the full decoder will. Anything else is the file's fault.
    if (decoded.status().code() != StatusCode::kInvalidArgument) *failure = decoded.status();
    return !failure->ok();
  }
  *region = std::move(decoded).value();
  return true;
}

Result<cache::BlobPtr> ItemPipeline::Fetch(ItemTask& task, cache::Key key, cache::BlobPtr* cached,
                                           bool* from_storage, bool remote) {
  if (remote_ != nullptr && remote) {
    RemoteLookup found = remote_->Get(
        RemoteFingerprint(task.dataset(), task.job_plan->spec.max_resolution), task.item);
    if (found.decoded != nullptr) {
      // Another node decoded it: the local decoded tier keeps it if it may.
      if (cache_ != nullptr) cache_->decoded().Put(key, found.decoded);
      *cached = std::move(found.decoded);
      return cache::BlobPtr();
    }
    if (found.encoded != nullptr) return cache::BlobPtr(std::move(found.encoded));
  }
  auto start = Clock::now();
  std::vector<uint8_t> record;
  auto bytes = task.dataset().has_fields() ? task.dataset().ReadWithFields(task.item, &record)
                                           : task.dataset().Read(task.item);
  if (bytes.ok() && throttle_ != nullptr) throttle_->Charge(bytes->size() + record.size());
  counters_.read_ns += NsSince(start);
  if (!bytes.ok()) return bytes.status();
  counters_.file_reads++;
  task.read_from_storage = true;
  counters_.bytes_read += bytes->size();
  auto blob = std::make_shared<cache::Blob>();
  blob->bytes = std::move(bytes).value();
  if (task.dataset().has_fields()) {
    blob->fields = std::make_shared<const std::vector<uint8_t>>(std::move(record));
  }
  *from_storage = true;
  return cache::BlobPtr(std::move(blob));
}

std::optional<ItemPipeline::PreparedItem> ItemPipeline::Prepare(
    ItemTask& task, cache::Key key, const std::vector<const SlotPosition*>* receivers) {
  // On failure nothing is offered: a file that does not decode is not worth
  // keeping.
  auto fail = [&](const std::string& why,
                  uint8_t no_substitute = 0) -> std::optional<PreparedItem> {
    counters_.failures++;
    // Named once: a file's own errors already start with its path.
    const std::string path = task.dataset().path(task.item).string();
    const std::string message = why.rfind(path + ": ", 0) == 0 ? why : path + ": " + why;
    uint64_t dropped = 0;
    if (failure_log_.Allow(LogThrottle::Clock::now(), &dropped)) {
      if (dropped > 0) {
        spdlog::warn("{} more skipped samples were not logged (galleyctl jobs counts them)",
                     dropped);
      }
      spdlog::warn("sample {} skipped: {}", task.item, message);
    }
    RecordFailure(task, message, no_substitute);
    return std::nullopt;
  };
  PreparedItem prepared;
  if (cache_ != nullptr) {
    cache::BlobPtr decoded =
        task.decoded_looked_up ? std::move(task.decoded_entry) : cache_->decoded().Get(key);
    if (decoded != nullptr) {
      counters_.decoded_hits++;
      task.from_cache = true;
      prepared.cached = std::move(decoded);  // the transforms read the entry's pixels in place
      return prepared;
    }
  }
  // A max_resolution dataset's encoded entries, local or remote, are its
  // packed pixels.
  const bool packed = task.job_plan->spec.max_resolution != 0;
  cache::BlobPtr encoded = cache_ != nullptr ? cache_->encoded().Get(key) : nullptr;
  if (encoded != nullptr && packed && !Unpack(task, *encoded, &prepared)) {
    cache_->encoded().Erase(key);  // an entry that does not unpack is a miss
    encoded = nullptr;
  }
  bool from_disk = false;
  if (encoded == nullptr && disk_ != nullptr) {
    const cache::DiskKey disk_key =
        DiskKeyFor(task.dataset(), task.job_plan->spec.max_resolution, task.item);
    encoded = disk_->Get(disk_key, key);
    if (encoded != nullptr && packed && !Unpack(task, *encoded, &prepared)) {
      disk_->Erase(disk_key);  // an entry that does not unpack is a miss
      encoded = nullptr;
    }
    // Offered to the memory tiers like bytes just read.
    from_disk = encoded != nullptr;
    if (from_disk) prepared.encoded_to_offer = encoded;
  }
  if (encoded != nullptr) {
    if (!from_disk) counters_.encoded_hits++;
    prepared.fields = encoded->fields;
    if (packed) return prepared;  // unpacked above
  } else {
    bool from_storage = false;
    auto fetched = Fetch(task, key, &prepared.cached, &from_storage);
    if (packed && fetched.ok() && !from_storage && prepared.cached == nullptr) {
      // Packed pixels from the remote tier: the local encoded tier may keep
      // them as they are, and decoded as the write form upgrades them.
      prepared.encoded_to_offer = *fetched;
      prepared.write_back = remote_->write_form() == RemoteForm::kDecoded ? RemoteWrite::kPixelsOnly
                                                                          : RemoteWrite::kNone;
      if (Unpack(task, **fetched, &prepared)) return prepared;
      prepared.encoded_to_offer = nullptr;
      fetched = Fetch(task, key, &prepared.cached, &from_storage, /*remote=*/false);
    }
    if (!fetched.ok()) {
      return fail(fetched.status().message(), NoSubstituteReason(task.dataset(), fetched.status()));
    }
    if (prepared.cached != nullptr) {  // decoded pixels from the remote tier
      task.from_cache = true;
      return prepared;
    }
    encoded = std::move(fetched).value();
    prepared.fields = encoded->fields;
    // Only bytes fetched from outside are offered to the encoded tier; ones
    // that came from it are already there. A max_resolution dataset's are
    // the file's, which its tiers never keep: its pixels go packed instead.
    if (packed) {
      prepared.pack_encoded = true;
    } else {
      prepared.encoded_to_offer = encoded;
    }
    if (remote_ != nullptr) {
      prepared.write_back = from_storage ? RemoteWrite::kFromStorage
                            : remote_->write_form() == RemoteForm::kDecoded
                                ? RemoteWrite::kPixelsOnly
                                : RemoteWrite::kNone;
    }
  }

  const bool remote_wants_pixels =
      prepared.write_back != RemoteWrite::kNone && remote_->write_form() == RemoteForm::kDecoded;
  auto start = Clock::now();
  if (receivers != nullptr) {
    Status failure;
    if (TryRegionDecode(task, *encoded, *receivers, remote_wants_pixels, &prepared.region,
                        &failure)) {
      counters_.decode_ns += NsSince(start);
      if (!failure.ok()) return fail(failure.message());
      counters_.decodes++;
      counters_.region_decodes++;
      task.decoded = true;
      return prepared;
    }
  }
  auto decoded = image::Decode(encoded->bytes, options_.decode);
  // The shrink is part of making the item's pixels, so its time is the
  // decode's.
  Status shrunk = decoded.ok()
                      ? image::ShrinkToMaxResolution(task.job_plan->spec.max_resolution, &*decoded)
                      : Status::Ok();
  counters_.decode_ns += NsSince(start);
  if (!decoded.ok()) return fail(decoded.status().message());
  if (!shrunk.ok()) return fail(shrunk.message());
  counters_.decodes++;
  task.decoded = true;
  prepared.image = std::move(decoded).value();
  // Packed for the remote tier, the pixels are needed there too.
  if (cache_ != nullptr || remote_wants_pixels ||
      (prepared.pack_encoded && (prepared.write_back != RemoteWrite::kNone ||
                                 (disk_ != nullptr && task.read_from_storage)))) {
    prepared.decoded_to_offer = std::make_shared<cache::Blob>();
  }
  return prepared;
}

bool ItemPipeline::Unpack(ItemTask& task, const cache::Blob& packed, PreparedItem* prepared) {
  auto start = Clock::now();
  auto image = image::UnpackPixels(packed.payload(), options_.decode);
  counters_.unpack_ns += NsSince(start);
  if (!image.ok()) {
    counters_.unpack_failures++;
    uint64_t dropped = 0;
    if (unpack_log_.Allow(LogThrottle::Clock::now(), &dropped)) {
      spdlog::warn("a cached copy of {} is unusable ({}); reading the file again{}",
                   task.dataset().path(task.item).string(), image.status().message(),
                   dropped > 0 ? fmt::format(" ({} more not logged)", dropped) : "");
    }
    return false;
  }
  counters_.unpacks++;
  task.from_cache = true;  // a cache tier held the pixels: nothing read or decoded
  prepared->image = std::move(image).value();
  const bool remote_wants_pixels =
      prepared->write_back != RemoteWrite::kNone && remote_->write_form() == RemoteForm::kDecoded;
  if (cache_ != nullptr || remote_wants_pixels) {
    prepared->decoded_to_offer = std::make_shared<cache::Blob>();
  }
  return true;
}

cache::BlobPtr ItemPipeline::Pack(const cache::Blob& pixels) {
  auto start = Clock::now();
  auto bytes = image::PackPixels(pixels.payload(), static_cast<int>(pixels.width),
                                 static_cast<int>(pixels.height));
  counters_.pack_ns += NsSince(start);
  if (!bytes.ok()) {
    spdlog::warn("cannot pack pixels for the encoded tier: {}", bytes.status().message());
    return nullptr;
  }
  counters_.packs++;
  auto blob = std::make_shared<cache::Blob>();
  blob->bytes = std::move(bytes).value();
  blob->fields = pixels.fields;
  return blob;
}

void ItemPipeline::WriteBack(const ItemTask& task, RemoteWrite write,
                             const std::shared_ptr<cache::Blob>& decoded, cache::BlobPtr* encoded,
                             bool pack) {
  const ContentFingerprint dataset =
      RemoteFingerprint(task.dataset(), task.job_plan->spec.max_resolution);
  // Pixels too large for the servers' entries go in the encoded form.
  if (remote_->write_form() == RemoteForm::kDecoded && decoded != nullptr &&
      remote_->Fits(decoded->payload().size())) {
    remote_->Put(dataset, task.item, RemoteForm::kDecoded, decoded);
    return;
  }
  if (write != RemoteWrite::kFromStorage) return;
  if (pack && *encoded == nullptr && decoded != nullptr) *encoded = Pack(*decoded);
  if (*encoded != nullptr) remote_->Put(dataset, task.item, RemoteForm::kEncoded, *encoded);
}

void ItemPipeline::OfferToCache(cache::Key key, const std::shared_ptr<cache::Blob>& decoded,
                                cache::BlobPtr encoded, bool pack) {
  if (decoded != nullptr && cache_->decoded().Put(key, decoded)) {
    // `encoded` is null without `pack` exactly when the bytes came from the
    // encoded tier. Promoted: the decoded entry serves every later request,
    // so an encoded copy would only take budget from other items.
    if (encoded == nullptr && !pack) cache_->encoded().Erase(key);
    return;
  }
  // Packed only now that the decoded tier refused the pixels: an item it
  // keeps costs no packing.
  if (pack && encoded == nullptr && decoded != nullptr) encoded = Pack(*decoded);
  if (encoded != nullptr) cache_->encoded().Put(key, std::move(encoded));
}

void ItemPipeline::WriteToDisk(const ItemTask& task, cache::Key key, const cache::BlobPtr& encoded,
                               const cache::BlobPtr& decoded) {
  const cache::DiskKey disk_key =
      DiskKeyFor(task.dataset(), task.job_plan->spec.max_resolution, task.item);
  // A manifest's columns come from its listing, which the fingerprint does
  // not cover: a record kept on disk could outlive an edit of the manifest.
  const bool keep_record = task.dataset().shard_source() != nullptr;
  if (encoded != nullptr) {
    if (keep_record || encoded->fields == nullptr) {
      disk_->Put(disk_key, key, encoded);
      return;
    }
    disk_->Put(disk_key, key, encoded, [](const cache::Blob& blob) -> cache::BlobPtr {
      auto bare = std::make_shared<cache::Blob>();
      bare->bytes.assign(blob.payload().begin(), blob.payload().end());
      return bare;
    });
    return;
  }
  if (decoded == nullptr) return;
  // Packed on the disk tier's writer thread, off the item's path.
  disk_->Put(disk_key, key, decoded, [keep_record](const cache::Blob& pixels) -> cache::BlobPtr {
    auto bytes = image::PackPixels(pixels.payload(), static_cast<int>(pixels.width),
                                   static_cast<int>(pixels.height));
    if (!bytes.ok()) return nullptr;
    auto blob = std::make_shared<cache::Blob>();
    blob->bytes = std::move(bytes).value();
    if (keep_record) blob->fields = pixels.fields;
    return blob;
  });
}

void ItemPipeline::RunOneGuarded(ItemTask& task) {
  // Task boundary: a library that throws on one file (OpenCV, allocation)
  // costs that sample, never the scheduler thread and with it the daemon.
  try {
    RunOne(task);
  } catch (const std::exception& e) {
    counters_.failures++;
    RecordFailure(task, task.dataset().path(task.item).string() + ": internal error: " + e.what());
  } catch (...) {
    counters_.failures++;
    RecordFailure(task, task.dataset().path(task.item).string() + ": internal error");
  }
  if (task.costs != nullptr) {
    PreparationCosts& costs = *task.costs;
    if (task.read_from_storage) costs.file_reads++;
    if (task.decoded) costs.decodes++;
    if (!task.read_from_storage && !task.decoded && task.from_cache) costs.cache_hits++;
  }
}

void ItemPipeline::RunOne(ItemTask& task) {
  const cache::Key key = cache::MakeKey(task.job_plan->dataset_index, task.item);
  // The augmented tier is consulted only while it has budget: with the
  // default split it has none.
  const bool augmented_tier = cache_ != nullptr && cache_->split().augmented_pct > 0;

  auto destination = [](const SlotPosition& d) {
    ServedJob& job = *d.plan->job;
    const auto& g = job.ring->geometry();
    std::byte* dst =
        wire::SlotTensor(job.ring->slot(d.plan->slot), g) + g.sample_bytes * d.position;
    return std::span<std::byte>(dst, g.sample_bytes);
  };

  // Receivers whose sample must be computed; the others were served from the
  // augmented tier.
  std::vector<const SlotPosition*> to_augment;
  cache::FieldRecord fields;  // the item's field record, once found
  to_augment.reserve(task.deliveries.size());
  for (const SlotPosition& d : task.deliveries) {
    if (augmented_tier) {
      const ServedJob& job = *d.plan->job;
      const std::span<std::byte> dst = destination(d);
      cache::BlobPtr hit =
          cache_->augmented().Get(key, job.plan->augmentation_signature, job.id, d.plan->epoch);
      if (hit != nullptr && hit->bytes.size() == dst.size()) {
        std::memcpy(dst.data(), hit->bytes.data(), dst.size());
        counters_.augmented_hits++;
        if (fields == nullptr) fields = hit->fields;
        continue;
      }
    }
    to_augment.push_back(&d);
  }
  if (to_augment.empty()) {
    task.from_cache = true;
    DeliverFields(task, &fields);
    return;
  }

  std::optional<PreparedItem> prepared = Prepare(task, key, augmented_tier ? nullptr : &to_augment);
  if (!prepared) return;
  fields = prepared->cached != nullptr ? prepared->cached->fields : prepared->fields;
  if (!DeliverFields(task, &fields)) return;
  const cache::BlobPtr& cached = prepared->cached;
  const std::optional<image::ImageRegion>& region = prepared->region;
  image::RgbImage& image = prepared->image;
  std::shared_ptr<cache::Blob>& decoded_to_offer = prepared->decoded_to_offer;
  cache::BlobPtr& encoded_to_offer = prepared->encoded_to_offer;
  const RemoteWrite write_back = prepared->write_back;

  auto start = Clock::now();
  for (const SlotPosition* receiver : to_augment) {
    const SlotPosition& d = *receiver;
    SlotPlan& plan = *d.plan;
    ServedJob& job = *plan.job;
    const std::span<std::byte> dst = destination(d);
    if (job.plan->spec.native_size) {
      const int width = cached   ? static_cast<int>(cached->width)
                        : region ? region->full_width
                                 : image.width;
      const int height = cached   ? static_cast<int>(cached->height)
                         : region ? region->full_height
                                  : image.height;
      if (width != job.plan->pipeline->output_width() ||
          height != job.plan->pipeline->output_height()) {
        counters_.failures++;
        plan.errors[d.position] = fmt::format(
            "{}: {} {}x{}, this one is {}x{}; give a transform that resizes (e.g. Resize + "
            "CenterCrop)",
            task.dataset().path(task.item).string(), kNativeSizeMismatch,
            job.plan->pipeline->output_width(), job.plan->pipeline->output_height(), width, height);
        continue;
      }
    }
    Status status;
    if (cached != nullptr) {
      status = job.plan->pipeline->Apply(cached->payload(), static_cast<int>(cached->width),
                                         static_cast<int>(cached->height), job.plan->spec.seed,
                                         plan.epoch, task.item, dst);
    } else if (region) {
      status = job.plan->pipeline->ApplyRegion(region->pixels, region->x, region->y,
                                               region->full_width, region->full_height,
                                               job.plan->spec.seed, plan.epoch, task.item, dst);
    } else {
      status = job.plan->pipeline->Apply(image, job.plan->spec.seed, plan.epoch, task.item, dst);
    }
    counters_.augments++;
    if (!status.ok()) {
      counters_.failures++;
      plan.errors[d.position] = task.dataset().path(task.item).string() + ": " + status.message();
      continue;
    }
    if (augmented_tier) {
      auto sample = std::make_shared<cache::Blob>();
      sample->bytes.assign(reinterpret_cast<const uint8_t*>(dst.data()),
                           reinterpret_cast<const uint8_t*>(dst.data()) + dst.size());
      sample->width = static_cast<uint32_t>(job.plan->pipeline->output_width());
      sample->height = static_cast<uint32_t>(job.plan->pipeline->output_height());
      sample->channels = 3;
      sample->fields = fields;
      cache_->augmented().Put(key, job.plan->augmentation_signature, job.id, plan.epoch,
                              std::move(sample));
    }
  }
  counters_.augment_ns += NsSince(start);

  if (region) decoded_to_offer = nullptr;  // a part of the image is no use to the tiers
  if (decoded_to_offer != nullptr) {
    // The transforms are done with the pixels: they become the entry (in
    // the decoded tier's arena when it has room), which the local and the
    // remote tier may then share (it is immutable from here on).
    decoded_to_offer = cache::MakePixelBlob(
        cache_ != nullptr ? cache_->decoded_arena() : nullptr, std::move(image.pixels),
        static_cast<uint32_t>(image.width), static_cast<uint32_t>(image.height), 3);
    decoded_to_offer->fields = fields;
  }
  const bool pack = prepared->pack_encoded;
  if (write_back != RemoteWrite::kNone) {
    WriteBack(task, write_back, decoded_to_offer, &encoded_to_offer, pack);
  }
  if (disk_ != nullptr && task.read_from_storage) {
    // The file's bytes; at a max_resolution the packed pixels, when the
    // remote tier's write packed them already.
    WriteToDisk(task, key, encoded_to_offer, decoded_to_offer);
  }
  if (cache_ != nullptr && (decoded_to_offer != nullptr || encoded_to_offer != nullptr)) {
    OfferToCache(key, decoded_to_offer, std::move(encoded_to_offer), pack);
  }
}

bool ItemPipeline::DeliverFields(ItemTask& task, cache::FieldRecord* record) {
  const Dataset& dataset = task.dataset();
  if (!dataset.has_fields() ||
      std::none_of(task.deliveries.begin(), task.deliveries.end(),
                   [](const SlotPosition& d) { return !d.plan->job->plan->field_map.empty(); })) {
    return true;
  }
  if (*record == nullptr) {
    counters_.field_reads++;
    auto read = dataset.ReadFields(task.item);
    if (!read.ok()) {
      counters_.failures++;
      const std::string path = dataset.path(task.item).string();
      const std::string why = read.status().message();
      RecordFailure(task, why.rfind(path, 0) == 0 ? why : path + ": " + why,
                    NoSubstituteReason(dataset, read.status()));
      return false;
    }
    *record = std::make_shared<const std::vector<uint8_t>>(std::move(read).value());
  }
  const std::vector<std::string>& names = dataset.field_names();
  auto values = wire::SplitFieldRecord(**record, names.size());
  if (!values.ok()) {
    RecordFailure(task, dataset.path(task.item).string() + ": " + values.status().message());
    return false;
  }
  // A manifest's columns are one listing for every job, whichever columns
  // it names: a bad value fails the sample only for the jobs naming it.
  const bool manifest = dataset.shard_source() == nullptr;
  for (SlotPosition& d : task.deliveries) {
    const ServedJob& job = *d.plan->job;
    if (job.plan->field_map.empty()) continue;
    bool identity = job.plan->field_map.size() == names.size();
    std::string refused;
    for (size_t i = 0; i < job.plan->field_map.size(); ++i) {
      const uint32_t f = job.plan->field_map[i];
      identity = identity && f == i;
      if (!refused.empty()) continue;
      const std::span<const uint8_t> value = (*values)[f];
      if (value.size() > job.plan->spec.max_member_bytes) {
        refused = fmt::format(
            "{}: field '{}' is {} bytes, more than max_member_bytes={}; raise it to serve it",
            dataset.path(task.item).string(), names[f], value.size(),
            job.plan->spec.max_member_bytes);
      } else if (manifest) {
        const Status valid = CheckManifestValue(
            std::string_view(reinterpret_cast<const char*>(value.data()), value.size()));
        if (!valid.ok()) {
          refused = fmt::format("{}: manifest column '{}' {}", dataset.path(task.item).string(),
                                names[f], valid.message());
        }
      }
    }
    if (!refused.empty()) {
      counters_.failures++;
      d.plan->errors[d.position] = refused;
      continue;
    }
    if (identity) {
      d.plan->fields[d.position] = *record;
      continue;
    }
    auto projected = std::make_shared<std::vector<uint8_t>>();
    for (const uint32_t f : job.plan->field_map)
      wire::AppendFieldValue(projected.get(), (*values)[f]);
    d.plan->fields[d.position] = std::move(projected);
  }
  return true;
}

PipelineSnapshot ItemPipeline::Snapshot() const {
  PipelineSnapshot s;
  s.threads = threads_;
  s.cache = cache_ != nullptr;
  s.file_reads = counters_.file_reads.load();
  s.field_reads = counters_.field_reads.load();
  s.bytes_read = counters_.bytes_read.load();
  s.decodes = counters_.decodes.load();
  s.region_decodes = counters_.region_decodes.load();
  s.packs = counters_.packs.load();
  s.unpacks = counters_.unpacks.load();
  s.unpack_failures = counters_.unpack_failures.load();
  s.augments = counters_.augments.load();
  s.decoded_hits = counters_.decoded_hits.load();
  s.encoded_hits = counters_.encoded_hits.load();
  s.augmented_hits = counters_.augmented_hits.load();
  s.failures = counters_.failures.load();
  s.read_seconds = counters_.read_ns.load() / 1e9;
  s.decode_seconds = counters_.decode_ns.load() / 1e9;
  s.augment_seconds = counters_.augment_ns.load() / 1e9;
  s.pack_seconds = counters_.pack_ns.load() / 1e9;
  s.unpack_seconds = counters_.unpack_ns.load() / 1e9;
  if (remote_ != nullptr) s.remote = remote_->Snapshot();
  if (disk_ != nullptr) {
    const cache::DiskTierStats d = disk_->Stats();
    s.disk = DiskTierSnapshot{disk_->dir().string(),
                              d.budget_bytes,
                              d.bytes,
                              d.entries,
                              d.hits,
                              d.misses,
                              d.writes,
                              d.write_drops,
                              d.write_errors,
                              d.damaged,
                              d.evictions,
                              d.write_queue_bytes,
                              d.foreign_files,
                              d.indexed,
                              d.index_seconds};
  }
  return s;
}

}  // namespace galley
