// ErrnoText: the message for an errno value, safe from any thread.
//
// std::strerror may return a buffer another thread's call overwrites
// (clang-tidy's concurrency-mt-unsafe); galleyd and the client library run
// many threads, so every errno message goes through this instead.
#ifndef GALLEY_ERRNO_TEXT_H_
#define GALLEY_ERRNO_TEXT_H_

#include <string.h>

#include <string>

namespace galley {

inline std::string ErrnoText(int error) {
  char buffer[256];
  // The GNU strerror_r (C++ on glibc defines _GNU_SOURCE): it returns the
  // message, written into `buffer` or a constant string.
  return ::strerror_r(error, buffer, sizeof(buffer));
}

}  // namespace galley

#endif  // GALLEY_ERRNO_TEXT_H_
