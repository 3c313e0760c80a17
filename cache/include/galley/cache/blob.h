// Blob: one cached value, and the key and byte-charge conventions every tier
// shares.
//
// A Blob is immutable once it is in a tier and is handed out as
// std::shared_ptr<const Blob>: a reader keeps its value alive however long it
// needs it, so evicting or erasing an entry never invalidates a value in use.
// Blobs are plain values; sharing a BlobPtr between threads is safe.
#ifndef GALLEY_CACHE_BLOB_H_
#define GALLEY_CACHE_BLOB_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "galley/ids.h"

namespace galley::cache {

// An item across all datasets: the daemon packs (dataset << 32) | item_id.
using Key = uint64_t;

// Jobs are named by the daemon's JobId (galley/ids.h), never reused while
// the job's entries may still be resident.
using ::galley::JobId;

inline constexpr Key MakeKey(uint32_t dataset, uint32_t item) {
  return (static_cast<Key>(dataset) << 32) | item;
}

// Encoded tier: `bytes` are the file's bytes and the dimensions are 0.
// Decoded tier: RGB uint8 pixels, height x width x channels (HWC).
// Augmented tier: one transformed output sample with its dimensions.
//
// The payload is on the heap (`bytes`) or, for a blob from a BlobArena, in
// the arena (`arena_bytes`, with `bytes` empty); payload() is either. Read a
// blob that came out of a tier through payload().
// The other members of an item (its field record), shared by every blob of
// the item that carries them.
using FieldRecord = std::shared_ptr<const std::vector<uint8_t>>;

struct Blob {
  std::vector<uint8_t> bytes;
  std::span<uint8_t> arena_bytes;  // owned by the blob's deleter (blob_arena.h)
  uint32_t width = 0;
  uint32_t height = 0;
  uint32_t channels = 0;
  // The item's fields, travelling with it through the tiers (a dataset
  // listed with fields); null otherwise. The cache does not read them.
  FieldRecord fields;

  std::span<const uint8_t> payload() const {
    return arena_bytes.empty() ? std::span<const uint8_t>(bytes) : arena_bytes;
  }
};

using BlobPtr = std::shared_ptr<const Blob>;

// Bytes every resident entry is charged on top of its payload. It stands for
// the bookkeeping an entry costs outside its pixel buffer, measured against
// libstdc++ on x86-64: the hash-map node holding the key and the BlobPtr
// (~48 B plus its bucket slot), the shared_ptr control block fused with the
// Blob header by make_shared (~56 B), and the eviction policy's index node and
// ordering node (~48 B + ~64 B). Rounded up to 256 so the budget is an upper
// bound on what the cache really holds, not an optimistic guess.
inline constexpr uint64_t kEntryOverheadBytes = 256;

// What a tier charges against its budget for holding `blob`. A heap payload
// is charged the vector's capacity, not its size: capacity is what the
// allocator holds. An arena payload is charged its size (the arena's block
// header is within kEntryOverheadBytes). A field record is charged to each
// entry holding it.
inline uint64_t ChargedBytes(const Blob& blob) {
  const size_t payload = blob.arena_bytes.empty() ? blob.bytes.capacity() : blob.arena_bytes.size();
  const size_t fields = blob.fields != nullptr ? blob.fields->capacity() : 0;
  return kEntryOverheadBytes + static_cast<uint64_t>(payload) + static_cast<uint64_t>(fields);
}

}  // namespace galley::cache

#endif  // GALLEY_CACHE_BLOB_H_
