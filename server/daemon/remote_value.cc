#include "server/daemon/remote_value.h"

#include <xxhash.h>

#include <cstring>

namespace galley {
namespace {

constexpr char kMagic[4] = {'G', 'L', 'Y', 'R'};
constexpr uint8_t kVersion = 1;

void PutU32(char* at, uint32_t value) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<char>(value >> (8 * i));
}

void PutU64(char* at, uint64_t value) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<char>(value >> (8 * i));
}

uint32_t GetU32(const char* at) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= uint32_t{static_cast<unsigned char>(at[i])} << (8 * i);
  return value;
}

uint64_t GetU64(const char* at) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t{static_cast<unsigned char>(at[i])} << (8 * i);
  return value;
}

// The checksum of a value: its payload, seeded with the key and the header
// up to the checksum field.
uint64_t Checksum(std::string_view key, const char* header, const void* payload, size_t size) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, key.data(), key.size());
  XXH3_64bits_update(state, header, 32);
  const uint64_t seed = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return XXH3_64bits_withSeed(payload, size, seed);
}

Status Damaged(std::string_view key, const std::string& why) {
  return Status::DataLoss("remote value " + std::string(key) + ": " + why);
}

}  // namespace

std::string_view RemoteFormName(RemoteForm form) {
  return form == RemoteForm::kDecoded ? "decoded" : "encoded";
}

std::string RemoteKey(const ContentFingerprint& dataset, ItemId item, RemoteForm form) {
  return std::string("galley1:") + (form == RemoteForm::kDecoded ? "d:" : "e:") + dataset.Hex() +
         ":" + std::to_string(item);
}

std::string EncodeRemoteValue(std::string_view key, RemoteForm form, const cache::Blob& blob) {
  const std::span<const uint8_t> payload = blob.payload();
  std::string value(kRemoteHeaderBytes + payload.size(), '\0');
  char* header = value.data();
  std::memcpy(header, kMagic, 4);
  header[4] = static_cast<char>(kVersion);
  header[5] = static_cast<char>(form);
  PutU32(header + 8, blob.width);
  PutU32(header + 12, blob.height);
  PutU32(header + 16, blob.channels);
  PutU64(header + 24, payload.size());
  if (!payload.empty()) {
    std::memcpy(header + kRemoteHeaderBytes, payload.data(), payload.size());
  }
  PutU64(header + 32, Checksum(key, header, payload.data(), payload.size()));
  return value;
}

Result<std::shared_ptr<cache::Blob>> DecodeRemoteValue(std::string_view key, RemoteForm form,
                                                       std::string_view value,
                                                       const RemoteValueLimits& limits) {
  if (value.size() < kRemoteHeaderBytes) {
    return Damaged(key, std::to_string(value.size()) + " bytes, shorter than the header");
  }
  const char* header = value.data();
  if (std::memcmp(header, kMagic, 4) != 0) return Damaged(key, "no GLYR magic");
  if (static_cast<uint8_t>(header[4]) != kVersion) {
    return Damaged(key, "version " + std::to_string(static_cast<uint8_t>(header[4])));
  }
  if (static_cast<uint8_t>(header[5]) != static_cast<uint8_t>(form)) {
    return Damaged(key, "holds another form");
  }
  if (header[6] != 0 || header[7] != 0 || GetU32(header + 20) != 0) {
    return Damaged(key, "reserved bytes set");
  }
  const uint64_t length = GetU64(header + 24);
  if (length != value.size() - kRemoteHeaderBytes) {
    return Damaged(key, "payload of " + std::to_string(value.size() - kRemoteHeaderBytes) +
                            " bytes, header says " + std::to_string(length));
  }
  const uint32_t width = GetU32(header + 8), height = GetU32(header + 12),
                 channels = GetU32(header + 16);
  if (form == RemoteForm::kEncoded) {
    if (width != 0 || height != 0 || channels != 0) return Damaged(key, "encoded with dimensions");
    if (length > limits.max_encoded_bytes) return Damaged(key, "larger than a file may be");
  } else {
    const uint64_t pixels = uint64_t{width} * height;
    if (channels != 3 || pixels == 0 || pixels > limits.max_pixels || length != pixels * 3) {
      return Damaged(key, "decoded dimensions " + std::to_string(width) + "x" +
                              std::to_string(height) + "x" + std::to_string(channels) +
                              " do not match its " + std::to_string(length) + " bytes");
    }
  }
  const char* payload = header + kRemoteHeaderBytes;
  if (Checksum(key, header, payload, length) != GetU64(header + 32)) {
    return Damaged(key, "checksum mismatch");
  }
  auto blob = std::make_shared<cache::Blob>();
  blob->bytes.assign(reinterpret_cast<const uint8_t*>(payload),
                     reinterpret_cast<const uint8_t*>(payload) + length);
  blob->width = width;
  blob->height = height;
  blob->channels = channels;
  return blob;
}

}  // namespace galley
