// Fuzz target: the shared-memory segment checks. The first 12 bytes choose
// a geometry (slot count, batch capacity, sample bytes); the rest is what a
// peer left in the segment header, validated against it, and split as a
// field record.
#include <cstdint>
#include <cstring>
#include <vector>

#include "wire/field_record.h"
#include "wire/segment_layout.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galley;
  if (size < 12) return 0;
  uint32_t slots, capacity, sample;
  std::memcpy(&slots, data, 4);
  std::memcpy(&capacity, data + 4, 4);
  std::memcpy(&sample, data + 8, 4);
  auto geometry = wire::ComputeGeometry(slots % 1024, capacity % 65536, sample);
  // The header bytes as the peer left them (zero-padded to a full header).
  std::vector<uint8_t> bytes(sizeof(wire::SegmentHeader), 0);
  std::memcpy(bytes.data(), data + 12, std::min(size - 12, bytes.size()));
  wire::SegmentHeader header;
  std::memcpy(static_cast<void*>(&header), bytes.data(), sizeof(header));
  const wire::SegmentGeometry g = geometry.ok() ? *geometry : wire::SegmentGeometry{};
  (void)wire::ValidateHeader(header, g, header.segment_bytes);
  // The same bytes as a slot's field record, split as the client splits
  // what a peer wrote there.
  (void)wire::SplitFieldRecord(std::span<const uint8_t>(data + 12, size - 12), data[0] % 8);
  return 0;
}
