#include "wire/mapped_region.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "galley/errno_text.h"

namespace galley::wire {

MappedRegion& MappedRegion::operator=(MappedRegion&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) ::munmap(base_, size_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedRegion::~MappedRegion() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

Result<MappedRegion> MappedRegion::Map(int fd, size_t size) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::Internal(std::string("fstat: ") + ErrnoText(errno));
  if (static_cast<uint64_t>(st.st_size) < size) {
    return Status::ProtocolError("shared-memory object is smaller than announced");
  }
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    return Status::ResourceExhausted(std::string("mmap of the batch ring failed: ") +
                                     ErrnoText(errno));
  }
  MappedRegion region;
  region.base_ = base;
  region.size_ = size;
  return region;
}

}  // namespace galley::wire
