// ContentFingerprint: a 128-bit name for a dataset's items, the key under
// which the remote cache tier keeps them (docs/cache.md, "The remote tier").
//
// It names where the items are, not only what they hold, so that no other
// user can produce it: galleyd serves an entry of the remote tier to anyone
// whose listing has the same fingerprint, and a user who may `stat` another
// user's private files but not read them could otherwise make a metadata
// clone (same names, sizes and modification times, set with utimensat)
// under a root of their own and be served the private pixels. So a source
// folds in, in item order:
//   - the absolute path of each item's file (an ImageFolder's or manifest's
//     folder once, then each item's path relative to it; for tar shards each
//     shard's canonical path), which only the owner of that path controls;
//   - each file's size and modification time (ns), which catch a rewrite;
//   - each file's change time (ns), which no user can set (a file deleted
//     and made again in a folder the attacker can write gets a new one);
//   - each file's inode number, where the file system keeps it the same on
//     every client (InodesAgreeAcrossMounts): local file systems, NFS,
//     Lustre, GPFS, CephFS; not FUSE, SMB or 9p, whose clients may number
//     files themselves;
//   - for tar shards, each item's offset and size.
// Device numbers are left out: they differ between two mounts of one export.
// Nodes that mount a dataset at the same path therefore compute the same
// fingerprint and share every entry; a copy (`cp -p`, `rsync -a`) or the
// same export mounted at another path does not: such a copy is exactly the
// clone above. Values are folded as explicit little-endian integers and
// length-prefixed strings (XXH3-128). An entry is served only to a job that
// has passed the access check on every item it is served (docs/access.md).
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

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
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
  // What names the file `info` describes rather than its bytes: its change
  // time and, when `inode_kept`, its inode number.
  void AddFileOrigin(const struct stat& info, bool inode_kept);
  ContentFingerprint Finish() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Whether the file system holding `path` gives a file the same inode number
// on every client that mounts it (true for local file systems and the
// network ones that pass the server's file id: NFS, Lustre, GPFS, CephFS,
// BeeGFS). False for FUSE, SMB/CIFS, 9p and overlayfs, whose numbers may be
// made by each client, and when `path` cannot be asked.
bool InodesAgreeAcrossMounts(const std::filesystem::path& path);

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_CONTENT_FINGERPRINT_H_
