#include "galley/daemon/memory_setup.h"

#include <malloc.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <string>
#include <utility>

#include "spdlog/spdlog.h"

namespace galley {
namespace {

// A decoded image up to about 1,600 x 1,700 pixels. Larger ones (rare), and
// large requests, keep their own mappings, which go back to the system when
// freed.
constexpr int kMmapThreshold = 8 << 20;
constexpr int kTrimThreshold = 64 << 20;
constexpr uint64_t kPopulateStep = uint64_t{8} << 20;
constexpr uint64_t kNodeReserveFloor = uint64_t{256} << 20;

}  // namespace

void TuneHeapForImages() {
  // Both return 1 on success; a malloc that is not glibc's (a sanitizer's)
  // keeps its own behaviour, which is fine. galleyd calls this before it
  // starts any thread, which is what makes mallopt safe here.
  const bool mmap_set =
      ::mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1;  // NOLINT(concurrency-mt-unsafe)
  const bool trim_set =
      ::mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;  // NOLINT(concurrency-mt-unsafe)
  if (!mmap_set || !trim_set) {
    spdlog::debug("malloc did not take galleyd's thresholds; image buffers use its defaults");
  }
}

bool CachePrefaulter::NodeCanSpare(const NodeMemory& memory, uint64_t step) {
  const uint64_t reserve = std::max(memory.total_bytes / 8, kNodeReserveFloor);
  return memory.available_bytes >= reserve + step;
}

CachePrefaulter::CachePrefaulter(cache::TieredCache* cache, std::chrono::milliseconds poll,
                                 std::function<NodeMemory()> memory)
    : cache_(cache), poll_(poll), memory_(std::move(memory)) {}

CachePrefaulter::~CachePrefaulter() { Stop(); }

void CachePrefaulter::Start() {
  thread_ = std::thread([this] { Run(); });
}

void CachePrefaulter::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  wake_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

uint64_t CachePrefaulter::Target(const cache::CacheStats& stats) {
  if (!stats.decoded_arena) return 0;
  const uint64_t others = stats.encoded.bytes + stats.augmented.tier.bytes;
  const uint64_t room = stats.cache_bytes > others ? stats.cache_bytes - others : 0;
  return std::min(room, stats.decoded_arena->capacity_bytes);
}

void CachePrefaulter::Run() {
  cache::BlobArena* const arena = cache_->decoded_arena();
  if (arena == nullptr) return;
  // Idle priority: committing memory early must never take a core from a job.
  sched_param param{};
  if (::pthread_setschedparam(::pthread_self(), SCHED_IDLE, &param) != 0) {
    spdlog::debug("cache prefault runs at normal priority: SCHED_IDLE refused");
  }
  const auto start = std::chrono::steady_clock::now();
  bool reported = false;
  while (true) {
    ++rounds_;
    const uint64_t target = Target(cache_->Stats());
    const uint64_t populated = arena->Stats().populated_bytes;
    if (populated < target) {
      const uint64_t step = std::min(kPopulateStep, target - populated);
      if (const NodeMemory memory = memory_(); !NodeCanSpare(memory, step)) {
        spdlog::warn(
            "cache prefault stopped at {} of {} MiB: the node has {} MiB available and keeps "
            "{} MiB in reserve; the rest of the decoded tier is committed on first use "
            "(is cache_bytes larger than this node can spare?)",
            populated >> 20, target >> 20, memory.available_bytes >> 20,
            std::max(memory.total_bytes / 8, kNodeReserveFloor) >> 20);
        return;
      }
      auto done = arena->Populate(populated + step);
      if (!done.ok()) {
        spdlog::warn("{}; the decoded tier's pages are committed on first use instead",
                     done.status().message());
        return;
      }
      reported = false;
      MutexLock lock(&mu_);
      if (stop_) return;
      continue;
    }
    if (!reported && populated > 0) {
      spdlog::info(
          "cache prefault: {} MiB of the decoded tier committed ahead of use, {:.2f} s "
          "after start",
          populated >> 20,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      reported = true;
    }
    MutexLock lock(&mu_);
    if (stop_) return;
    wake_.WaitFor(&mu_, poll_);
    if (stop_) return;
  }
}

}  // namespace galley
