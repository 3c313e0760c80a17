#include "server/daemon/batch_ring.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/interprocess/permissions.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <new>
#include <random>

namespace galley {
namespace bip = boost::interprocess;
namespace {

constexpr const char* kSegmentPrefix = "galley-";

// 128 random bits: the name is unguessable for the microseconds it exists.
std::string RandomSegmentName() {
  std::random_device device;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name = kSegmentPrefix;
  for (int i = 0; i < 4; ++i) {
    uint32_t word = device();
    for (int j = 0; j < 8; ++j, word >>= 4) name += kHex[word & 0xf];
  }
  return name;
}

}  // namespace

Result<std::unique_ptr<BatchRing>> BatchRing::Create(const wire::SegmentGeometry& geometry,
                                                     const TensorShape& shape, uid_t owner) {
  const std::string name = RandomSegmentName();
  bip::permissions mode;
  mode.set_permissions(0600);
  try {
    bip::shared_memory_object shm(bip::create_only, name.c_str(), bip::read_write, mode);
    // Unlink first: whatever happens next, the name is gone.
    bip::shared_memory_object::remove(name.c_str());
    shm.truncate(static_cast<bip::offset_t>(geometry.segment_bytes));
    const int fd = shm.get_mapping_handle().handle;
    if (::geteuid() == 0 && owner != 0 && ::fchown(fd, owner, static_cast<gid_t>(-1)) != 0) {
      return Status::Internal(std::string("fchown of the batch ring: ") + std::strerror(errno));
    }
    bip::mapped_region region(shm, bip::read_write, 0, geometry.segment_bytes);
    auto* header = new (region.get_address()) wire::SegmentHeader{
        .magic = wire::kSegmentMagic,
        .layout_version = wire::kSegmentLayoutVersion,
        .slot_count = geometry.slot_count,
        .batch_capacity = geometry.batch_capacity,
        .slot_stride = geometry.slot_stride,
        .slots_offset = geometry.slots_offset,
        .tensor_offset = geometry.tensor_offset,
        .sample_bytes = geometry.sample_bytes,
        .channels = shape.channels,
        .height = shape.height,
        .width = shape.width,
        .dtype = shape.dtype,
        .layout = shape.layout,
        .reserved = 0,
        .segment_bytes = geometry.segment_bytes,
        .ready = bip::interprocess_semaphore(0),
        .closed = 0,
        .close_code = 0,
        .close_reason = {},
        .consumer_wait_ns = 0,
        .consumer_waits = 0,
    };
    (void)header;
    auto ring =
        std::unique_ptr<BatchRing>(new BatchRing(geometry, std::move(shm), std::move(region)));
    for (uint32_t i = 0; i < geometry.slot_count; ++i) {
      new (ring->slot(i)) wire::SlotHeader{};
    }
    return ring;
  } catch (const bip::interprocess_exception& e) {
    bip::shared_memory_object::remove(name.c_str());
    return Status::ResourceExhausted(std::string("cannot create the batch ring (") +
                                     std::to_string(geometry.segment_bytes) +
                                     " bytes of shared memory): " + e.what());
  }
}

BatchRing::~BatchRing() = default;

Result<wire::UniqueFd> BatchRing::DuplicateFd() const {
  const int fd = ::fcntl(shm_.get_mapping_handle().handle, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return Status::Internal(std::string("dup: ") + std::strerror(errno));
  return wire::UniqueFd(fd);
}

std::optional<uint32_t> BatchRing::Claim() {
  for (uint32_t i = 0; i < geometry_.slot_count; ++i) {
    auto& state = slot(i)->state;
    uint32_t expected = static_cast<uint32_t>(wire::SlotState::kFree);
    if (state.compare_exchange_strong(expected, static_cast<uint32_t>(wire::SlotState::kFilling),
                                      std::memory_order_acquire)) {
      return i;
    }
  }
  return std::nullopt;
}

void BatchRing::Unclaim(uint32_t index) {
  slot(index)->state.store(static_cast<uint32_t>(wire::SlotState::kFree),
                           std::memory_order_release);
}

void BatchRing::Publish(uint32_t index) {
  auto* s = slot(index);
  s->sequence = next_sequence_++;
  s->state.store(static_cast<uint32_t>(wire::SlotState::kReady), std::memory_order_release);
  wire::HeaderAt(region_.get_address())->ready.post();
}

uint32_t BatchRing::FreeSlots() const {
  uint32_t free = 0;
  for (uint32_t i = 0; i < geometry_.slot_count; ++i) {
    free += slot(i)->state.load(std::memory_order_acquire) ==
            static_cast<uint32_t>(wire::SlotState::kFree);
  }
  return free;
}

std::chrono::nanoseconds BatchRing::ConsumerWait() const {
  return std::chrono::nanoseconds(
      wire::HeaderAt(region_.get_address())->consumer_wait_ns.load(std::memory_order_relaxed));
}

uint64_t BatchRing::ConsumerWaits() const {
  return wire::HeaderAt(region_.get_address())->consumer_waits.load(std::memory_order_relaxed);
}

uint32_t BatchRing::ReadySlots() const {
  uint32_t ready = 0;
  for (uint32_t i = 0; i < geometry_.slot_count; ++i) {
    ready += slot(i)->state.load(std::memory_order_acquire) ==
             static_cast<uint32_t>(wire::SlotState::kReady);
  }
  return ready;
}

void BatchRing::Close(const Status& reason) {
  auto* header = wire::HeaderAt(region_.get_address());
  if (header->closed.load(std::memory_order_acquire) != 0) return;
  header->close_code = static_cast<int32_t>(reason.code());
  const std::string text = reason.message().substr(0, wire::kMaxErrorText - 1);
  std::memcpy(header->close_reason, text.c_str(), text.size() + 1);
  header->closed.store(1, std::memory_order_release);
  header->ready.post();  // wake a waiting client so it sees the flag
}

int BatchRing::RemoveStaleSegments() {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kSegmentPrefix, 0) != 0) continue;
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) != 0 || st.st_uid != ::geteuid()) continue;
    if (bip::shared_memory_object::remove(name.c_str())) ++removed;
  }
  return removed;
}

}  // namespace galley
