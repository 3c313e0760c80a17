// BatchRing's memory: every page of a new ring is reserved, cleared and
// mapped in the daemon before the job's first batch, so no page fault lands
// in the pipeline threads' writes of samples. And its descriptors: nothing a
// client does to those it receives makes a wake-up block or adds a seal.
#include "galley/scheduling/batch_ring.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "wire/segment_layout.h"
#include "wire/wakeup_socket.h"

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

std::unique_ptr<BatchRing> SmallRing() {
  auto geometry = wire::ComputeGeometry(2, 2, 3 * 8 * 8);
  EXPECT_TRUE(geometry.ok()) << geometry.status().ToString();
  TensorShape shape;
  shape.height = shape.width = 8;
  auto ring = BatchRing::Create(*geometry, shape, ::getuid());
  EXPECT_TRUE(ring.ok()) << ring.status().ToString();
  return ring.ok() ? std::move(ring).value() : nullptr;
}

TEST(BatchRingTest, NoWakeupBlocksWhateverTheClientDoesToItsEnd) {
  auto ring = SmallRing();
  ASSERT_NE(ring, nullptr);
  UniqueFd client(::fcntl(ring->client_wakeup_fd(), F_DUPFD_CLOEXEC, 0));
  ASSERT_TRUE(client.valid());
  ring->DropClientDescriptors();
  EXPECT_EQ(ring->client_wakeup_fd(), -1);
  EXPECT_EQ(ring->segment_fd(), -1);
  // What stopped the scheduler through the eventfd: the client makes its
  // descriptor blocking, tries to fill it, and never reads.
  ASSERT_EQ(::fcntl(client.get(), F_SETFL, ::fcntl(client.get(), F_GETFL) & ~O_NONBLOCK), 0);
  const uint64_t huge = 0xfffffffffffffffeull;
  EXPECT_EQ(::send(client.get(), &huge, sizeof(huge), MSG_NOSIGNAL), -1);
  EXPECT_EQ(errno, EPIPE) << "galleyd's end must not take what a client sends";
  const int tiny = 1;
  ASSERT_EQ(::setsockopt(client.get(), SOL_SOCKET, SO_RCVBUF, &tiny, sizeof(tiny)), 0);
  // Ten thousand publications, far more than the queue holds: each returns.
  for (int i = 0; i < 10000; ++i) {
    auto slot = ring->Claim();
    ASSERT_TRUE(slot.has_value()) << "publication " << i;
    ring->Publish(*slot, {});
    ring->slot(*slot)->state.store(static_cast<uint32_t>(wire::SlotState::kFree));
  }
  ring->Close(Status::Cancelled("done"));
  // The client still has wake-ups to read, then sees its job closed.
  auto receiver = wire::WakeupReceiver::Adopt(std::move(client));
  ASSERT_TRUE(receiver.ok()) << receiver.status().ToString();
  pollfd pfd{receiver->fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&pfd, 1, 0), 1);
  EXPECT_TRUE(receiver->Drain());
  ring.reset();
  EXPECT_FALSE(receiver->Drain()) << "the daemon's end closed with the ring";
}

TEST(BatchRingTest, TheClientCannotResizeOrAddSealsToTheSegment) {
  auto ring = SmallRing();
  ASSERT_NE(ring, nullptr);
  const int fd = ring->segment_fd();
  const int seals = ::fcntl(fd, F_GET_SEALS);
  EXPECT_EQ(seals, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  EXPECT_NE(::ftruncate(fd, 0), 0);
  EXPECT_NE(::fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), 0);
  EXPECT_EQ(errno, EPERM);
}

}  // namespace
}  // namespace galley
