// BatchRing's memory: every page of a new ring is reserved, cleared and
// mapped in the daemon before the job's first batch, so no page fault lands
// in the pipeline threads' writes of samples.
#include "server/daemon/batch_ring.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "wire/segment_layout.h"

namespace galley {
namespace {

// The resident bytes of this process's mapping that contains `address`,
// from /proc/self/smaps; -1 if no mapping contains it.
int64_t ResidentBytesOfMappingAt(const void* address) {
  const auto at = reinterpret_cast<uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= at && at < end;
      continue;
    }
    int64_t kib = 0;
    if (inside && line.rfind("Rss:", 0) == 0 && std::istringstream(line.substr(4)) >> kib) {
      return kib * 1024;
    }
  }
  return -1;
}

TEST(BatchRingTest, EveryPageIsMappedBeforeTheFirstBatch) {
  // Four slots of eight 1 MiB samples: 32 MiB that a lazily faulted ring
  // would map only as the samples are written.
  auto geometry = wire::ComputeGeometry(4, 8, 1 << 20);
  ASSERT_TRUE(geometry.ok()) << geometry.status().ToString();
  TensorShape shape;
  shape.height = 512;
  shape.width = 512;
  shape.channels = 4;
  auto ring = BatchRing::Create(*geometry, shape, ::getuid());
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  const int64_t resident = ResidentBytesOfMappingAt((*ring)->slot(0));
  ASSERT_GE(resident, 0) << "no mapping holds the ring";
  EXPECT_GE(resident, static_cast<int64_t>(geometry->segment_bytes))
      << "pages of the ring left to fault in on the pipeline's first writes";
}

}  // namespace
}  // namespace galley
