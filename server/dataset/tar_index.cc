#include "galley/dataset/tar_index.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <optional>
#include <string_view>

namespace galley {
namespace {

constexpr uint64_t kBlock = 512;

// A numeric header field: octal digits (leading spaces/NULs allowed), or the
// GNU base-256 form (high bit of the first byte set). nullopt when malformed.
std::optional<uint64_t> ParseNumber(std::span<const uint8_t> field) {
  if (!field.empty() && (field[0] & 0x80) != 0) {
    if ((field[0] & 0x40) != 0) return std::nullopt;  // negative
    uint64_t value = field[0] & 0x3f;
    for (size_t i = 1; i < field.size(); ++i) {
      if (value > (UINT64_MAX >> 8)) return std::nullopt;
      value = (value << 8) | field[i];
    }
    return value;
  }
  size_t i = 0;
  while (i < field.size() && (field[i] == ' ' || field[i] == 0)) ++i;
  uint64_t value = 0;
  bool any = false;
  for (; i < field.size() && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (value > (UINT64_MAX >> 3)) return std::nullopt;
    value = value * 8 + (field[i] - '0');
    any = true;
  }
  for (; i < field.size(); ++i) {
    if (field[i] != ' ' && field[i] != 0) return std::nullopt;
  }
  if (!any) return 0;
  return value;
}

std::string FieldString(std::span<const uint8_t> field) {
  const auto end = std::find(field.begin(), field.end(), uint8_t{0});
  return std::string(field.begin(), end);
}

bool ChecksumOk(std::span<const uint8_t> block) {
  const auto stored = ParseNumber(block.subspan(148, 8));
  if (!stored) return false;
  // The sum of the block with the checksum field read as spaces, as
  // unsigned bytes (POSIX) and as signed ones (some old writers); branch-free
  // loops, as this runs once per header.
  uint32_t unsigned_sum = 0;
  int32_t signed_sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    unsigned_sum += block[i];
    signed_sum += static_cast<int8_t>(block[i]);
  }
  for (size_t i = 148; i < 156; ++i) {
    unsigned_sum -= block[i];
    signed_sum -= static_cast<int8_t>(block[i]);
  }
  unsigned_sum += 8 * ' ';
  signed_sum += 8 * ' ';
  return *stored == unsigned_sum || static_cast<int64_t>(*stored) == signed_sum;
}

bool IsRegularType(uint8_t type) { return type == '0' || type == 0 || type == '7'; }

bool IsZeroBlock(std::span<const uint8_t> block) {
  return std::all_of(block.begin(), block.end(), [](uint8_t b) { return b == 0; });
}

uint64_t Padded(uint64_t size) { return (size + kBlock - 1) / kBlock * kBlock; }

// The name fields of a header: POSIX ustar joins prefix and name; GNU's
// "ustar  " magic uses the prefix area for other fields.
std::string HeaderName(std::span<const uint8_t> block) {
  std::string name = FieldString(block.subspan(0, 100));
  const bool posix = std::memcmp(block.data() + 257, "ustar\0", 6) == 0;
  if (posix) {
    const std::string prefix = FieldString(block.subspan(345, 155));
    if (!prefix.empty()) name = prefix + "/" + name;
  }
  return name;
}

// PAX records "LEN key=value\n"; picks path and size. False when malformed.
bool ParsePax(std::string_view text, std::optional<std::string>* path,
              std::optional<uint64_t>* size) {
  while (!text.empty()) {
    size_t length = 0;
    size_t i = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (length > kMaxTarExtendedHeaderBytes) return false;
      length = length * 10 + static_cast<size_t>(text[i] - '0');
      ++i;
    }
    if (i == 0 || i >= text.size() || text[i] != ' ' || length <= i + 1 || length > text.size()) {
      // Some writers pad the payload with NULs after the last record.
      return std::all_of(text.begin(), text.end(), [](char c) { return c == 0; });
    }
    const std::string_view record = text.substr(i + 1, length - i - 1);
    text.remove_prefix(length);
    if (record.empty() || record.back() != '\n') return false;
    const size_t eq = record.find('=');
    if (eq == std::string_view::npos) return false;
    const std::string_view key = record.substr(0, eq);
    const std::string_view value = record.substr(eq + 1, record.size() - eq - 2);
    if (key == "path") {
      *path = std::string(value);
    } else if (key == "size") {
      uint64_t v = 0;
      if (value.empty()) return false;
      for (char c : value) {
        if (c < '0' || c > '9' || v > UINT64_MAX / 10 - 9) return false;
        v = v * 10 + static_cast<uint64_t>(c - '0');
      }
      *size = v;
    }
  }
  return true;
}

Status CompressedRefusal(std::span<const uint8_t> head) {
  struct Magic {
    const char* bytes;
    size_t n;
    const char* what;
    const char* tool;
  };
  static constexpr Magic kMagics[] = {{"\x1f\x8b", 2, "gzip", "gunzip"},
                                      {"BZh", 3, "bzip2", "bunzip2"},
                                      {"\xfd\x37\x7a\x58\x5a\x00", 6, "xz", "unxz"},
                                      {"\x28\xb5\x2f\xfd", 4, "zstd", "unzstd"}};
  for (const Magic& m : kMagics) {
    if (head.size() >= m.n && std::memcmp(head.data(), m.bytes, m.n) == 0) {
      return Status::InvalidArgument(std::string("is ") + m.what +
                                     "-compressed; a compressed tar cannot be read by byte "
                                     "range: decompress it first (" +
                                     m.tool + ")");
    }
  }
  return Status::Ok();
}

}  // namespace

bool ParseTarHeaderBlock(std::span<const uint8_t> block, std::string* name, uint64_t* size) {
  if (block.size() != kBlock || !ChecksumOk(block)) return false;
  const auto parsed = ParseNumber(block.subspan(124, 12));
  if (!parsed) return false;
  *size = *parsed;
  *name = HeaderName(block);
  return true;
}

Result<TarListing> ListTar(uint64_t file_size, const TarReader& read) {
  TarListing listing;
  std::array<uint8_t, kBlock> block{};
  if (file_size > 0) {
    std::array<uint8_t, 6> head{};
    const size_t n = static_cast<size_t>(std::min<uint64_t>(file_size, head.size()));
    GALLEY_RETURN_IF_ERROR(read(0, std::span(head.data(), n)));
    GALLEY_RETURN_IF_ERROR(CompressedRefusal(std::span(head.data(), n)));
  }
  std::optional<std::string> next_name;  // from a GNU 'L' or PAX 'x' record
  // From a PAX 'x' record (a plain pair: GCC's -Wmaybe-uninitialized
  // misreads an optional here).
  uint64_t next_size = 0;
  bool has_next_size = false;
  uint64_t offset = 0;
  auto stop = [&](std::string why) {
    listing.damage = std::move(why) + " at byte " + std::to_string(offset);
    listing.damaged_bytes = file_size - offset;
    return listing;
  };
  while (offset + kBlock <= file_size) {
    GALLEY_RETURN_IF_ERROR(read(offset, block));
    if (IsZeroBlock(block)) return listing;  // end-of-archive marker
    if (!ChecksumOk(block)) {
      if (offset == 0) return Status::InvalidArgument("is not a tar archive (no valid header)");
      return stop("bad header checksum");
    }
    const auto header_size = ParseNumber(std::span(block).subspan(124, 12));
    if (!header_size) return stop("malformed size field");
    const char type = static_cast<char>(block[156]);
    const uint64_t data = offset + kBlock;
    // A PAX size record applies to the regular member that follows it.
    const uint64_t size = IsRegularType(block[156]) && has_next_size ? next_size : *header_size;
    if (size > file_size - data) return stop("member payload runs past the end of the file");
    const uint64_t next = data + Padded(size);
    switch (type) {
      case 'L':
      case 'x': {
        if (size > kMaxTarExtendedHeaderBytes) return stop("extended header too large");
        std::string payload(size, '\0');
        GALLEY_RETURN_IF_ERROR(
            read(data, std::span(reinterpret_cast<uint8_t*>(payload.data()), payload.size())));
        if (type == 'L') {
          next_name = payload.substr(0, payload.find('\0'));
        } else {
          std::optional<uint64_t> pax_size;
          if (!ParsePax(payload, &next_name, &pax_size))
            return stop("malformed PAX extended header");
          if (pax_size) {
            next_size = *pax_size;
            has_next_size = true;
          }
        }
        offset = next;
        continue;
      }
      case 'g':  // PAX global header: nothing galley needs
      case 'K':  // GNU long link name
        offset = next;
        continue;
      case '0':
      case 0:
      case '7': {
        TarMember member;
        member.name = next_name ? *next_name : HeaderName(block);
        member.header_offset = offset;
        member.offset = data;
        member.size = size;
        if (!member.name.empty() && member.name.back() == '/') {
          ++listing.skipped_non_regular;  // old tars mark directories this way
        } else {
          listing.members.push_back(std::move(member));
        }
        break;
      }
      default:
        ++listing.skipped_non_regular;
        break;
    }
    next_name.reset();
    has_next_size = false;
    offset = next;
  }
  if (offset < file_size) return stop("file ends inside a header");
  return listing;
}

namespace {

// The whitespace-separated words of one line.
std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

bool ParseDecimal(std::string_view word, uint64_t* value) {
  const auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), *value);
  return ec == std::errc() && ptr == word.data() + word.size();
}

// Reads closer than this are merged into one; no merged read is larger than
// kMaxPlannedRead.
constexpr uint64_t kMergeGap = 8 << 10;
constexpr uint64_t kMaxPlannedRead = 1 << 20;

}  // namespace

Result<WdsIndex> ParseWdsIndex(std::string_view text) {
  if (text.size() > kMaxWdsIndexBytes) return Status::InvalidArgument("index file too large");
  WdsIndex index;
  uint64_t declared = 0, lines = 0;
  bool first = true;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    const std::vector<std::string_view> words = Words(line);
    if (first) {
      first = false;
      if (words.size() != 2 || (words[0] != "v1.1" && words[0] != "v1.2"))
        return Status::InvalidArgument("first line is not 'v1.1 N' or 'v1.2 N'");
      index.named = words[0] == "v1.2";
      if (!ParseDecimal(words[1], &declared) || declared == 0)
        return Status::InvalidArgument("bad sample count");
      continue;
    }
    if (words.empty()) continue;
    ++lines;
    const size_t group = index.named ? 4 : 3;
    if (words.size() % group != 0)
      return Status::InvalidArgument("sample line " + std::to_string(lines) +
                                     " is not made of 'ext offset size" +
                                     (index.named ? " name'" : "'") + " groups");
    for (size_t w = 0; w < words.size(); w += group) {
      WdsIndexEntry entry;
      entry.extension = std::string(words[w]);
      if (!ParseDecimal(words[w + 1], &entry.offset) || !ParseDecimal(words[w + 2], &entry.size) ||
          entry.offset % kBlock != 0)
        return Status::InvalidArgument("sample line " + std::to_string(lines) +
                                       ": bad offset or size");
      if (index.named) entry.name = std::string(words[w + 3]);
      index.entries.push_back(std::move(entry));
    }
  }
  if (first) return Status::InvalidArgument("empty index file");
  if (lines != declared)
    return Status::InvalidArgument("declares " + std::to_string(declared) + " samples, lists " +
                                   std::to_string(lines));
  return index;
}

PlannedTarReader::PlannedTarReader(uint64_t file_size, const TarReader& raw, const WdsIndex& index,
                                   const std::function<bool(const WdsIndexEntry&)>& keep_payload)
    : raw_(raw) {
  std::vector<std::pair<uint64_t, size_t>> order;  // offset, entry
  order.reserve(index.entries.size());
  for (size_t i = 0; i < index.entries.size(); ++i) order.emplace_back(index.entries[i].offset, i);
  std::sort(order.begin(), order.end());
  std::vector<Range> wanted;
  uint64_t cursor = 0;  // the end of the previous entry's padded payload
  for (const auto& [offset, i] : order) {
    const WdsIndexEntry& e = index.entries[i];
    if (offset < cursor + kBlock || offset > file_size || e.size > file_size - offset) {
      abandoned_ = true;  // overlapping, out of the file: no plan
      entries_.clear();
      ranges_.clear();
      return;
    }
    const bool keep = keep_payload(e);
    entries_.push_back({offset, e.size, offset - kBlock - cursor, keep});
    wanted.push_back({cursor, offset + (keep ? e.size : 0), entries_.size() - 1, entries_.size()});
    cursor = offset + Padded(e.size);
  }
  // The end-of-archive marker after the last entry.
  if (cursor < file_size) {
    wanted.push_back(
        {cursor, std::min(file_size, cursor + 2 * kBlock), entries_.size(), entries_.size()});
  }
  for (const Range& r : wanted) {
    if (!ranges_.empty() && r.begin <= ranges_.back().end + kMergeGap &&
        r.end - ranges_.back().begin <= kMaxPlannedRead) {
      ranges_.back().end = r.end;
      ranges_.back().last_entry = r.last_entry;
    } else if (r.end - r.begin <= kMaxPlannedRead) {
      ranges_.push_back(r);
    }  // else: a gap this large holds what the index does not name; read it as it comes
  }
}

Status PlannedTarReader::Load(size_t index) {
  const Range& range = ranges_[index];
  buffer_.resize(range.end - range.begin);
  ++raw_reads_;
  loaded_ = SIZE_MAX;
  GALLEY_RETURN_IF_ERROR(raw_(range.begin, buffer_));
  loaded_ = index;
  if (range.first_entry < range.last_entry) {
    const Planned& e = entries_[range.first_entry];
    const auto block =
        std::span<const uint8_t>(buffer_).subspan(e.offset - kBlock - range.begin, kBlock);
    std::string name;
    uint64_t size = 0;
    // A PAX record in the gap may override the size (members of 8 GiB and more).
    if (!ParseTarHeaderBlock(block, &name, &size) || !IsRegularType(block[156]) ||
        (size != e.size && e.gap == 0)) {
      abandoned_ = true;
    }
  }
  for (size_t i = range.first_entry; i < range.last_entry; ++i) {
    const Planned& e = entries_[i];
    if (!e.keep) continue;
    const uint8_t* data = buffer_.data() + (e.offset - range.begin);
    payloads_.emplace(e.offset, std::string(data, data + e.size));
  }
  return Status::Ok();
}

Status PlannedTarReader::Read(uint64_t offset, std::span<uint8_t> out) {
  if (!abandoned_) {
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), offset,
                               [](uint64_t o, const Range& r) { return o < r.begin; });
    const size_t index = static_cast<size_t>(it - ranges_.begin()) - 1;  // SIZE_MAX: none
    if (index != SIZE_MAX && offset < ranges_[index].end &&
        out.size() <= ranges_[index].end - offset) {
      it = ranges_.begin() + static_cast<std::ptrdiff_t>(index);
      if (loaded_ != index) GALLEY_RETURN_IF_ERROR(Load(index));
      std::memcpy(out.data(), buffer_.data() + (offset - it->begin), out.size());
      return Status::Ok();
    }
  }
  ++raw_reads_;
  return raw_(offset, out);
}

std::optional<std::string> PlannedTarReader::TakePayload(uint64_t offset, uint64_t size) {
  auto it = payloads_.find(offset);
  if (it == payloads_.end() || it->second.size() != size) return std::nullopt;
  std::string payload = std::move(it->second);
  payloads_.erase(it);
  return payload;
}

}  // namespace galley
