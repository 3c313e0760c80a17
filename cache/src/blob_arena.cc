#include "galley/cache/blob_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <boost/interprocess/mem_algo/rbtree_best_fit.hpp>
#include <boost/interprocess/sync/mutex_family.hpp>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include "galley/errno_text.h"
#include "galley/populate.h"

namespace galley::cache {
namespace {

namespace bip = boost::interprocess;

// The allocator's own lock is a no-op: BlobArena::mu_ serialises every call.
using BestFit = bip::rbtree_best_fit<bip::null_mutex_family>;

uint64_t PageSize() { return static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)); }

}  // namespace

// The allocator lives at the start of the reservation, its blocks after it,
// as in a Boost.Interprocess managed segment.
struct BlobArena::Segment {
  explicit Segment(void* base, uint64_t capacity)
      : buffer(*::new (base) BestFit(static_cast<BestFit::size_type>(capacity), 0)) {}
  ~Segment() { buffer.~BestFit(); }
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  BestFit& buffer;
};

Result<std::shared_ptr<BlobArena>> BlobArena::Create(uint64_t capacity_bytes) {
  // Room for the allocator's header and at least one page of blocks.
  if (capacity_bytes < 16 * PageSize()) {
    return Status::InvalidArgument("arena capacity " + std::to_string(capacity_bytes) +
                                   " is below 16 pages");
  }
  // Address space only: MAP_NORESERVE commits nothing until a page is
  // written or populated.
  void* base = ::mmap(nullptr, capacity_bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    return Status::ResourceExhausted("cannot reserve " + std::to_string(capacity_bytes) +
                                     " bytes of address space: " + ErrnoText(errno));
  }
  auto segment = std::make_unique<Segment>(base, capacity_bytes);
  return std::shared_ptr<BlobArena>(new BlobArena(base, capacity_bytes, std::move(segment)));
}

BlobArena::BlobArena(void* base, uint64_t capacity, std::unique_ptr<Segment> segment)
    : base_(static_cast<uint8_t*>(base)), capacity_(capacity), segment_(std::move(segment)) {}

BlobArena::~BlobArena() {
  {
    MutexLock lock(&mu_);
    segment_.reset();
  }
  ::munmap(base_, capacity_);
}

std::shared_ptr<Blob> BlobArena::Allocate(size_t payload_bytes) {
  if (payload_bytes == 0) return nullptr;
  void* block = nullptr;
  {
    MutexLock lock(&mu_);
    block = segment_->buffer.allocate(payload_bytes);
    if (block == nullptr) {
      ++refused_;
      return nullptr;
    }
    ++blocks_;
  }
  auto blob = std::make_unique<Blob>();
  blob->arena_bytes = std::span<uint8_t>(static_cast<uint8_t*>(block), payload_bytes);
  // The deleter owns the block and keeps the arena mapped until it runs.
  return std::shared_ptr<Blob>(blob.release(), [arena = shared_from_this()](Blob* b) {
    arena->Free(b->arena_bytes.data());
    delete b;
  });
}

void BlobArena::Free(void* block) {
  MutexLock lock(&mu_);
  segment_->buffer.deallocate(block);
  --blocks_;
}

Result<uint64_t> BlobArena::Populate(uint64_t bytes) {
  MutexLock lock(&populate_mu_);
  const uint64_t page = PageSize();
  const uint64_t target =
      std::min((std::min(bytes, capacity_) + page - 1) / page * page, capacity_ / page * page);
  const uint64_t from = populated_.load(std::memory_order_relaxed);
  if (target <= from) return from;
  if (const int err = PopulateWrite(base_ + from, target - from); err != 0) {
    return Status::Unavailable(
        "cannot commit the cache arena's memory ahead of use: " + ErrnoText(err) +
        (err == EINVAL ? " (MADV_POPULATE_WRITE needs Linux 5.14)" : ""));
  }
  populated_.store(target, std::memory_order_relaxed);
  return target;
}

ArenaStats BlobArena::Stats() const {
  ArenaStats stats;
  stats.capacity_bytes = capacity_;
  stats.populated_bytes = populated_.load(std::memory_order_relaxed);
  MutexLock lock(&mu_);
  stats.allocated_bytes = segment_->buffer.get_size() - segment_->buffer.get_free_memory();
  stats.blocks = blocks_;
  stats.refused = refused_;
  return stats;
}

std::shared_ptr<Blob> MakePixelBlob(BlobArena* arena, std::vector<uint8_t>&& pixels, uint32_t width,
                                    uint32_t height, uint32_t channels) {
  std::shared_ptr<Blob> blob;
  if (arena != nullptr) blob = arena->Allocate(pixels.size());
  if (blob != nullptr) {
    std::memcpy(blob->arena_bytes.data(), pixels.data(), pixels.size());
  } else {
    blob = std::make_shared<Blob>();
    blob->bytes = std::move(pixels);
  }
  blob->width = width;
  blob->height = height;
  blob->channels = channels;
  return blob;
}

}  // namespace galley::cache
