// Fuzz target: one control-socket frame as galleyd reads it. The first 16
// bytes are the frame header; the rest is the payload, parsed as a JSON
// object and then as each structured message body. Also exercises the
// UTF-8 checks and the never-throwing encoder on the raw bytes.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "wire/messages.h"
#include "wire/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galley;
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  (void)wire::IsValidUtf8(raw);
  (void)wire::EscapeBytes(raw.substr(0, 4096));
  if (size < wire::kFrameHeaderBytes) return 0;
  std::span<const std::byte, wire::kFrameHeaderBytes> head(reinterpret_cast<const std::byte*>(data),
                                                           wire::kFrameHeaderBytes);
  (void)wire::DecodeFrameHeader(head);
  auto body = wire::ParseObject(raw.substr(wire::kFrameHeaderBytes));
  if (!body.ok()) return 0;
  (void)wire::DumpJson(*body);
  (void)wire::EncodeJson(*body);
  if (auto spec = wire::JobSpecFromJson(*body); spec.ok()) {
    (void)wire::DumpJson(wire::JobSpecToJson(*spec));
  }
  if (auto info = wire::JobInfoFromJson(*body); info.ok()) {
    (void)wire::DumpJson(wire::JobInfoToJson(*info));
  }
  (void)wire::StatusFromErrorJson(*body);
  return 0;
}
