#include "wire/protocol.h"

#include <string>

namespace galley::wire {
namespace {

void PutLe(std::byte* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
}

uint64_t GetLe(const std::byte* in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

}  // namespace

std::string_view MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kHello:
      return "Hello";
    case MessageType::kWelcome:
      return "Welcome";
    case MessageType::kError:
      return "Error";
    case MessageType::kOpenJob:
      return "OpenJob";
    case MessageType::kJobOpened:
      return "JobOpened";
    case MessageType::kSlotReleased:
      return "SlotReleased";
    case MessageType::kSeekEpoch:
      return "SeekEpoch";
    case MessageType::kEpochSought:
      return "EpochSought";
    case MessageType::kStatsRequest:
      return "StatsRequest";
    case MessageType::kStats:
      return "Stats";
    case MessageType::kQuery:
      return "Query";
    case MessageType::kQueryReply:
      return "QueryReply";
    case MessageType::kCloseJob:
      return "CloseJob";
    case MessageType::kConsumerReady:
      return "ConsumerReady";
    case MessageType::kRefreshCredentials:
      return "RefreshCredentials";
  }
  return "Unknown";
}

uint32_t MaxPayloadBytes(MessageType type) {
  switch (type) {
    case MessageType::kOpenJob:
    case MessageType::kWelcome:
    case MessageType::kError:
    case MessageType::kJobOpened:
    case MessageType::kEpochSought:
    case MessageType::kStats:
    case MessageType::kQueryReply:
      return kMaxPayloadBytes;
    case MessageType::kHello:
    case MessageType::kSlotReleased:
    case MessageType::kSeekEpoch:
    case MessageType::kStatsRequest:
    case MessageType::kQuery:
    case MessageType::kCloseJob:
    case MessageType::kConsumerReady:
    case MessageType::kRefreshCredentials:
      return kMaxControlPayloadBytes;
  }
  return kMaxControlPayloadBytes;
}

std::array<std::byte, kFrameHeaderBytes> EncodeFrameHeader(const FrameHeader& header) {
  std::array<std::byte, kFrameHeaderBytes> out{};
  PutLe(out.data() + 0, header.magic, 4);
  PutLe(out.data() + 4, header.version, 2);
  PutLe(out.data() + 6, static_cast<uint16_t>(header.type), 2);
  PutLe(out.data() + 8, header.payload_length, 4);
  PutLe(out.data() + 12, header.request_id, 4);
  return out;
}

Result<FrameHeader> DecodeFrameHeader(std::span<const std::byte, kFrameHeaderBytes> bytes) {
  FrameHeader header;
  header.magic = static_cast<uint32_t>(GetLe(bytes.data() + 0, 4));
  header.version = static_cast<uint16_t>(GetLe(bytes.data() + 4, 2));
  const auto type = static_cast<uint16_t>(GetLe(bytes.data() + 6, 2));
  header.payload_length = static_cast<uint32_t>(GetLe(bytes.data() + 8, 4));
  header.request_id = static_cast<uint32_t>(GetLe(bytes.data() + 12, 4));
  if (header.magic != kFrameMagic) {
    return Status::ProtocolError("bad frame magic (not a galley peer?)");
  }
  if (header.version != kProtocolVersion) {
    return Status::ProtocolError("peer speaks galley protocol " + std::to_string(header.version) +
                                 ", this side speaks protocol " + std::to_string(kProtocolVersion));
  }
  if (type == 0 || type > kMaxMessageType) {
    return Status::ProtocolError("unknown message type " + std::to_string(type));
  }
  header.type = static_cast<MessageType>(type);
  if (header.payload_length > MaxPayloadBytes(header.type)) {
    return Status::ProtocolError("a " + std::string(MessageTypeName(header.type)) + " frame of " +
                                 std::to_string(header.payload_length) +
                                 " bytes exceeds its limit of " +
                                 std::to_string(MaxPayloadBytes(header.type)) + " bytes");
  }
  return header;
}

}  // namespace galley::wire
