// BlobArena: memory for cached pixels, reserved once and committed ahead of
// use, so that filling the decoded tier does not pay a page fault per page.
//
// Why. A decoded 500 x 375 image is 550 KiB. A tier that fills allocates a
// fresh buffer for every entry, and the first write to each fresh 4 KiB page
// traps into the kernel, which finds and zeroes a page: 137 faults per image.
// On a 2-core VM that cost 0.24 ms per image (bench/README.md, "The decoded
// tier's memory"), a quarter of the decode itself, and it fell on the first
// epoch, exactly when every item is a miss.
//
// How. The arena reserves address space for the whole budget (no memory until
// touched) and hands out blocks of it with Boost.Interprocess's best-fit
// allocator (rbtree_best_fit: best fit, neighbours coalesce on free). That
// allocator carves each block from the front of the free block it picks, so a
// filling arena grows from its start, and Populate(n) commits the first n bytes
// ahead of the blocks that will land there (madvise MADV_POPULATE_WRITE, Linux
// 5.14 and later: it commits pages without touching their contents, so it is
// safe next to blocks in use). Memory is never given back while the arena
// lives: a block freed by an eviction is reused by a later one, and a page is
// faulted at most once in the arena's life.
//
// An Allocate that finds no free block large enough (the budget is spent or
// fragmented) returns nullptr; the caller keeps its pixels on the heap. So the
// arena is only ever an optimisation: correctness never depends on it.
//
// Ownership. A blob from Allocate keeps the arena alive (its deleter holds a
// shared_ptr), so the arena is unmapped only after its last blob is gone.
//
// Thread-safety: every member may be called concurrently. Populate calls are
// serialised among themselves and never block Allocate.
#ifndef GALLEY_CACHE_BLOB_ARENA_H_
#define GALLEY_CACHE_BLOB_ARENA_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "galley/cache/blob.h"
#include "galley/mutex.h"
#include "galley/status.h"

namespace galley::cache {

struct ArenaStats {
  uint64_t capacity_bytes = 0;   // address space reserved
  uint64_t populated_bytes = 0;  // committed from the start by Populate
  uint64_t allocated_bytes = 0;  // held by live blocks, the allocator's headers included
  uint64_t blocks = 0;           // live blocks
  uint64_t refused = 0;          // Allocate calls that found no free block large enough
};

class BlobArena : public std::enable_shared_from_this<BlobArena> {
 public:
  // Reserves `capacity_bytes` of address space. InvalidArgument when the
  // capacity is too small to hold the allocator's own header;
  // ResourceExhausted when the kernel refuses the reservation.
  static Result<std::shared_ptr<BlobArena>> Create(uint64_t capacity_bytes);
  ~BlobArena();
  BlobArena(const BlobArena&) = delete;
  BlobArena& operator=(const BlobArena&) = delete;

  // A blob whose payload is `payload_bytes` of arena memory (Blob::arena_bytes,
  // uninitialised, for the caller to fill before sharing it), or nullptr when
  // no free block is that large.
  std::shared_ptr<Blob> Allocate(size_t payload_bytes);

  // Commits the arena's pages from its start up to `bytes` (capped at the
  // capacity); pages already committed, and the contents of blocks in use,
  // are left as they are. Returns the bytes committed from the start so far,
  // or an error when the kernel cannot (MADV_POPULATE_WRITE unknown before
  // Linux 5.14; ENOMEM when the node is out of memory): the arena then
  // simply faults pages in on first use, as the heap would.
  Result<uint64_t> Populate(uint64_t bytes);

  ArenaStats Stats() const;

 private:
  struct Segment;  // the Boost allocator over the reservation
  BlobArena(void* base, uint64_t capacity, std::unique_ptr<Segment> segment);
  void Free(void* block);

  uint8_t* const base_;
  const uint64_t capacity_;
  mutable Mutex mu_;
  std::unique_ptr<Segment> segment_ GUARDED_BY(mu_);
  uint64_t blocks_ GUARDED_BY(mu_) = 0;
  uint64_t refused_ GUARDED_BY(mu_) = 0;
  Mutex populate_mu_ ACQUIRED_AFTER(mu_);
  std::atomic<uint64_t> populated_{0};  // written under populate_mu_
};

// Decoded pixels (width x height x channels, HWC) as a blob: copied into
// `arena` when it is not null and has a free block that large (`pixels` then
// stays with the caller, to be reused or freed), else moved into a heap blob.
std::shared_ptr<Blob> MakePixelBlob(BlobArena* arena, std::vector<uint8_t>&& pixels, uint32_t width,
                                    uint32_t height, uint32_t channels);

}  // namespace galley::cache

#endif  // GALLEY_CACHE_BLOB_ARENA_H_
