#include "galley/scheduling/batch_ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <new>

#include "galley/errno_text.h"
#include "galley/populate.h"

namespace galley {
namespace {

constexpr const char* kSegmentPrefix = "galley-";

Status SysError(const std::string& what, int error) {
  return Status::Internal(what + ": " + ErrnoText(error));
}

}  // namespace

Result<std::unique_ptr<BatchRing>> BatchRing::Create(const wire::SegmentGeometry& geometry,
                                                     const TensorShape& shape, uid_t owner) {
  UniqueFd fd(::memfd_create("galley-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return SysError("memfd_create for the batch ring", errno);
  const auto bytes = static_cast<off_t>(geometry.segment_bytes);
  if (::ftruncate(fd.get(), bytes) != 0) return SysError("ftruncate of the batch ring", errno);
  // Reserve every page now: without this a full tmpfs or memory cgroup
  // shows up as SIGBUS on the first write to a slot.
  if (int err = ::posix_fallocate(fd.get(), 0, bytes); err != 0) {
    return Status::ResourceExhausted(
        "cannot reserve " + std::to_string(geometry.segment_bytes) +
        " bytes of shared memory for the batch ring: " + ErrnoText(err));
  }
  // The client gets a read-write descriptor; with these seals it can write
  // the pages but never change the size under the daemon's mapping, nor
  // add a seal (F_SEAL_FUTURE_WRITE would refuse the daemon's writes).
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return SysError("sealing the batch ring", errno);
  }
  if (::geteuid() == 0 && owner != 0 && ::fchown(fd.get(), owner, static_cast<gid_t>(-1)) != 0) {
    return SysError("fchown of the batch ring", errno);
  }
  GALLEY_ASSIGN_OR_RETURN(auto wakeup, wire::WakeupSender::Create());
  void* base =
      ::mmap(nullptr, geometry.segment_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) {
    return Status::ResourceExhausted("cannot map the batch ring (" +
                                     std::to_string(geometry.segment_bytes) +
                                     " bytes): " + ErrnoText(errno));
  }
  // Clear and map every page now, on the registering connection's thread:
  // tmpfs zeroes a fallocated page only at its first fault, which would
  // otherwise land in the pipeline threads' writes of the job's first
  // batches (about 2.5 us a page, and several times that where a virtual
  // machine's memory is touched for the first time). Before Linux 5.14
  // the pages fault in as they are written.
  (void)PopulateWrite(base, geometry.segment_bytes);
  wire::MakeSegmentHeader(base, geometry, shape);
  auto ring = std::unique_ptr<BatchRing>(new BatchRing(
      geometry, std::move(fd), std::move(wakeup.first), std::move(wakeup.second), base));
  for (uint32_t i = 0; i < geometry.slot_count; ++i) new (ring->slot(i)) wire::SlotHeader{};
  return ring;
}

BatchRing::~BatchRing() { ::munmap(base_, geometry_.segment_bytes); }

void BatchRing::DropClientDescriptors() {
  segment_fd_.Reset();
  client_wakeup_end_.Reset();
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

void BatchRing::Publish(uint32_t index, const BatchDescription& batch) {
  auto* s = slot(index);
  const auto count =
      static_cast<uint32_t>(std::min<size_t>(batch.items.size(), geometry_.batch_capacity));
  uint64_t* ids = wire::SlotItemIds(s);
  int64_t* labels = wire::SlotLabels(s, geometry_);
  for (uint32_t pos = 0; pos < count; ++pos) {
    ids[pos] = batch.items[pos];
    labels[pos] = pos < batch.labels.size() ? batch.labels[pos] : 0;
  }
  if (geometry_.field_bytes > 0) {
    // The scheduler checks the batch's records fit (FieldRecordsFit); one
    // that would not is left empty, which the client refuses.
    uint64_t* ends = wire::SlotFieldEnds(s, geometry_);
    std::byte* data = wire::SlotFieldData(s, geometry_);
    uint64_t used = 0;
    for (uint32_t pos = 0; pos < count; ++pos) {
      if (pos < batch.fields.size() && batch.fields[pos].size() <= geometry_.field_bytes - used) {
        std::memcpy(data + used, batch.fields[pos].data(), batch.fields[pos].size());
        used += batch.fields[pos].size();
      }
      ends[pos] = used;
    }
  }
  s->flags = batch.flags;
  s->generation = batch.generation;
  s->epoch = batch.epoch;
  s->batch_index = batch.batch_index;
  s->sample_count = count;
  s->skipped_count = batch.skipped;
  const size_t n = std::min(batch.first_error.size(), wire::kMaxErrorText - 1);
  std::copy_n(batch.first_error.data(), n, s->first_error);
  s->first_error[n] = '\0';
  s->sequence = next_sequence_++;
  // The state before the wake-up: a client that drains its wake-ups and
  // then scans the states cannot miss this slot.
  s->state.store(static_cast<uint32_t>(wire::SlotState::kReady), std::memory_order_release);
  wakeup_.Send();
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
      wire::HeaderAt(base_)->consumer_wait_ns.load(std::memory_order_relaxed));
}

uint64_t BatchRing::ConsumerWaits() const {
  return wire::HeaderAt(base_)->consumer_waits.load(std::memory_order_relaxed);
}

uint32_t BatchRing::ReadySlots() const {
  uint32_t ready = 0;
  for (uint32_t i = 0; i < geometry_.slot_count; ++i) {
    ready += slot(i)->state.load(std::memory_order_acquire) ==
             static_cast<uint32_t>(wire::SlotState::kReady);
  }
  return ready;
}

uint32_t BatchRing::ReadySlotsOf(uint64_t generation) const {
  uint32_t ready = 0;
  for (uint32_t i = 0; i < geometry_.slot_count; ++i) {
    const wire::SlotHeader* s = slot(i);
    ready += s->state.load(std::memory_order_acquire) ==
                 static_cast<uint32_t>(wire::SlotState::kReady) &&
             s->generation == generation;
  }
  return ready;
}

void BatchRing::Close(const Status& reason) {
  if (closed_.exchange(true)) return;
  auto* header = wire::HeaderAt(base_);
  header->close_code = static_cast<int32_t>(reason.code());
  const std::string text = reason.message().substr(0, wire::kMaxErrorText - 1);
  std::memcpy(header->close_reason, text.c_str(), text.size() + 1);
  header->closed.store(1, std::memory_order_release);
  wakeup_.Send();  // wake a waiting client so it sees the flag
}

int BatchRing::RemoveStaleSegments() {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kSegmentPrefix, 0) != 0) continue;
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) != 0 || st.st_uid != ::geteuid()) continue;
    if (std::filesystem::remove(entry.path(), ec)) ++removed;
  }
  return removed;
}

}  // namespace galley
