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
#include <type_traits>

#include "galley/status.h"

namespace galley::wire {

inline constexpr uint32_t kSegmentMagic = 0x47534547;  // "GSEG"
inline constexpr uint32_t kSegmentLayoutVersion = 4;
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
  // then, at `tensor_offset` from the slot start, the batch tensor; then,
  // for a job with fields, at `fields_offset`: uint64_t field_ends[capacity]
  // and `field_bytes` of field records (wire/field_record.h), sample i's
  // record being [field_ends[i-1], field_ends[i]) (from 0 for i = 0).
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
  // Where a slot's field area starts and the bytes of records it holds; 0
  // and 0 for a job without fields.
  uint64_t fields_offset;
  uint64_t field_bytes;
};

// The daemon and the client may be built apart (a pip-installed client
// against a packaged galleyd), so every offset below is part of the layout
// version, not a choice of the compiler: a field moved, resized or padded
// differently fails the build instead of reading the other side's bytes.
// The atomics must be lock-free: only lock-free atomics are meant to be
// address-free, that is, to work between two processes that map the same
// pages at different addresses.
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t));
static_assert(sizeof(SlotState) == 4 && sizeof(ElementType) == 4 && sizeof(TensorLayout) == 4);

static_assert(std::is_standard_layout_v<SlotHeader>);
static_assert(offsetof(SlotHeader, state) == 0);
static_assert(offsetof(SlotHeader, flags) == 4);
static_assert(offsetof(SlotHeader, sequence) == 8);
static_assert(offsetof(SlotHeader, generation) == 16);
static_assert(offsetof(SlotHeader, epoch) == 24);
static_assert(offsetof(SlotHeader, batch_index) == 32);
static_assert(offsetof(SlotHeader, sample_count) == 40);
static_assert(offsetof(SlotHeader, skipped_count) == 44);
static_assert(offsetof(SlotHeader, first_error) == 48);
static_assert(sizeof(SlotHeader) == 288);

static_assert(std::is_standard_layout_v<SegmentHeader>);
static_assert(offsetof(SegmentHeader, magic) == 0);
static_assert(offsetof(SegmentHeader, layout_version) == 4);
static_assert(offsetof(SegmentHeader, slot_count) == 8);
static_assert(offsetof(SegmentHeader, batch_capacity) == 12);
static_assert(offsetof(SegmentHeader, slot_stride) == 16);
static_assert(offsetof(SegmentHeader, slots_offset) == 24);
static_assert(offsetof(SegmentHeader, tensor_offset) == 32);
static_assert(offsetof(SegmentHeader, sample_bytes) == 40);
static_assert(offsetof(SegmentHeader, channels) == 48);
static_assert(offsetof(SegmentHeader, height) == 52);
static_assert(offsetof(SegmentHeader, width) == 56);
static_assert(offsetof(SegmentHeader, dtype) == 60);
static_assert(offsetof(SegmentHeader, layout) == 64);
static_assert(offsetof(SegmentHeader, reserved) == 68);
static_assert(offsetof(SegmentHeader, segment_bytes) == 72);
static_assert(offsetof(SegmentHeader, closed) == 80);
static_assert(offsetof(SegmentHeader, close_code) == 84);
static_assert(offsetof(SegmentHeader, close_reason) == 88);
static_assert(offsetof(SegmentHeader, consumer_wait_ns) == 328);
static_assert(offsetof(SegmentHeader, consumer_waits) == 336);
static_assert(offsetof(SegmentHeader, fields_offset) == 344);
static_assert(offsetof(SegmentHeader, field_bytes) == 352);
static_assert(sizeof(SegmentHeader) == 360);

// Geometry of a segment, computed identically on both sides.
struct SegmentGeometry {
  uint32_t slot_count = 0;
  uint32_t batch_capacity = 0;
  uint64_t sample_bytes = 0;
  uint64_t slots_offset = 0;
  uint64_t tensor_offset = 0;
  uint64_t slot_stride = 0;
  uint64_t segment_bytes = 0;
  uint64_t fields_offset = 0;  // 0 without fields
  uint64_t field_bytes = 0;
};

// Computes offsets for `slot_count` slots of `batch_capacity` samples of
// `sample_bytes` each, with `field_bytes` of field records per slot (0: no
// field area); InvalidArgument when a size is zero or overflows.
Result<SegmentGeometry> ComputeGeometry(uint32_t slot_count, uint32_t batch_capacity,
                                        uint64_t sample_bytes, uint64_t field_bytes = 0);

// What a segment's samples are, as its header records them.
struct SampleShape {
  uint32_t channels = 3, height = 0, width = 0;
  ElementType dtype = ElementType::kUInt8;
  TensorLayout layout = TensorLayout::kNCHW;
};

// Writes the header of a new segment of geometry `g` whose samples are
// `shape` at `base`, the start of its mapping: every field set, the job
// open, no consumer wait counted yet. Whoever makes a segment (galleyd's
// BatchRing, a test's fake daemon) writes its header with this, so that a
// new field is set in one place. The slots are left as they are.
SegmentHeader* MakeSegmentHeader(void* base, const SegmentGeometry& g, const SampleShape& shape);

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
// The field area of a job with fields: the records' end offsets, then the
// records.
inline uint64_t* SlotFieldEnds(SlotHeader* slot, const SegmentGeometry& g) {
  return reinterpret_cast<uint64_t*>(reinterpret_cast<std::byte*>(slot) + g.fields_offset);
}
inline std::byte* SlotFieldData(SlotHeader* slot, const SegmentGeometry& g) {
  return reinterpret_cast<std::byte*>(SlotFieldEnds(slot, g) + g.batch_capacity);
}

// Checks a mapped header against the geometry the daemon announced and the
// size of the mapping: the client refuses a segment that does not add up.
Status ValidateHeader(const SegmentHeader& header, const SegmentGeometry& expected,
                      uint64_t mapped_bytes);

}  // namespace galley::wire

#endif  // GALLEY_WIRE_SEGMENT_LAYOUT_H_
