// ContentFingerprint: a 128-bit name for what a dataset's items hold, the
// same on every node that sees the same files, wherever they are mounted.
//
// A source folds in, in item order, what identifies each item's bytes
// without reading them: for files the path relative to the dataset's root,
// the size and the modification time; for tar shards each shard's file name,
// size and modification time and each item's offset and size. Device and
// inode numbers are left out: they differ between two mounts of the same
// export. Values are folded as explicit little-endian integers and
// length-prefixed strings (XXH3-128), so every node computes the same
// fingerprint for the same listing.
//
// The remote cache tier keys items by (fingerprint, item id, form), so two
// nodes share entries for the same data, and a dataset listed again after a
// file changed gets new keys (docs/cache.md, "The remote tier").
//
// A ResumeKey names a dataset for a saved loader state: the same two
// fingerprints on every node and under every path that holds a copy of the
// dataset, as `cp -r` makes one (which keeps names and bytes but not
// modification times). `content` folds what such a copy keeps: for files
// each item's path relative to the root, its size and label, the class names
// and the count; for tar shards each shard's file name and size and each
// item's shard, byte range, key and label. `mtimes` folds, apart, the
// modification times (each item's, or each shard's), so a resume can warn
// that the files were copied or touched without refusing them.
//
// ContentFingerprint and ResumeKey are plain values. A builder is used by
// one thread.
#ifndef GALLEY_SERVER_DATASET_CONTENT_FINGERPRINT_H_
#define GALLEY_SERVER_DATASET_CONTENT_FINGERPRINT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace galley {

struct ContentFingerprint {
  uint64_t high = 0;
  uint64_t low = 0;

  // 32 lower-case hex digits, high half first.
  std::string Hex() const;
  bool operator==(const ContentFingerprint&) const = default;
};

struct ResumeKey {
  ContentFingerprint content;
  ContentFingerprint mtimes;
};

class ContentFingerprintBuilder {
 public:
  // `kind` names the source type ("files", "shards"), so two kinds of
  // listing never share a fingerprint.
  explicit ContentFingerprintBuilder(std::string_view kind);
  ~ContentFingerprintBuilder();
  ContentFingerprintBuilder(const ContentFingerprintBuilder&) = delete;
  ContentFingerprintBuilder& operator=(const ContentFingerprintBuilder&) = delete;

  void AddInteger(uint64_t value);
  void AddString(std::string_view text);
  ContentFingerprint Finish() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_CONTENT_FINGERPRINT_H_
