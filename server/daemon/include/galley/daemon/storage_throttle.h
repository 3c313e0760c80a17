// StorageThrottle: makes storage reads as slow as shared network storage,
// for benchmarks and tests on one machine (bench/README.md, "Several
// nodes").
//
// Reads are charged to one pipe of `bytes_per_s`: each charge reserves the
// next free stretch of the pipe's time (bytes / rate long, starting no
// earlier than now) and sleeps until it ends, so reads queue behind each
// other like transfers over one link. With a `shared_file` the pipe's clock
// (the end of the last reservation, CLOCK_MONOTONIC nanoseconds) lives in
// that file, mapped by every galleyd naming it: the daemons standing for
// several nodes then share one storage bandwidth, as nodes share a file
// server. Without one the pipe is this daemon's own.
//
// Never used unless galleyd is given storage_throttle_bytes_per_s.
//
// Thread-safety: Charge may be called from any thread; the reservation is
// one atomic compare-and-swap on the (possibly shared) clock.
#ifndef GALLEY_SERVER_DAEMON_STORAGE_THROTTLE_H_
#define GALLEY_SERVER_DAEMON_STORAGE_THROTTLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "galley/status.h"

namespace galley {

class StorageThrottle {
 public:
  // InvalidArgument for a rate <= 0; the file's errors when `shared_file`
  // (created 0600 if missing) cannot be opened or mapped.
  static Result<std::unique_ptr<StorageThrottle>> Create(double bytes_per_s,
                                                         const std::string& shared_file);
  ~StorageThrottle();
  StorageThrottle(const StorageThrottle&) = delete;
  StorageThrottle& operator=(const StorageThrottle&) = delete;

  // Waits until `bytes` have passed through the pipe.
  void Charge(uint64_t bytes);

  double bytes_per_s() const { return bytes_per_s_; }

 private:
  StorageThrottle(double bytes_per_s, uint64_t* clock, void* mapping);

  const double bytes_per_s_;
  uint64_t own_clock_ = 0;  // the pipe's clock without a shared file
  uint64_t* const clock_;   // own_clock_, or the shared file's first 8 bytes
  void* const mapping_;     // the shared file's mapping, or null
};

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_STORAGE_THROTTLE_H_
