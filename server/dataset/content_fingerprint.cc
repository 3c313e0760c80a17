#include "galley/dataset/content_fingerprint.h"

#include <sys/vfs.h>
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
  // v2: paths are absolute, and each file's change time and inode count.
  AddString("galley-content-v2");
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

void ContentFingerprintBuilder::AddFileOrigin(const struct stat& info, bool inode_kept) {
  AddInteger(static_cast<uint64_t>(info.st_ctim.tv_sec) * 1000000000ULL +
             static_cast<uint64_t>(info.st_ctim.tv_nsec));
  AddInteger(inode_kept ? static_cast<uint64_t>(info.st_ino) : 0);
}

ContentFingerprint ContentFingerprintBuilder::Finish() const {
  const XXH128_hash_t hash = XXH3_128bits_digest(state_->xxh);
  return {hash.high64, hash.low64};
}

bool InodesAgreeAcrossMounts(const std::filesystem::path& path) {
  struct statfs info {};
  if (::statfs(path.c_str(), &info) != 0) return false;
  // statfs(2)'s magic numbers of the file systems whose clients may number
  // files themselves.
  constexpr unsigned long kClientNumbered[] = {
      0x65735546,  // FUSE
      0xFF534D42,  // CIFS
      0xFE534D42,  // SMB2
      0x517B,      // SMB
      0x01021997,  // 9p (v9fs)
      0x794C7630,  // overlayfs
  };
  for (unsigned long magic : kClientNumbered) {
    if (static_cast<unsigned long>(info.f_type) == magic) return false;
  }
  return true;
}

}  // namespace galley
