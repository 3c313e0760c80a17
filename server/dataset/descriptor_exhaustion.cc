#include "galley/dataset/descriptor_exhaustion.h"

#include <dirent.h>
#include <sys/resource.h>

#include <atomic>
#include <cerrno>

namespace galley {
namespace {

std::atomic<uint64_t>& Exhaustions() {
  static std::atomic<uint64_t> count{0};
  return count;
}

}  // namespace

bool IsOutOfDescriptors(int error) { return error == EMFILE || error == ENFILE; }

Status OutOfDescriptors(const std::string& what, int error) {
  CountOutOfDescriptors();
  // The cause comes first: a batch keeps only the first 239 bytes of a
  // sample's error, and a long path must not push it out.
  const std::string who = error == ENFILE ? "the system is" : "galleyd is";
  return Status::ResourceExhausted(
      who + " out of file descriptors (" + (error == ENFILE ? "ENFILE" : "EMFILE") + ") opening " +
      what +
      "; the node's operator should raise galleyd's descriptor limit (LimitNOFILE) or lower "
      "max_open_shards_total (galleyctl status shows 'descriptors')");
}

void CountOutOfDescriptors() { Exhaustions().fetch_add(1, std::memory_order_relaxed); }

uint64_t DescriptorExhaustions() { return Exhaustions().load(std::memory_order_relaxed); }

DescriptorUsage CurrentDescriptorUsage() {
  DescriptorUsage usage;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    usage.limit = static_cast<uint64_t>(limit.rlim_cur);
  }
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return usage;
  int64_t entries = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++entries;
  }
  ::closedir(dir);
  usage.open = entries - 1;  // the listing's own descriptor
  return usage;
}

}  // namespace galley
