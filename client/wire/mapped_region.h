// MappedRegion: sole owner of one shared mmap of a descriptor, unmapped on
// destruction. Movable, not copyable; the mapped bytes themselves are shared
// with other processes and synchronised by the segment's own protocol.
#ifndef GALLEY_WIRE_MAPPED_REGION_H_
#define GALLEY_WIRE_MAPPED_REGION_H_

#include <cstddef>
#include <utility>

#include "galley/status.h"

namespace galley::wire {

class MappedRegion {
 public:
  MappedRegion() = default;
  MappedRegion(MappedRegion&& other) noexcept
      : base_(std::exchange(other.base_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  MappedRegion& operator=(MappedRegion&& other) noexcept;
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;
  ~MappedRegion();

  // Maps `size` bytes of the shared-memory segment `fd` read-write and
  // shared. Refuses (ProtocolError) a descriptor that is not a memfd sealed
  // against shrinking (F_SEAL_SHRINK): its sender could otherwise truncate
  // it later and turn this process's reads into SIGBUS. Refuses an object
  // whose size is not exactly `size`.
  static Result<MappedRegion> Map(int fd, size_t size);

  void* base() const { return base_; }
  size_t size() const { return size_; }

 private:
  void* base_ = nullptr;
  size_t size_ = 0;
};

}  // namespace galley::wire

#endif  // GALLEY_WIRE_MAPPED_REGION_H_
