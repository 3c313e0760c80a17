// LogThrottle: keeps a repeating warning from flooding the log.
//
// A job on a dataset that vanished fails every sample it asks for, thousands
// a second; each failure still counts (and reaches the job's batches as a
// skipped sample), but only the first `burst` of each `window` are logged,
// and the next message after a window with drops says how many were not.
//
// Thread-safety: every method may be called from any thread.
#ifndef GALLEY_SERVER_LOGGING_LOG_THROTTLE_H_
#define GALLEY_SERVER_LOGGING_LOG_THROTTLE_H_

#include <chrono>
#include <cstdint>

#include "galley/mutex.h"

namespace galley {

class LogThrottle {
 public:
  using Clock = std::chrono::steady_clock;

  LogThrottle(uint32_t burst, Clock::duration window) : burst_(burst), window_(window) {}

  // Whether to log a message now. `*dropped` is set to the messages not
  // logged in the windows since the last one that was (0 most of the time),
  // for the caller to mention.
  bool Allow(Clock::time_point now, uint64_t* dropped) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    if (now - window_start_ >= window_) {
      window_start_ = now;
      in_window_ = 0;
    }
    if (in_window_ >= burst_) {
      ++dropped_;
      return false;
    }
    ++in_window_;
    *dropped = dropped_;
    dropped_ = 0;
    return true;
  }

 private:
  const uint32_t burst_;
  const Clock::duration window_;
  Mutex mu_;
  Clock::time_point window_start_ GUARDED_BY(mu_){};
  uint32_t in_window_ GUARDED_BY(mu_) = 0;
  uint64_t dropped_ GUARDED_BY(mu_) = 0;
};

}  // namespace galley

#endif  // GALLEY_SERVER_LOGGING_LOG_THROTTLE_H_
