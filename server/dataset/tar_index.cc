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

TarWalker::TarWalker(uint64_t file_size) : file_size_(file_size) {
  if (file_size == 0) {
    state_ = State::kDone;
  } else {
    // The first block is both the compression check's magic and the first
    // header, so the walk never goes back.
    want_ = {0, std::min<uint64_t>(file_size, kBlock)};
  }
}

std::optional<TarWalker::Need> TarWalker::Want() const {
  if (state_ == State::kDone) return std::nullopt;
  return want_;
}

void TarWalker::Stop(std::string why) {
  listing_.damage = std::move(why) + " at byte " + std::to_string(offset_);
  listing_.damaged_bytes = file_size_ - offset_;
  state_ = State::kDone;
}

void TarWalker::NextHeader() {
  if (offset_ + kBlock <= file_size_) {
    state_ = State::kHeader;
    want_ = {offset_, kBlock};
  } else if (offset_ < file_size_) {
    Stop("file ends inside a header");
  } else {
    state_ = State::kDone;
  }
}

Status TarWalker::Give(std::span<const uint8_t> bytes) {
  switch (state_) {
    case State::kDone:
      return Status::Internal("the tar walk is over");
    case State::kStart:
      GALLEY_RETURN_IF_ERROR(CompressedRefusal(bytes.first(std::min<size_t>(bytes.size(), 6))));
      if (bytes.size() < kBlock) {
        Stop("file ends inside a header");
        return Status::Ok();
      }
      return Header(bytes);
    case State::kHeader:
      return Header(bytes);
    case State::kExtended:
      Extended(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
      return Status::Ok();
  }
  return Status::Ok();
}

Status TarWalker::Header(std::span<const uint8_t> block) {
  if (IsZeroBlock(block)) {  // end-of-archive marker
    state_ = State::kDone;
    return Status::Ok();
  }
  if (!ChecksumOk(block)) {
    if (offset_ == 0) return Status::InvalidArgument("is not a tar archive (no valid header)");
    Stop("bad header checksum");
    return Status::Ok();
  }
  const auto header_size = ParseNumber(block.subspan(124, 12));
  if (!header_size) {
    Stop("malformed size field");
    return Status::Ok();
  }
  const char type = static_cast<char>(block[156]);
  const uint64_t data = offset_ + kBlock;
  // A PAX size record applies to the regular member that follows it.
  const uint64_t size = IsRegularType(block[156]) && has_next_size_ ? next_size_ : *header_size;
  if (size > file_size_ - data) {
    Stop("member payload runs past the end of the file");
    return Status::Ok();
  }
  const uint64_t next = data + Padded(size);
  switch (type) {
    case 'L':
    case 'x':
      if (size > kMaxTarExtendedHeaderBytes) {
        Stop("extended header too large");
        return Status::Ok();
      }
      extended_type_ = type;
      next_offset_ = next;
      if (size == 0) {
        Extended({});
      } else {
        state_ = State::kExtended;
        want_ = {data, size};
      }
      return Status::Ok();
    case 'g':  // PAX global header: nothing galley needs
    case 'K':  // GNU long link name
      offset_ = next;
      NextHeader();
      return Status::Ok();
    case '0':
    case 0:
    case '7': {
      TarMember member;
      member.name = next_name_ ? *next_name_ : HeaderName(block);
      member.header_offset = offset_;
      member.offset = data;
      member.size = size;
      if (!member.name.empty() && member.name.back() == '/') {
        ++listing_.skipped_non_regular;  // old tars mark directories this way
      } else {
        listing_.members.push_back(std::move(member));
      }
      break;
    }
    default:
      ++listing_.skipped_non_regular;
      break;
  }
  next_name_.reset();
  has_next_size_ = false;
  offset_ = next;
  NextHeader();
  return Status::Ok();
}

void TarWalker::Extended(std::string_view payload) {
  if (extended_type_ == 'L') {
    next_name_ = std::string(payload.substr(0, payload.find('\0')));
  } else {
    std::optional<uint64_t> pax_size;
    if (!ParsePax(payload, &next_name_, &pax_size)) {
      Stop("malformed PAX extended header");
      return;
    }
    if (pax_size) {
      next_size_ = *pax_size;
      has_next_size_ = true;
    }
  }
  offset_ = next_offset_;
  NextHeader();
}

Result<TarListing> ListTar(uint64_t file_size, const TarReader& read) {
  TarWalker walker(file_size);
  std::vector<uint8_t> buffer;
  while (const auto need = walker.Want()) {
    buffer.resize(need->size);
    GALLEY_RETURN_IF_ERROR(read(need->offset, buffer));
    GALLEY_RETURN_IF_ERROR(walker.Give(buffer));
  }
  return std::move(walker).Finish();
}

TarStreamLister::TarStreamLister(uint64_t object_size,
                                 std::function<bool(const TarMember&)> keep_payload)
    : walker_(object_size), keep_payload_(std::move(keep_payload)) {}

Status TarStreamLister::Feed(std::span<const uint8_t> chunk) {
  while (!chunk.empty() && !done()) {
    // What comes next in the stream that the listing needs: a kept payload
    // lies between its member's header and the next header.
    const bool capturing = capture_ < walker_.listing().members.size();
    TarWalker::Need need{};
    if (capturing) {
      const TarMember& member = walker_.listing().members[capture_];
      need = {member.offset, member.size};
    } else {
      need = *walker_.Want();
    }
    if (position_ < need.offset) {
      const uint64_t skip = std::min<uint64_t>(need.offset - position_, chunk.size());
      position_ += skip;
      chunk = chunk.subspan(static_cast<size_t>(skip));
      continue;
    }
    const size_t take =
        static_cast<size_t>(std::min<uint64_t>(need.size - pending_.size(), chunk.size()));
    pending_.insert(pending_.end(), chunk.begin(),
                    chunk.begin() + static_cast<std::ptrdiff_t>(take));
    chunk = chunk.subspan(take);
    position_ += take;
    if (pending_.size() < need.size) continue;
    GALLEY_RETURN_IF_ERROR(Deliver(capturing));
  }
  return Status::Ok();
}

Status TarStreamLister::Deliver(bool capturing) {
  if (capturing) {
    payloads_.emplace(capture_, std::string(pending_.begin(), pending_.end()));
    capture_ = SIZE_MAX;
  } else {
    const size_t members = walker_.listing().members.size();
    GALLEY_RETURN_IF_ERROR(walker_.Give(pending_));
    if (walker_.listing().members.size() > members &&
        keep_payload_(walker_.listing().members.back())) {
      capture_ = members;
    }
  }
  pending_.clear();
  // A member of no bytes, or a walk that wants nothing more, needs nothing
  // from the stream.
  if (capture_ < walker_.listing().members.size() &&
      walker_.listing().members[capture_].size == 0) {
    return Deliver(true);
  }
  return Status::Ok();
}

bool TarStreamLister::done() const {
  return capture_ >= walker_.listing().members.size() && !walker_.Want().has_value();
}

Result<TarListing> TarStreamLister::Finish(std::vector<std::string>* payloads) && {
  if (!done()) {
    return Status::DataLoss("the object ended at byte " + std::to_string(position_) +
                            ", before the size its HEAD gave");
  }
  GALLEY_ASSIGN_OR_RETURN(TarListing listing, std::move(walker_).Finish());
  payloads->assign(listing.members.size(), std::string());
  for (auto& [member, payload] : payloads_) (*payloads)[member] = std::move(payload);
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
