// The bytes a test process's heap has handed out and not taken back, for
// tests that assert on the memory a structure keeps.
#ifndef GALLEY_TESTS_UNIT_HEAP_BYTES_H_
#define GALLEY_TESTS_UNIT_HEAP_BYTES_H_

#include <cstdint>

#if defined(__SANITIZE_ADDRESS__)
#define GALLEY_HEAP_FROM_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GALLEY_HEAP_FROM_SANITIZER 1
#endif
#endif

#if defined(GALLEY_HEAP_FROM_SANITIZER)
#include <sanitizer/allocator_interface.h>
#elif defined(__GLIBC__)
#include <malloc.h>
#endif

namespace galley {

// Whether HeapBytesInUse counts anything in this build.
inline bool HeapBytesMeasurable() {
#if defined(GALLEY_HEAP_FROM_SANITIZER) || defined(__GLIBC__)
  return true;
#else
  return false;
#endif
}

// The sanitizer's allocator count under AddressSanitizer, glibc's otherwise.
inline uint64_t HeapBytesInUse() {
#if defined(GALLEY_HEAP_FROM_SANITIZER)
  return __sanitizer_get_current_allocated_bytes();
#elif defined(__GLIBC__)
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
#else
  return 0;
#endif
}

}  // namespace galley

#endif  // GALLEY_TESTS_UNIT_HEAP_BYTES_H_
