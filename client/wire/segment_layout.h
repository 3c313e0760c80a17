// The layout of a job's shared-memory segment: a header, then a ring of
// batch slots. docs/protocol.md describes it in prose.
//
// The daemon creates the segment, fills slots and publishes them; the client
// maps it (through a descriptor passed over the control socket), takes ready
// slots in publication order and frees them. Cross-process state is only the
// atomics below; wake-ups travel through a socket passed beside the
// segment's descriptor (wire/wakeup_socket.h), never through the segment
// (which the client can write, so the daemon keeps nothing there it must
// trust). Everything else in a slot is written by the daemon before it
// publishes the slot (release) and read by the client after it observes the
// publication (acquire).
#ifndef GALLEY_WIRE_SEGMENT_LAYOUT_H_
#define GALLEY_WIRE_SEGMENT_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "galley/status.h"

namespace galley::wire {

inline constexpr uint32_t kSegmentMagic = 0x47534547;  // "GSEG"
inline constexpr uint32_t kSegmentLayoutVersion = 3;
inline constexpr size_t kSlotAlignment = 4096;
inline constexpr size_t kMaxErrorText = 240;

enum class SlotState : uint32_t {
  kFree = 0,     // the daemon may claim it
  kFilling = 1,  // the daemon is writing it
  kReady = 2,    // published; the client may lease it
  kLeased = 3,   // the client holds it until its tensor is freed
};

enum SlotFlags : uint32_t {
  kLastInEpoch = 1u << 0,  // the last batch of its epoch (may hold 0 samples)
  kEndOfStream = 1u << 1,  // the job has no more epochs after this batch
};

enum class ElementType : uint32_t { kUInt8 = 0, kFloat32 = 1 };
enum class TensorLayout : uint32_t { kNCHW = 0, kNHWC = 1 };

// Per-sample status in a slot (only successfully prepared samples are kept
// in the batch; this records what the daemon skipped).
struct SlotHeader {
  std::atomic<uint32_t> state;  // SlotState
  uint32_t flags;               // SlotFlags
  uint64_t sequence;            // publication order within the job, from 0
  uint64_t generation;          // bumped by each SeekEpoch
  uint64_t epoch;
  uint64_t batch_index;             // index of this batch within its epoch
  uint32_t sample_count;            // samples in the tensor, <= batch capacity
  uint32_t skipped_count;           // samples dropped because they failed
  char first_error[kMaxErrorText];  // NUL-terminated; path and reason of a failure
  // Followed by: uint64_t item_ids[capacity]; int64_t labels[capacity];
  // then, at `tensor_offset` from the slot start, the batch tensor.
};

struct SegmentHeader {
  uint32_t magic;
  uint32_t layout_version;
  uint32_t slot_count;
  uint32_t batch_capacity;
  uint64_t slot_stride;    // bytes from one slot to the next
  uint64_t slots_offset;   // offset of slot 0 from the segment start
  uint64_t tensor_offset;  // offset of the tensor within a slot
  uint64_t sample_bytes;   // bytes of one sample in the tensor
  uint32_t channels, height, width;
  ElementType dtype;
  TensorLayout layout;
  uint32_t reserved;
  uint64_t segment_bytes;
  std::atomic<uint32_t> closed;  // nonzero once the daemon ended the job
  int32_t close_code;            // StatusCode explaining why
  char close_reason[kMaxErrorText];
  // Written by the client, read by the daemon for its statistics only: the
  // time the job's consumer spent waiting for a batch that was not ready
  // yet, and how many of its batches it had to wait for.
  std::atomic<uint64_t> consumer_wait_ns;
  std::atomic<uint64_t> consumer_waits;
};

// Geometry of a segment, computed identically on both sides.
struct SegmentGeometry {
  uint32_t slot_count = 0;
  uint32_t batch_capacity = 0;
  uint64_t sample_bytes = 0;
  uint64_t slots_offset = 0;
  uint64_t tensor_offset = 0;
  uint64_t slot_stride = 0;
  uint64_t segment_bytes = 0;
};

// Computes offsets for `slot_count` slots of `batch_capacity` samples of
// `sample_bytes` each; InvalidArgument when a size is zero or overflows.
Result<SegmentGeometry> ComputeGeometry(uint32_t slot_count, uint32_t batch_capacity,
                                        uint64_t sample_bytes);

// Views of a mapped segment. `base` is the start of the mapping.
inline SegmentHeader* HeaderAt(void* base) { return static_cast<SegmentHeader*>(base); }
inline SlotHeader* SlotAt(void* base, const SegmentGeometry& g, uint32_t slot) {
  return reinterpret_cast<SlotHeader*>(static_cast<std::byte*>(base) + g.slots_offset +
                                       g.slot_stride * slot);
}
inline uint64_t* SlotItemIds(SlotHeader* slot) { return reinterpret_cast<uint64_t*>(slot + 1); }
inline int64_t* SlotLabels(SlotHeader* slot, const SegmentGeometry& g) {
  return reinterpret_cast<int64_t*>(SlotItemIds(slot) + g.batch_capacity);
}
inline std::byte* SlotTensor(SlotHeader* slot, const SegmentGeometry& g) {
  return reinterpret_cast<std::byte*>(slot) + g.tensor_offset;
}

// Checks a mapped header against the geometry the daemon announced and the
// size of the mapping: the client refuses a segment that does not add up.
Status ValidateHeader(const SegmentHeader& header, const SegmentGeometry& expected,
                      uint64_t mapped_bytes);

}  // namespace galley::wire

#endif  // GALLEY_WIRE_SEGMENT_LAYOUT_H_
