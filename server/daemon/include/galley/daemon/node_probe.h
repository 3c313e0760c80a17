// NodeProbe: short measurements of this node's preparation costs, the inputs
// of the cache planner (docs/cache.md, "Partitioning").
//
// MeasureNode runs once at daemon start, before any job, on one thread:
//   * decode + augment rate per core: a synthetic 500x375 JPEG (ImageNet's
//     typical size, encoded in memory with natural-image-like content) through
//     the real image::Decode and a RandomResizedCrop(224) + RandomHorizontalFlip
//     TransformPipeline, as a worker thread would run it;
//   * augment-only rate per core: the same pipeline on the decoded image;
//   * memory copy bandwidth: memcpy of a buffer larger than the caches.
// Rates are per core: the pipeline runs one item per worker thread, and
// workers scale close to linearly until memory bandwidth binds, which the
// planner models separately.
//
// SampleDataset measures one dataset: storage read rate by reading files
// through Dataset::ReadHead (plain buffered reads, as the pipeline does; at
// most 1 MiB of each, and a shard reads no more, so that a large member is
// not held a second time beside the pipeline's read of it), and inflation
// M = decoded bytes / encoded bytes over up to 16 files spread over the
// item ids, the decoded size taken from each file's header. Known limitation: files in the page
// cache read at memory speed, so a dataset that was just written or recently read looks faster than
// cold storage; operators override storage_bytes_per_s when that matters.
//
// Thread-safety: free functions without shared state.
#ifndef GALLEY_SERVER_DAEMON_NODE_PROBE_H_
#define GALLEY_SERVER_DAEMON_NODE_PROBE_H_

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

#include "galley/dataset/dataset.h"
#include "galley/image/transforms.h"
#include "galley/status.h"

namespace galley {

struct NodeMeasurements {
  double decode_augment_per_core_per_s = 0;
  double augment_per_core_per_s = 0;
  double memory_bytes_per_s = 0;
  double probe_seconds = 0;  // how long the probe took
  // The remote tier, when one is configured (RemoteTier::Probe): the rate
  // this node reads from its servers, their capacity; and the link speed
  // of the interface that reaches them. 0 = not measured.
  double remote_bytes_per_s = 0;
  uint64_t remote_capacity_bytes = 0;
  double nic_bytes_per_s = 0;
};

struct DatasetSample {
  uint64_t items = 0;
  double mean_encoded_bytes = 0;  // Dataset::total_bytes() / size()
  double inflation = 1;           // decoded bytes / encoded bytes over the sampled files
  uint32_t files_sampled = 0;
  uint64_t bytes_read = 0;  // by the storage measurement
  double read_seconds = 0;  // its duration; rate = bytes_read / read_seconds
};

// `budget` bounds each of the two CPU measurements (default: a fifth of a
// second each, enough for a few hundred items on a current core).
Result<NodeMeasurements> MeasureNode(
    std::chrono::duration<double> budget = std::chrono::milliseconds(200));

// The cores this process may run on: the CPUs in its affinity mask (taskset,
// cpusets), further capped by a cgroup v2 CPU quota (cpu.max, rounded up),
// as a container's CPU limit sets it. At least 1. The default number of
// worker threads: one per core the node offers this process, not one per
// core the machine has.
unsigned UsableCores();

// The memory this process may still take, from /proc/meminfo (MemTotal,
// MemAvailable), each bounded by the memory.max of this process's cgroup v2
// and its ancestors (available: memory.max less memory.current, so a
// container's limit binds, not the host's free memory). Zeros when meminfo
// cannot be read. The paths are parameters for tests.
struct NodeMemory {
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;
};
NodeMemory ReadNodeMemory(const std::filesystem::path& proc = "/proc",
                          const std::filesystem::path& cgroup_root = "/sys/fs/cgroup");

// Items/s one core augments with `pipeline` (the decoded synthetic image of
// MeasureNode, successive item ids), within about `budget`: the planner's
// per-pipeline augment cost.
Result<double> MeasureAugmentRate(
    const image::TransformPipeline& pipeline,
    std::chrono::duration<double> budget = std::chrono::milliseconds(50));

// The speed of the network interface this node would use to reach `host`
// (a name or address, "[v6]" allowed), in bytes/s, from the kernel's link
// speed (/sys/class/net/IFACE/speed). 0 when it cannot tell: loopback and
// virtual interfaces report none.
double LinkBytesPerSecond(const std::string& host, uint16_t port);

// Reads up to `max_files` files and up to about `max_bytes` from `dataset`
// (at most 1 MiB of each), whose images are kept at `max_resolution`
// (JobSpec's; 0: their own size), which the inflation counts. Files that
// cannot be read or whose size cannot be told are skipped; InvalidArgument
// if none could be. A read that fails Unavailable (an object store that
// stays unreachable after its retries) ends the sample there: each further
// read would wait its own retries, and galleyd's shutdown waits for this.
Result<DatasetSample> SampleDataset(const Dataset& dataset, uint32_t max_resolution,
                                    uint32_t max_files = 16,
                                    uint64_t max_bytes = uint64_t{8} << 20);

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_NODE_PROBE_H_
