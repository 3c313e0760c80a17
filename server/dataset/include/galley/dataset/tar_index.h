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
// A DALI `wds2idx` index (ParseWdsIndex) can plan the reads of a listing:
// PlannedTarReader serves ListTar's header reads from a few large reads whose
// bounds come from the index. The listing is still made from the headers
// themselves, so a wrong index costs reads, never a wrong listing.
//
// Thread-safety: ListTar and ParseWdsIndex are pure functions of their
// arguments; call them from any thread. A PlannedTarReader is used by one
// thread at a time.
#ifndef GALLEY_SERVER_DATASET_TAR_INDEX_H_
#define GALLEY_SERVER_DATASET_TAR_INDEX_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
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

// ListTar's walk, fed the archive's bytes in order: Want() names the next
// bytes the listing needs, always past those given before (the first block,
// then each header and each GNU long-name or PAX payload), and Give() hands
// them over. ListTar drives it with reads; TarStreamLister with the chunks
// of one pass over an object. Used by one thread at a time.
class TarWalker {
 public:
  struct Need {
    uint64_t offset = 0;
    uint64_t size = 0;  // never 0
  };

  explicit TarWalker(uint64_t file_size);
  // nullopt once the listing is complete (Finish).
  std::optional<Need> Want() const;
  // Exactly Want()->size bytes from Want()->offset. InvalidArgument as
  // ListTar's; damage ends the walk and is kept in the listing.
  Status Give(std::span<const uint8_t> bytes);
  // The members listed so far.
  const TarListing& listing() const { return listing_; }
  Result<TarListing> Finish() && { return std::move(listing_); }

 private:
  enum class State { kStart, kHeader, kExtended, kDone };
  Status Header(std::span<const uint8_t> block);
  void Extended(std::string_view payload);
  void NextHeader();
  void Stop(std::string why);

  const uint64_t file_size_;
  State state_ = State::kStart;
  Need want_;
  uint64_t offset_ = 0;       // the header being walked
  uint64_t next_offset_ = 0;  // the header after an extended one
  char extended_type_ = 0;
  std::optional<std::string> next_name_;  // from a GNU 'L' or PAX 'x' record
  // From a PAX 'x' record (a plain pair: GCC's -Wmaybe-uninitialized
  // misreads an optional here).
  uint64_t next_size_ = 0;
  bool has_next_size_ = false;
  TarListing listing_;
};

// Lists a tar object from one pass over its bytes, as they arrive in chunks
// of any size, holding no more than one header or extended header besides
// the payloads it keeps: those of the members `keep_payload` picks (labels,
// for the listing's cache), taken from the stream as it passes. Used by one
// thread at a time.
class TarStreamLister {
 public:
  TarStreamLister(uint64_t object_size, std::function<bool(const TarMember&)> keep_payload);
  // The next chunk. Errors as ListTar's.
  Status Feed(std::span<const uint8_t> chunk);
  // Whether the listing needs nothing more of the stream (the rest may be
  // left unread).
  bool done() const;
  // The listing, and the kept payloads, one per member (empty if not kept).
  // DataLoss when the stream ended before the listing did.
  Result<TarListing> Finish(std::vector<std::string>* payloads) &&;

 private:
  Status Deliver(bool capturing);

  TarWalker walker_;
  const std::function<bool(const TarMember&)> keep_payload_;
  uint64_t position_ = 0;         // bytes of the object seen
  std::vector<uint8_t> pending_;  // the bytes of the current need, so far
  size_t capture_ = SIZE_MAX;     // the member whose payload is being kept
  std::unordered_map<size_t, std::string> payloads_;
};

// Lists a tar archive of `file_size` bytes. InvalidArgument when the file is
// compressed (gzip, bzip2, xz, zstd magic) or does not start with a valid tar
// header; read errors are returned as they come.
Result<TarListing> ListTar(uint64_t file_size, const TarReader& read);

// Whether `block` (512 bytes) is a tar header with a valid checksum; fills
// the name (ustar prefix/name fields only) and payload size.
bool ParseTarHeaderBlock(std::span<const uint8_t> block, std::string* name, uint64_t* size);

// One member named by a wds2idx index.
struct WdsIndexEntry {
  std::string extension;  // as written (case kept)
  uint64_t offset = 0;    // first payload byte, as DALI's reader reads it
  uint64_t size = 0;      // payload bytes
  std::string name;       // member name; empty in a v1.1 index
};

// A DALI `wds2idx` index: a first line "v1.2 N" (or "v1.1 N"), then N
// sample lines of "ext offset size name" groups ("ext offset size" in v1.1).
struct WdsIndex {
  bool named = false;                  // v1.2
  std::vector<WdsIndexEntry> entries;  // in file order
};

// Largest index text ParseWdsIndex accepts.
inline constexpr size_t kMaxWdsIndexBytes = size_t{256} << 20;

// InvalidArgument when `text` is not such an index: unknown version, a
// sample count that differs from the lines, a malformed group, an offset
// that is not a multiple of 512.
Result<WdsIndex> ParseWdsIndex(std::string_view text);

// Serves the reads ListTar makes of one archive from ranges planned with a
// wds2idx index: for each entry, the bytes from the end of the previous
// entry's payload to the start of its own (the extended headers and the
// ustar header that precede it), plus its payload when `keep_payload` asks
// for it; nearby ranges are merged, up to 1 MiB each. A range is read in one
// call of `raw` the first time a read falls in it, and the header before its
// first entry is checked then (checksum, regular type, size): a failed check
// abandons the plan, and every later read goes to `raw` as it comes. Reads
// outside the plan go to `raw` too, so ListTar sees the archive's true bytes
// whatever the index says.
//
// Owns copies of the loaded range and of the kept payloads; borrows nothing
// past construction but `raw`, which must outlive it.
class PlannedTarReader {
 public:
  PlannedTarReader(uint64_t file_size, const TarReader& raw, const WdsIndex& index,
                   const std::function<bool(const WdsIndexEntry&)>& keep_payload);

  // A TarReader.
  Status Read(uint64_t offset, std::span<uint8_t> out);
  // The payload of a kept entry at `offset` of `size` bytes, when a loaded
  // range held it (moved out: a second call returns nullopt).
  std::optional<std::string> TakePayload(uint64_t offset, uint64_t size);
  // Whether the index could not plan the reads (entries overlapping, out of
  // order, past the end of the file) or a checked header disagreed with it.
  bool abandoned() const { return abandoned_; }
  // Calls of `raw` made so far.
  uint64_t raw_reads() const { return raw_reads_; }

 private:
  struct Range {
    uint64_t begin = 0;
    uint64_t end = 0;
    size_t first_entry = 0;  // entries_[first_entry, last_entry) lie in it
    size_t last_entry = 0;
  };
  struct Planned {
    uint64_t offset;
    uint64_t size;
    uint64_t gap;  // bytes of extended headers (or other members) before its header
    bool keep;
  };
  Status Load(size_t range);

  const TarReader& raw_;
  std::vector<Planned> entries_;                        // sorted by offset
  std::vector<Range> ranges_;                           // sorted, disjoint
  size_t loaded_ = SIZE_MAX;                            // index into ranges_
  std::vector<uint8_t> buffer_;                         // the loaded range's bytes
  std::unordered_map<uint64_t, std::string> payloads_;  // kept payloads, by offset
  bool abandoned_ = false;
  uint64_t raw_reads_ = 0;
};

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_TAR_INDEX_H_
