#include "wire/segment_layout.h"

#include <limits>
#include <new>
#include <string>

namespace galley::wire {
namespace {

constexpr uint64_t AlignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

bool MulOverflows(uint64_t a, uint64_t b) {
  return b != 0 && a > std::numeric_limits<uint64_t>::max() / b;
}

}  // namespace

Result<SegmentGeometry> ComputeGeometry(uint32_t slot_count, uint32_t batch_capacity,
                                        uint64_t sample_bytes, uint64_t field_bytes) {
  if (slot_count == 0 || batch_capacity == 0 || sample_bytes == 0) {
    return Status::InvalidArgument("segment needs at least one slot, sample and byte");
  }
  if (MulOverflows(sample_bytes, batch_capacity)) {
    return Status::InvalidArgument("batch tensor size overflows");
  }
  SegmentGeometry g;
  g.slot_count = slot_count;
  g.batch_capacity = batch_capacity;
  g.sample_bytes = sample_bytes;
  g.slots_offset = AlignUp(sizeof(SegmentHeader), kSlotAlignment);
  const uint64_t meta =
      sizeof(SlotHeader) + uint64_t{batch_capacity} * (sizeof(uint64_t) + sizeof(int64_t));
  g.tensor_offset = AlignUp(meta, kSlotAlignment);
  const uint64_t tensor = sample_bytes * batch_capacity;
  if (tensor > (uint64_t{1} << 40)) return Status::InvalidArgument("batch tensor too large");
  g.slot_stride = AlignUp(g.tensor_offset + tensor, kSlotAlignment);
  if (field_bytes > 0) {
    if (field_bytes > (uint64_t{1} << 32)) return Status::InvalidArgument("field area too large");
    g.fields_offset = g.slot_stride;
    g.field_bytes = field_bytes;
    g.slot_stride =
        AlignUp(g.fields_offset + uint64_t{batch_capacity} * sizeof(uint64_t) + field_bytes,
                kSlotAlignment);
  }
  if (MulOverflows(g.slot_stride, slot_count)) return Status::InvalidArgument("segment overflows");
  g.segment_bytes = g.slots_offset + g.slot_stride * slot_count;
  return g;
}

SegmentHeader* MakeSegmentHeader(void* base, const SegmentGeometry& g, const SampleShape& shape) {
  return new (base) SegmentHeader{
      .magic = kSegmentMagic,
      .layout_version = kSegmentLayoutVersion,
      .slot_count = g.slot_count,
      .batch_capacity = g.batch_capacity,
      .slot_stride = g.slot_stride,
      .slots_offset = g.slots_offset,
      .tensor_offset = g.tensor_offset,
      .sample_bytes = g.sample_bytes,
      .channels = shape.channels,
      .height = shape.height,
      .width = shape.width,
      .dtype = shape.dtype,
      .layout = shape.layout,
      .reserved = 0,
      .segment_bytes = g.segment_bytes,
      .closed = 0,
      .close_code = 0,
      .close_reason = {},
      .consumer_wait_ns = 0,
      .consumer_waits = 0,
      .fields_offset = g.fields_offset,
      .field_bytes = g.field_bytes,
  };
}

Status ValidateHeader(const SegmentHeader& header, const SegmentGeometry& expected,
                      uint64_t mapped_bytes) {
  if (header.magic != kSegmentMagic || header.layout_version != kSegmentLayoutVersion) {
    return Status::ProtocolError("shared-memory segment has an unknown layout");
  }
  if (header.slot_count != expected.slot_count ||
      header.batch_capacity != expected.batch_capacity ||
      header.sample_bytes != expected.sample_bytes || header.slot_stride != expected.slot_stride ||
      header.slots_offset != expected.slots_offset ||
      header.tensor_offset != expected.tensor_offset ||
      header.fields_offset != expected.fields_offset ||
      header.field_bytes != expected.field_bytes ||
      header.segment_bytes != expected.segment_bytes || expected.segment_bytes > mapped_bytes) {
    return Status::ProtocolError("shared-memory segment geometry does not match the announcement");
  }
  return Status::Ok();
}

}  // namespace galley::wire
