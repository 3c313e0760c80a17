#include "galley/remote/remote_value.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <array>
#include <cstring>
#include <initializer_list>

namespace galley {
namespace {

constexpr char kMagic[4] = {'G', 'L', 'Y', 'R'};
constexpr uint8_t kVersion = 2;
// Where the header's MAC lies, and what of the header it covers.
constexpr size_t kSignedHeaderBytes = 32;
constexpr size_t kMacBytes = 32;
static_assert(kSignedHeaderBytes + kMacBytes == kRemoteHeaderBytes);

using MacBytes = std::array<unsigned char, kMacBytes>;

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

// Owns an EVP_MAC_CTX.
struct MacContextDeleter {
  void operator()(EVP_MAC_CTX* context) const { EVP_MAC_CTX_free(context); }
};

// HMAC-SHA256 under `mac_key` of `pieces` in order; false when libcrypto
// cannot compute it (no HMAC or SHA-256 in its providers).
bool Hmac(std::string_view mac_key, std::initializer_list<std::string_view> pieces, MacBytes* out) {
  // Fetched once and shared: a fetched algorithm may be used from any thread.
  static EVP_MAC* const hmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (hmac == nullptr) return false;
  std::unique_ptr<EVP_MAC_CTX, MacContextDeleter> context(EVP_MAC_CTX_new(hmac));
  if (context == nullptr) return false;
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_construct_end()};
  if (EVP_MAC_init(context.get(), reinterpret_cast<const unsigned char*>(mac_key.data()),
                   mac_key.size(), params) != 1) {
    return false;
  }
  for (std::string_view piece : pieces) {
    if (EVP_MAC_update(context.get(), reinterpret_cast<const unsigned char*>(piece.data()),
                       piece.size()) != 1) {
      return false;
    }
  }
  size_t length = 0;
  return EVP_MAC_final(context.get(), out->data(), &length, out->size()) == 1 &&
         length == out->size();
}

// The MAC of a value: its key (length first, so that key and header cannot
// trade bytes), the header up to the MAC, and the payload.
bool ValueMac(std::string_view mac_key, std::string_view key, const char* header,
              std::string_view payload, MacBytes* out) {
  char key_length[4];
  PutU32(key_length, static_cast<uint32_t>(key.size()));
  return Hmac(
      mac_key,
      {std::string_view(key_length, 4), key, std::string_view(header, kSignedHeaderBytes), payload},
      out);
}

Status Damaged(std::string_view key, const std::string& why) {
  return Status::DataLoss("remote value " + std::string(key) + ": " + why);
}

}  // namespace

std::string RemoteKey(const ContentFingerprint& dataset, ItemId item, RemoteForm form) {
  return std::string("galley1:") + (form == RemoteForm::kDecoded ? "d:" : "e:") + dataset.Hex() +
         ":" + std::to_string(item);
}

Result<std::string> EncodeRemoteValue(std::string_view mac_key, std::string_view key,
                                      RemoteForm form, const cache::Blob& blob) {
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
  MacBytes mac;
  if (!ValueMac(mac_key, key, header, std::string_view(header + kRemoteHeaderBytes, payload.size()),
                &mac)) {
    return Status::Internal("libcrypto cannot compute HMAC-SHA256");
  }
  std::memcpy(header + kSignedHeaderBytes, mac.data(), mac.size());
  return value;
}

Result<std::shared_ptr<cache::Blob>> DecodeRemoteValue(std::string_view mac_key,
                                                       std::string_view key, RemoteForm form,
                                                       std::string_view value,
                                                       const RemoteValueLimits& limits) {
  if (value.size() < kRemoteHeaderBytes) {
    return Damaged(key, std::to_string(value.size()) + " bytes, shorter than the header");
  }
  const char* header = value.data();
  if (std::memcmp(header, kMagic, 4) != 0) return Damaged(key, "no GLYR magic");
  const uint8_t version = static_cast<uint8_t>(header[4]);
  if (version == 1) {
    return Damaged(key, "version 1: an older galleyd's, without a MAC");
  }
  if (version != kVersion) return Damaged(key, "version " + std::to_string(version));
  // Nothing else of the value is read before its MAC is checked: a value
  // without the right MAC is not ours, whatever it claims.
  const std::string_view payload = value.substr(kRemoteHeaderBytes);
  MacBytes mac;
  if (!ValueMac(mac_key, key, header, payload, &mac)) {
    return Damaged(key, "libcrypto cannot compute HMAC-SHA256");
  }
  if (CRYPTO_memcmp(mac.data(), header + kSignedHeaderBytes, mac.size()) != 0) {
    return Damaged(key,
                   "MAC mismatch (damaged, stored under another key, or written without this "
                   "deployment's mac_key)");
  }
  if (static_cast<uint8_t>(header[5]) != static_cast<uint8_t>(form)) {
    return Damaged(key, "holds another form");
  }
  if (header[6] != 0 || header[7] != 0 || GetU32(header + 20) != 0) {
    return Damaged(key, "reserved bytes set");
  }
  const uint64_t length = GetU64(header + 24);
  if (length != payload.size()) {
    return Damaged(key, "payload of " + std::to_string(payload.size()) + " bytes, header says " +
                            std::to_string(length));
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
  auto blob = std::make_shared<cache::Blob>();
  blob->bytes.assign(reinterpret_cast<const uint8_t*>(payload.data()),
                     reinterpret_cast<const uint8_t*>(payload.data()) + length);
  blob->width = width;
  blob->height = height;
  blob->channels = channels;
  return blob;
}

}  // namespace galley
