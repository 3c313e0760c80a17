// PopulateWrite: commits the pages of [addr, addr + bytes) ahead of use,
// writable and cleared (madvise MADV_POPULATE_WRITE, Linux 5.14), so that no
// page fault lands on the first writes. Returns 0, or the errno: EINVAL on
// an older kernel, ENOMEM or EFAULT when the memory cannot be had. Used by
// the decoded tier's arena and by the daemon's batch rings.
#ifndef GALLEY_POPULATE_H_
#define GALLEY_POPULATE_H_

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>

namespace galley {

inline int PopulateWrite(void* addr, size_t bytes) {
  constexpr int kMadvPopulateWrite = 23;  // include/uapi/asm-generic/mman-common.h
  return ::madvise(addr, bytes, kMadvPopulateWrite) == 0 ? 0 : errno;
}

}  // namespace galley

#endif  // GALLEY_POPULATE_H_
