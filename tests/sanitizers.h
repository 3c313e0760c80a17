// GALLEY_TEST_UNDER_ASAN: defined when this test is built with
// AddressSanitizer, under GCC (__SANITIZE_ADDRESS__) or clang
// (__has_feature). Tests about glibc's allocator or resident memory skip
// themselves then: ASan's allocator replaces glibc's and keeps freed memory
// in its quarantine by design.
#ifndef GALLEY_TESTS_SANITIZERS_H_
#define GALLEY_TESTS_SANITIZERS_H_

#if defined(__SANITIZE_ADDRESS__)
#define GALLEY_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GALLEY_TEST_UNDER_ASAN 1
#endif
#endif

#endif  // GALLEY_TESTS_SANITIZERS_H_
