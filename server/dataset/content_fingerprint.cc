#include "galley/dataset/content_fingerprint.h"

#include <xxhash.h>

#include <cstdio>

namespace galley {

struct ContentFingerprintBuilder::State {
  XXH3_state_t* xxh = XXH3_createState();
  ~State() { XXH3_freeState(xxh); }
};

std::string ContentFingerprint::Hex() const {
  char text[33];
  std::snprintf(text, sizeof(text), "%016llx%016llx", static_cast<unsigned long long>(high),
                static_cast<unsigned long long>(low));
  return text;
}

ContentFingerprintBuilder::ContentFingerprintBuilder(std::string_view kind)
    : state_(std::make_unique<State>()) {
  XXH3_128bits_reset(state_->xxh);
  AddString("galley-content-v1");
  AddString(kind);
}

ContentFingerprintBuilder::~ContentFingerprintBuilder() = default;

void ContentFingerprintBuilder::AddInteger(uint64_t value) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(value >> (8 * i));
  XXH3_128bits_update(state_->xxh, bytes, sizeof(bytes));
}

void ContentFingerprintBuilder::AddString(std::string_view text) {
  AddInteger(text.size());
  XXH3_128bits_update(state_->xxh, text.data(), text.size());
}

ContentFingerprint ContentFingerprintBuilder::Finish() const {
  const XXH128_hash_t hash = XXH3_128bits_digest(state_->xxh);
  return {hash.high64, hash.low64};
}

}  // namespace galley
