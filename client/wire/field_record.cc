#include "wire/field_record.h"

#include <string>

namespace galley::wire {

namespace {

void AppendLength(std::vector<uint8_t>* record, uint64_t size) {
  for (int i = 0; i < 8; ++i) record->push_back(static_cast<uint8_t>(size >> (8 * i)));
}

}  // namespace

void AppendFieldValue(std::vector<uint8_t>* record, std::span<const uint8_t> value) {
  AppendLength(record, value.size());
  record->insert(record->end(), value.begin(), value.end());
}

std::span<uint8_t> AppendFieldSpace(std::vector<uint8_t>* record, uint64_t size) {
  AppendLength(record, size);
  const size_t at = record->size();
  record->resize(at + size);
  return std::span<uint8_t>(*record).subspan(at);
}

Result<std::vector<std::span<const uint8_t>>> SplitFieldRecord(std::span<const uint8_t> record,
                                                               size_t count) {
  std::vector<std::span<const uint8_t>> values;
  values.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    if (record.size() < 8) {
      return Status::ProtocolError("a field record holds " + std::to_string(i) + " values, not " +
                                   std::to_string(count));
    }
    uint64_t size = 0;
    for (int b = 0; b < 8; ++b) size |= uint64_t{record[b]} << (8 * b);
    record = record.subspan(8);
    if (size > record.size()) return Status::ProtocolError("a field value overruns its record");
    values.push_back(record.first(size));
    record = record.subspan(size);
  }
  if (!record.empty()) {
    return Status::ProtocolError("a field record holds more than " + std::to_string(count) +
                                 " values");
  }
  return values;
}

Result<std::span<const uint8_t>> SlotFieldRecord(SlotHeader* slot, const SegmentGeometry& g,
                                                 uint32_t position) {
  if (g.field_bytes == 0 || position >= g.batch_capacity) {
    return Status::InvalidArgument("no field record " + std::to_string(position) + " in the slot");
  }
  const volatile uint64_t* ends = SlotFieldEnds(slot, g);
  const uint64_t begin = position == 0 ? 0 : ends[position - 1];
  const uint64_t end = ends[position];
  if (begin > end || end > g.field_bytes) {
    return Status::ProtocolError("a slot's field records do not add up");
  }
  const auto* data = reinterpret_cast<const uint8_t*>(SlotFieldData(slot, g));
  return std::span<const uint8_t>(data + begin, end - begin);
}

}  // namespace galley::wire
