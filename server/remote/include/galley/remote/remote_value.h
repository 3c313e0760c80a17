// RemoteValue: how one cache entry is laid out in the remote tier, and the
// keys it is stored under (docs/cache.md, "The remote tier").
//
// Key: "galley1:<form>:<fingerprint>:<item>", form "e" (the file's bytes) or
// "d" (decoded RGB pixels), the dataset's content fingerprint in 32 hex
// digits and the item id in decimal: at most 62 bytes, within memcached's
// 250, with no spaces or control characters.
//
// Value: a 64-byte header, all integers little-endian, then the payload:
//    0  magic "GLYR"       4  version (2)      5  form (1 encoded, 2 decoded)
//    6  reserved (0, 2 B)  8  width (u32)     12  height (u32)
//   16  channels (u32)    20  reserved (0, 4 B)
//   24  payload length (u64)
//   32  MAC (32 B): HMAC-SHA256, under the deployment's key (the
//       credentials file's mac_key), of the key's length (u32) and bytes,
//       header bytes 0..31 and the payload
// Anyone who can write to the servers can store any bytes, so a value is
// trusted only when its MAC is right: only a holder of the key can make one.
// The MAC covers the key, so a genuine value moved to another key (or form)
// is refused, and the version and form bytes, so a value of another layout is
// never read as this one. Version 1 values (an unkeyed checksum) are refused
// like damaged ones. Encoded values have width, height and channels 0;
// decoded values have channels 3 and exactly width * height * 3 payload
// bytes.
//
// Built only with the remote tier (GALLEY_REMOTE_TIER): it links libcrypto.
// Free functions without shared state: thread-safe.
#ifndef GALLEY_SERVER_REMOTE_REMOTE_VALUE_H_
#define GALLEY_SERVER_REMOTE_REMOTE_VALUE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "galley/cache/blob.h"
#include "galley/dataset/content_fingerprint.h"
#include "galley/ids.h"
#include "galley/status.h"

namespace galley {

// What a remote entry holds.
enum class RemoteForm : uint8_t { kEncoded = 1, kDecoded = 2 };

// "encoded" or "decoded".
inline std::string_view RemoteFormName(RemoteForm form) {
  return form == RemoteForm::kDecoded ? "decoded" : "encoded";
}

inline constexpr size_t kRemoteHeaderBytes = 64;

std::string RemoteKey(const ContentFingerprint& dataset, ItemId item, RemoteForm form);

// The header and payload of `blob` stored under `key`, signed with
// `mac_key`, ready to send. Internal when libcrypto cannot compute the MAC.
Result<std::string> EncodeRemoteValue(std::string_view mac_key, std::string_view key,
                                      RemoteForm form, const cache::Blob& blob);

// Limits a value must respect besides its own consistency.
struct RemoteValueLimits {
  uint64_t max_encoded_bytes = uint64_t{256} << 20;  // Dataset::kMaxFileBytes
  uint64_t max_pixels = 178956970;                   // DecodeOptions' pixel limit
};

// The blob `value` holds when it was stored under `key` as `form` by a
// holder of `mac_key`. DataLoss, saying what is wrong, for a short, long,
// damaged, foreign or forged value.
Result<std::shared_ptr<cache::Blob>> DecodeRemoteValue(std::string_view mac_key,
                                                       std::string_view key, RemoteForm form,
                                                       std::string_view value,
                                                       const RemoteValueLimits& limits);

}  // namespace galley

#endif  // GALLEY_SERVER_REMOTE_REMOTE_VALUE_H_
