// The member list of one tar file, read from its headers alone.
//
// ListTar walks the 512-byte headers of a tar archive and records, for each
// regular member, its name and the byte range of its payload; payloads are
// never read (only the small payloads of GNU long-name and PAX extended
// headers, which carry the next member's name or size). It reads POSIX
// ustar (name prefix field), GNU (`@LongLink` 'L' records, base-256 sizes)
// and PAX ('x' records: path, size; 'g' records are ignored).
//
// Input is untrusted: a bad checksum, a member running past the end of the
// file or a malformed extended header ends the listing there; what came
// before is kept and the damage is described in TarListing::damage. Links,
// devices, directories and other non-regular members are counted and
// skipped. Member names are returned as stored (after PAX/GNU overrides);
// callers must never use them as file-system paths.
//
// Thread-safety: ListTar is a pure function of its reader; call it from any
// thread.
#ifndef GALLEY_SERVER_DATASET_TAR_INDEX_H_
#define GALLEY_SERVER_DATASET_TAR_INDEX_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "galley/status.h"

namespace galley {

struct TarMember {
  std::string name;
  uint64_t header_offset = 0;  // where the member's own ustar header starts
  uint64_t offset = 0;         // first payload byte
  uint64_t size = 0;           // payload bytes
};

struct TarListing {
  std::vector<TarMember> members;  // regular members, in archive order
  uint64_t skipped_non_regular = 0;
  // Empty for a clean archive; else what stopped the listing and where.
  std::string damage;
  // Bytes after the last good member that could not be indexed.
  uint64_t damaged_bytes = 0;
};

// Reads exactly out.size() bytes at `offset`; an error status ends the listing.
using TarReader = std::function<Status(uint64_t offset, std::span<uint8_t> out)>;

// Largest GNU long-name or PAX extended header payload accepted.
inline constexpr uint64_t kMaxTarExtendedHeaderBytes = uint64_t{1} << 20;

// Lists a tar archive of `file_size` bytes. InvalidArgument when the file is
// compressed (gzip, bzip2, xz, zstd magic) or does not start with a valid tar
// header; read errors are returned as they come.
Result<TarListing> ListTar(uint64_t file_size, const TarReader& read);

// Whether `block` (512 bytes) is a tar header with a valid checksum; fills
// the name (ustar prefix/name fields only) and payload size.
bool ParseTarHeaderBlock(std::span<const uint8_t> block, std::string* name, uint64_t* size);

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_TAR_INDEX_H_
