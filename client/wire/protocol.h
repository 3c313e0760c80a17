// The control-plane wire format shared by galleyd and its clients.
//
// Every message is a frame: a fixed 16-byte little-endian header followed by
// `payload_length` bytes of UTF-8 JSON (an object). docs/protocol.md is the
// normative description; this header and that document change together.
// Message numbers are append-only. Everything here is a pure function of its
// arguments and safe to call from any thread.
#ifndef GALLEY_WIRE_PROTOCOL_H_
#define GALLEY_WIRE_PROTOCOL_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "galley/job_spec.h"
#include "galley/status.h"
#include "galley/version.h"

namespace galley::wire {

inline constexpr uint32_t kFrameMagic = 0x594C4C47;  // "GLLY" as little-endian bytes
inline constexpr uint16_t kProtocolVersion = galley::kProtocolVersion;
inline constexpr size_t kFrameHeaderBytes = 16;
// The most any frame may carry: an OpenJob that lists a few million item
// ids, or a reply. Anything bigger is refused before it is read. The public
// figure, which the Python package reads too.
inline constexpr uint32_t kMaxPayloadBytes = galley::kMaxRequestBytes;
// The most a client's other messages may carry (Hello, Query, the job's
// control messages): they hold a few small fields, and a large frame of a
// type that needs none is only a way to make the daemon parse.
inline constexpr uint32_t kMaxControlPayloadBytes = 64u << 10;

enum class MessageType : uint16_t {
  kHello = 1,                // client -> daemon: {protocol_version, client, pid}
  kWelcome = 2,              // daemon -> client: {protocol_version, server_version, pid}
  kError = 3,                // daemon -> client: {code, message}
  kOpenJob = 4,              // client -> daemon: the job spec (docs/protocol.md)
  kJobOpened = 5,            // daemon -> client: segment geometry; carries the segment fd
  kSlotReleased = 6,         // client -> daemon: {} a batch slot became free
  kSeekEpoch = 7,            // client -> daemon: {epoch}
  kEpochSought = 8,          // daemon -> client: {epoch, generation}
  kStatsRequest = 9,         // client -> daemon: {}
  kStats = 10,               // daemon -> client: job and daemon counters
  kQuery = 11,               // galleyctl -> daemon: {what: status|datasets|jobs|cache|plan}
  kQueryReply = 12,          // daemon -> galleyctl: JSON document
  kCloseJob = 13,            // client -> daemon: {} end the job now
  kConsumerReady = 14,       // client -> daemon: {} the consumer waits for its first batch
  kRefreshCredentials = 15,  // client -> daemon: {s3} the job's re-resolved access; no reply
};
inline constexpr uint16_t kMaxMessageType = 15;

std::string_view MessageTypeName(MessageType type);

// The most a frame of `type` may carry: kMaxPayloadBytes for OpenJob and
// the daemon's replies, kMaxControlPayloadBytes for the rest.
uint32_t MaxPayloadBytes(MessageType type);

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint16_t version = kProtocolVersion;
  MessageType type = MessageType::kError;
  uint32_t payload_length = 0;
  uint32_t request_id = 0;  // chosen by the requester, echoed in the reply
};

// Writes `header` into 16 bytes, little-endian whatever the host order.
std::array<std::byte, kFrameHeaderBytes> EncodeFrameHeader(const FrameHeader& header);

// Parses and validates a header: magic, version, known type, the type's
// length limit (MaxPayloadBytes).
// Returns ProtocolError describing the first violation.
Result<FrameHeader> DecodeFrameHeader(std::span<const std::byte, kFrameHeaderBytes> bytes);

}  // namespace galley::wire

#endif  // GALLEY_WIRE_PROTOCOL_H_
