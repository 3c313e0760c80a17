// How galleyd's memory behaves under a filling cache: malloc tuned for
// image-sized buffers, and a thread that commits the decoded tier's arena
// ahead of use (docs/cache.md, "Memory").
//
// TuneHeapForImages. glibc's malloc serves a request above M_MMAP_THRESHOLD
// (128 KiB until the first such block is freed) with a mapping of its own,
// and gives it back with munmap on free. A decoded image is 300-700 KiB, so
// every decode would map fresh pages (a fault per 4 KiB page on first write)
// and every free would unmap them, which interrupts every core running a
// galleyd thread to flush its TLB. With several jobs on 2 cores that cost
// more than the decode itself (bench/README.md, "The decoded tier's memory").
// Raising the threshold to 8 MiB keeps image buffers in malloc's heaps,
// where a freed one is reused by the next decode, while larger blocks (a
// 4000 x 3000 image, a large request) still map and unmap; the trim
// threshold of 64 MiB keeps malloc from handing the top of a heap back to the
// kernel, only to fault it in again moments later. Call it once, before any
// thread starts.
//
// CachePrefaulter. One thread at SCHED_IDLE (it runs only on cores nothing
// else wants) that commits the decoded arena from its start, 8 MiB at a
// time, up to the memory the decoded tier may take: the cache budget less
// what the encoded and augmented tiers hold. A daemon that starts idle thus
// commits its cache budget before the first job comes, and the first epoch's
// misses write into memory that is already there. A job that comes sooner
// loses nothing: the arena faults pages in on first use as the heap would.
// Where the kernel lacks MADV_POPULATE_WRITE (before Linux 5.14) it logs that
// once and stops. It never takes the node's memory below a reserve (an
// eighth of it, at least 256 MiB, as ReadNodeMemory sees it, so that a
// container's memory limit counts): a cache_bytes larger than the node can
// spare is committed only as far as it can, and logged, rather than
// starting the OOM killer.
//
// Thread-safety: CachePrefaulter's members may be called from any thread.
#ifndef GALLEY_SERVER_DAEMON_MEMORY_SETUP_H_
#define GALLEY_SERVER_DAEMON_MEMORY_SETUP_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

#include "galley/cache/tiered_cache.h"
#include "galley/daemon/node_probe.h"
#include "galley/mutex.h"

namespace galley {

void TuneHeapForImages();

class CachePrefaulter {
 public:
  // `cache` must have a decoded arena and outlive the prefaulter. `poll` is
  // how often a prefaulter that has caught up looks at the tiers again.
  // `memory` reads the node's memory before each step (tests replace it).
  explicit CachePrefaulter(
      cache::TieredCache* cache, std::chrono::milliseconds poll = std::chrono::seconds(1),
      std::function<NodeMemory()> memory = [] { return ReadNodeMemory(); });
  ~CachePrefaulter();  // Stop()
  CachePrefaulter(const CachePrefaulter&) = delete;
  CachePrefaulter& operator=(const CachePrefaulter&) = delete;

  void Start();
  void Stop();

  // Bytes the decoded tier may take now: what the prefaulter commits up to.
  static uint64_t Target(const cache::CacheStats& stats);
  // Whether committing `step` more bytes leaves the node its reserve.
  static bool NodeCanSpare(const NodeMemory& memory, uint64_t step);

  // How many times the thread has compared the arena with its target: once
  // per step, and once per poll after catching up. Once it has grown by two
  // since a test looked at the arena, the thread has acted on what the test
  // saw, which is what tests wait for instead of waiting a while.
  uint64_t rounds() const { return rounds_.load(); }

 private:
  void Run();

  cache::TieredCache* const cache_;
  const std::chrono::milliseconds poll_;
  const std::function<NodeMemory()> memory_;
  std::atomic<uint64_t> rounds_{0};
  Mutex mu_;
  CondVar wake_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_MEMORY_SETUP_H_
