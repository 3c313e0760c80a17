// A field record: the members of one sample besides its image (a shard's
// `.txt`, `.json`, ..., a manifest's other columns), as they travel from the
// dataset through the cache tiers to a job's slot (docs/protocol.md §2.1).
//
// A record holds the values of a job's fields in the order the job named
// them, each as an unsigned 64-bit little-endian length followed by that
// many bytes. The names are the job's own (JobSpec::fields), so they do
// not travel. The daemon writes records; the client splits them and
// refuses one that does not add up, since the segment is not trusted.
//
// Thread-safety: plain functions of their arguments.
#ifndef GALLEY_WIRE_FIELD_RECORD_H_
#define GALLEY_WIRE_FIELD_RECORD_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "galley/status.h"
#include "wire/segment_layout.h"

namespace galley::wire {

// Appends one value to `record`.
void AppendFieldValue(std::vector<uint8_t>* record, std::span<const uint8_t> value);

// Appends a value of `size` bytes for the caller to fill, and returns
// them: a reader writes a member straight into its record this way instead
// of through a buffer of its own. The span is valid until `record` next
// grows; reserve the whole record first to fill several.
std::span<uint8_t> AppendFieldSpace(std::vector<uint8_t>* record, uint64_t size);

// The `count` values of `record`, as views into it. ProtocolError when the
// record does not hold exactly `count` values.
Result<std::vector<std::span<const uint8_t>>> SplitFieldRecord(std::span<const uint8_t> record,
                                                               size_t count);

// Sample `position`'s record in the field area of `slot`, a slot of a
// segment of geometry `g` with a field area. Reads each end offset once (the
// peer may be writing them); ProtocolError when they decrease or pass
// g.field_bytes, InvalidArgument for a position past the batch capacity.
Result<std::span<const uint8_t>> SlotFieldRecord(SlotHeader* slot, const SegmentGeometry& g,
                                                 uint32_t position);

}  // namespace galley::wire

#endif  // GALLEY_WIRE_FIELD_RECORD_H_
