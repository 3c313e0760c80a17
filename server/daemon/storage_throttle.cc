#include "galley/daemon/storage_throttle.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>

#include "galley/errno_text.h"
#include "galley/unique_fd.h"

namespace galley {
namespace {

uint64_t MonotonicNs() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000ULL + static_cast<uint64_t>(now.tv_nsec);
}

}  // namespace

StorageThrottle::StorageThrottle(double bytes_per_s, uint64_t* clock, void* mapping)
    : bytes_per_s_(bytes_per_s),
      clock_(clock != nullptr ? clock : &own_clock_),
      mapping_(mapping) {}

Result<std::unique_ptr<StorageThrottle>> StorageThrottle::Create(double bytes_per_s,
                                                                 const std::string& shared_file) {
  if (!(bytes_per_s > 0) || !std::isfinite(bytes_per_s)) {
    return Status::InvalidArgument("the storage throttle needs a rate above 0");
  }
  if (shared_file.empty()) {
    return std::unique_ptr<StorageThrottle>(new StorageThrottle(bytes_per_s, nullptr, nullptr));
  }
  UniqueFd fd(::open(shared_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return Status::InvalidArgument(shared_file + ": " + ErrnoText(errno));
  if (::ftruncate(fd.get(), 4096) != 0) {
    return Status::InvalidArgument(shared_file + ": " + ErrnoText(errno));
  }
  void* mapping = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (mapping == MAP_FAILED) return Status::InvalidArgument(shared_file + ": " + ErrnoText(errno));
  return std::unique_ptr<StorageThrottle>(
      new StorageThrottle(bytes_per_s, static_cast<uint64_t*>(mapping), mapping));
}

StorageThrottle::~StorageThrottle() {
  if (mapping_ != nullptr) ::munmap(mapping_, 4096);
}

void StorageThrottle::Charge(uint64_t bytes) {
  const auto cost = static_cast<uint64_t>(static_cast<double>(bytes) * 1e9 / bytes_per_s_);
  std::atomic_ref<uint64_t> clock(*clock_);
  uint64_t end = 0;
  uint64_t last = clock.load();
  do {
    end = std::max(last, MonotonicNs()) + cost;
  } while (!clock.compare_exchange_weak(last, end));
  const timespec until{static_cast<time_t>(end / 1000000000ULL),
                       static_cast<long>(end % 1000000000ULL)};
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr) == EINTR) {
  }
}

}  // namespace galley
