#include "wire/mapped_region.h"

#include <fcntl.h>
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
  // Seals hold for every descriptor of the memfd, its sender's included,
  // and can never be removed; F_GET_SEALS fails on anything but a memfd.
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    return Status::ProtocolError(
        "galleyd sent a batch ring that is not a sealable memfd (F_GET_SEALS: " + ErrnoText(errno) +
        "); refusing it, since its sender could shrink it under this process");
  }
  if ((seals & F_SEAL_SHRINK) == 0) {
    return Status::ProtocolError(
        "galleyd sent a batch ring that is not sealed against shrinking (seals " +
        std::to_string(seals) +
        ", F_SEAL_SHRINK missing); refusing it, since its sender could truncate it under this "
        "process");
  }
  if ((seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) != 0) {
    return Status::ProtocolError(
        "galleyd sent a batch ring sealed against writing (seals " + std::to_string(seals) +
        "); the client frees slots by writing their state, so it cannot use this ring");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::Internal(std::string("fstat: ") + ErrnoText(errno));
  // Exactly the announced size: a smaller ring would fault where the
  // announced geometry says slots are, and a larger one was laid out for a
  // geometry other than the one announced.
  if (static_cast<uint64_t>(st.st_size) != size) {
    return Status::ProtocolError(
        "galleyd sent a batch ring of " + std::to_string(st.st_size) + " bytes, " +
        (static_cast<uint64_t>(st.st_size) < size ? "less" : "more") + " than the " +
        std::to_string(size) +
        " its announcement adds up to; refusing it before mapping it (the client and daemon "
        "must be of the same protocol version)");
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
