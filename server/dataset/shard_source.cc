#include "galley/dataset/shard_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "galley/dataset/descriptor_exhaustion.h"
#include "galley/dataset/listing_progress.h"
#include "galley/dataset/sample_fields.h"
#include "galley/dataset/tar_index.h"
#include "galley/errno_text.h"
#include "galley/mutex.h"
#include "galley/shard_members.h"
#include "galley/unique_fd.h"
#include "shard_storage.h"
#include "wire/field_record.h"

namespace galley {
namespace {

namespace fs = std::filesystem;

// Member payloads galley reads while indexing, to find labels; kept in the
// index so that a cached listing needs no payload read.
constexpr const char* kInlineExtensions[] = {"cls", "json"};
constexpr uint64_t kMaxInlineBytes = 64 << 10;
constexpr char kCacheMagic[] = "galley-tar-index-v1";

// The image extensions tried when the job names none, as a message lists
// them: "jpg, jpeg, png or webp".
std::string ImageExtensionsText() {
  std::string text;
  const size_t count = std::size(kShardImageExtensions);
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) text += i + 1 == count ? " or " : ", ";
    text += kShardImageExtensions[i];
  }
  return text;
}

FileIdentity IdentityOf(const struct stat& info) {
  return {static_cast<uint64_t>(info.st_size),
          int64_t{info.st_mtim.tv_sec} * 1000000000 + info.st_mtim.tv_nsec,
          static_cast<uint64_t>(info.st_ino), static_cast<uint64_t>(info.st_dev)};
}

Status OpenError(const fs::path& path, int error) {
  if (IsOutOfDescriptors(error)) return OutOfDescriptors(path.string(), error);
  const std::string text = path.string() + ": " + ErrnoText(error);
  if (error == ENOENT) return Status::NotFound(text);
  if (error == EACCES || error == EPERM) return Status::PermissionDenied(text);
  return Status::DataLoss(text);
}

Status PreadExactly(int fd, uint64_t offset, std::span<uint8_t> out, const fs::path& path) {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n =
        ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::DataLoss(path.string() + ": read failed: " + ErrnoText(errno));
    }
    if (n == 0) return Status::DataLoss(path.string() + ": file shrank while read");
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// What reading a member past ShardSource::kMaxMemberBytes, named `what`,
// returns instead of a buffer of its claimed size.
Status TooLarge(const std::string& what) {
  return Status::ResourceExhausted(what + " is larger than " +
                                   std::to_string(ShardSource::kMaxMemberBytes) + " bytes");
}

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// Lower-cased extension after the first dot of the base name; false when the
// name has no key (no dot, a dotfile) or is unsafe (absolute, `..`).
bool SplitMemberName(const std::string& name, std::string* key, std::string* extension) {
  if (name.empty() || name.front() == '/') return false;
  size_t start = 0;
  while (start <= name.size()) {
    const size_t slash = name.find('/', start);
    const size_t end = slash == std::string::npos ? name.size() : slash;
    if (name.compare(start, end - start, "..") == 0) return false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  const size_t base = name.rfind('/') == std::string::npos ? 0 : name.rfind('/') + 1;
  const size_t dot = name.find('.', base);
  if (dot == std::string::npos || dot == base || dot + 1 == name.size()) return false;
  *key = name.substr(0, dot);
  *extension = Lower(name.substr(dot + 1));
  return true;
}

bool IsInlineExtension(const std::string& extension) {
  return std::any_of(std::begin(kInlineExtensions), std::end(kInlineExtensions),
                     [&](const char* e) { return extension == e; });
}

// ---- The on-disk index cache --------------------------------------------
//
// One file per shard version, named by a hash of (canonical path, size,
// mtime, inode, device); the file repeats the path and identity, which are
// compared on load. Integers are little-endian, strings length-prefixed.

uint64_t Fnv1a(std::string_view text) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

fs::path CacheFile(const fs::path& dir, const std::string& shard, const FileIdentity& id) {
  const std::string text = shard + '\0' + std::to_string(id.size) + ':' +
                           std::to_string(id.mtime_ns) + ':' + std::to_string(id.inode) + ':' +
                           std::to_string(id.device);
  char name[32];
  std::snprintf(name, sizeof(name), "%016llx.tarindex",
                static_cast<unsigned long long>(Fnv1a(text)));
  return dir / name;
}

void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutString(std::string& out, std::string_view s) {
  PutU64(out, s.size());
  out.append(s);
}

// Bounds-checked reader of a cache file: any inconsistency is a miss.
class CacheReader {
 public:
  explicit CacheReader(std::string_view data) : data_(data) {}
  bool U64(uint64_t* v) {
    if (data_.size() < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i) *v |= uint64_t(static_cast<unsigned char>(data_[i])) << (8 * i);
    data_.remove_prefix(8);
    return true;
  }
  bool String(std::string* s) {
    uint64_t n = 0;
    if (!U64(&n) || n > data_.size()) return false;
    s->assign(data_.substr(0, n));
    data_.remove_prefix(n);
    return true;
  }
  bool done() const { return data_.empty(); }

 private:
  std::string_view data_;
};

std::string SerializeListing(const ShardListing& listing) {
  const FileIdentity& identity = listing.origin.identity;
  std::string out;
  PutString(out, kCacheMagic);
  PutString(out, listing.origin.cache_key);
  PutU64(out, identity.size);
  PutU64(out, static_cast<uint64_t>(identity.mtime_ns));
  PutU64(out, identity.inode);
  PutU64(out, identity.device);
  PutU64(out, listing.tar.skipped_non_regular);
  PutString(out, listing.tar.damage);
  PutU64(out, listing.tar.damaged_bytes);
  PutU64(out, listing.tar.members.size());
  for (size_t i = 0; i < listing.tar.members.size(); ++i) {
    const TarMember& m = listing.tar.members[i];
    PutString(out, m.name);
    PutU64(out, m.header_offset);
    PutU64(out, m.offset);
    PutU64(out, m.size);
    PutString(out, listing.inline_payloads[i]);
  }
  return out;
}

bool ParseListing(std::string_view data, const ShardOrigin& origin, ShardListing* listing) {
  const FileIdentity& identity = origin.identity;
  CacheReader r(data);
  std::string magic, path;
  uint64_t mtime = 0, count = 0;
  FileIdentity stored;
  if (!r.String(&magic) || magic != kCacheMagic || !r.String(&path) || path != origin.cache_key)
    return false;
  if (!r.U64(&stored.size) || !r.U64(&mtime) || !r.U64(&stored.inode) || !r.U64(&stored.device))
    return false;
  stored.mtime_ns = static_cast<int64_t>(mtime);
  if (!(stored == identity)) return false;
  if (!r.U64(&listing->tar.skipped_non_regular) || !r.String(&listing->tar.damage) ||
      !r.U64(&listing->tar.damaged_bytes) || !r.U64(&count) || count > data.size() / 40)
    return false;
  listing->tar.members.resize(count);
  listing->inline_payloads.resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    TarMember& m = listing->tar.members[i];
    if (!r.String(&m.name) || !r.U64(&m.header_offset) || !r.U64(&m.offset) || !r.U64(&m.size) ||
        !r.String(&listing->inline_payloads[i]))
      return false;
    if (m.offset > identity.size || m.size > identity.size - m.offset) return false;
  }
  return r.done();
}

}  // namespace

bool PrepareIndexCacheDir(const fs::path& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  struct stat info {};
  if (::lstat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != ::geteuid())
    return false;
  if ((info.st_mode & 077) != 0) ::chmod(dir.c_str(), 0700);
  return true;
}

bool LoadCachedListing(const fs::path& dir, const ShardOrigin& origin, ShardListing* listing) {
  const fs::path file = CacheFile(dir, origin.cache_key, origin.identity);
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0) return false;
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode) || info.st_uid != ::geteuid() ||
      info.st_size > (int64_t{1} << 32))
    return false;
  std::string data(static_cast<size_t>(info.st_size), '\0');
  if (!PreadExactly(fd.get(), 0, std::span(reinterpret_cast<uint8_t*>(data.data()), data.size()),
                    file)
           .ok())
    return false;
  return ParseListing(data, origin, listing);
}

namespace {

// What this process knows of each index folder's size: the bytes its last
// listing found plus those written since. Listing a folder of thousands of
// indexes on every write made indexing a thousand shards quadratic (63 s
// against 6 s for 1,024 shards beside 12,000 kept indexes); the folder is
// now listed, and trimmed, only when that estimate passes the bound, and
// after every kWritesPerListing writes, which also picks up what other
// processes wrote there. The estimate never falls below what this process
// wrote, so the folder stays within its bound as before.
constexpr uint32_t kWritesPerListing = 256;

struct FolderEstimate {
  uint64_t bytes = 0;
  uint32_t writes_since_listing = 0;
  bool listed = false;
};

Mutex cache_trim_mutex;

std::unordered_map<std::string, FolderEstimate>& FolderEstimates() REQUIRES(cache_trim_mutex) {
  static auto* estimates = new std::unordered_map<std::string, FolderEstimate>();
  return *estimates;
}

// Lists `dir`'s indexes and removes the oldest until the rest fit in
// `max_bytes`, keeping `keep`; the bytes left.
uint64_t TrimFolder(const fs::path& dir, const fs::path& keep, uint64_t max_bytes)
    REQUIRES(cache_trim_mutex) {
  struct Entry {
    fs::path path;
    int64_t mtime_ns;
    uint64_t size;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code error;
  for (fs::directory_iterator it(dir, error); !error && it != fs::directory_iterator();
       it.increment(error)) {
    if (it->path().extension() != ".tarindex") continue;
    struct stat info {};
    if (::lstat(it->path().c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    entries.push_back({it->path(), IdentityOf(info).mtime_ns, static_cast<uint64_t>(info.st_size)});
    total += static_cast<uint64_t>(info.st_size);
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.mtime_ns < b.mtime_ns; });
  for (const Entry& e : entries) {
    if (total <= max_bytes) break;
    if (e.path == keep) continue;
    if (::unlink(e.path.c_str()) == 0) total -= e.size;
  }
  return total;
}

}  // namespace

void StoreCachedListing(const fs::path& dir, const ShardListing& listing, uint64_t max_bytes) {
  const fs::path file = CacheFile(dir, listing.origin.cache_key, listing.origin.identity);
  const std::string data = SerializeListing(listing);
  if (data.size() > max_bytes) return;
  const fs::path temp =
      file.string() + ".tmp" + std::to_string(::getpid()) + "." +
      std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 1000000);
  {
    UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (fd.get() < 0) return;
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::unlink(temp.c_str());
        return;
      }
      done += static_cast<size_t>(n);
    }
  }
  if (::rename(temp.c_str(), file.c_str()) != 0) {
    ::unlink(temp.c_str());
    return;
  }
  MutexLock lock(&cache_trim_mutex);
  FolderEstimate& estimate = FolderEstimates()[dir.string()];
  estimate.bytes += data.size();
  if (estimate.listed && estimate.bytes <= max_bytes &&
      ++estimate.writes_since_listing < kWritesPerListing)
    return;
  estimate.bytes = TrimFolder(dir, file, max_bytes);
  estimate.writes_since_listing = 0;
  estimate.listed = true;
}

bool KeepsInlinePayload(const TarMember& member) {
  std::string key, extension;
  return member.size <= kMaxInlineBytes && SplitMemberName(member.name, &key, &extension) &&
         IsInlineExtension(extension);
}

namespace {

// ---- DALI .idx hints ---------------------------------------------------
//
// wds2idx writes "v1.2 N" (or "v1.1 N"), then one line per sample of
// "ext offset size [name]" groups, the offset being the member's first
// payload byte. An index carries no shard size or date, so it only plans the
// reads of the listing (PlannedTarReader); the listing still comes from the
// headers, and the index counts as used only when it describes that listing.

// The .idx beside `shard`: nullopt when there is none, an error when it
// cannot be read or parsed.
std::optional<Result<WdsIndex>> ReadWdsIndex(const fs::path& shard) {
  fs::path path = shard;
  path.replace_extension(".idx");
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::nullopt;
    return Result<WdsIndex>(OpenError(path, errno));
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode))
    return Result<WdsIndex>(Status::InvalidArgument(path.string() + " is not a file"));
  if (static_cast<uint64_t>(info.st_size) > kMaxWdsIndexBytes)
    return Result<WdsIndex>(Status::InvalidArgument(path.string() + " is too large"));
  std::string text(static_cast<size_t>(info.st_size), '\0');
  Status read = PreadExactly(fd.get(), 0,
                             std::span(reinterpret_cast<uint8_t*>(text.data()), text.size()), path);
  if (!read.ok()) return Result<WdsIndex>(read);
  return ParseWdsIndex(text);
}

// Whether the index describes the listing: each entry names a regular
// member at its payload offset, with its size and its name (the whole name or
// the base name; v1.1: its extension), and each member with a sample key is
// named by an entry.
bool IndexDescribes(const WdsIndex& index, const TarListing& tar) {
  std::unordered_map<uint64_t, size_t> by_offset;
  for (size_t m = 0; m < tar.members.size(); ++m) by_offset.emplace(tar.members[m].offset, m);
  std::vector<bool> named(tar.members.size());
  for (const WdsIndexEntry& e : index.entries) {
    auto it = by_offset.find(e.offset);
    if (it == by_offset.end() || named[it->second]) return false;
    const TarMember& member = tar.members[it->second];
    if (member.size != e.size) return false;
    named[it->second] = true;
    std::string key, extension;
    if (index.named) {
      const size_t slash = member.name.rfind('/');
      const size_t base = slash == std::string::npos ? 0 : slash + 1;
      if (member.name != e.name && member.name.compare(base, std::string::npos, e.name) != 0)
        return false;
    } else if (SplitMemberName(member.name, &key, &extension)) {
      if (Lower(e.extension) != extension) return false;
    }
  }
  for (size_t m = 0; m < tar.members.size(); ++m) {
    std::string key, extension;
    if (!named[m] && SplitMemberName(tar.members[m].name, &key, &extension)) return false;
  }
  return true;
}

// Lists one shard: from the cache when it holds this version, else from
// its headers (and stores the result).
Result<ShardListing> ListShard(const fs::path& shard, const ShardOptions& options, bool use_cache,
                               ShardStats* stats_for_idx) {
  UniqueFd fd(::open(shard.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return OpenError(shard, errno);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) return OpenError(shard, errno);
  if (!S_ISREG(info.st_mode)) return Status::InvalidArgument(shard.string() + " is not a file");
  ShardListing listing;
  listing.origin.name = shard.string();
  listing.origin.cache_key = shard.string();
  listing.origin.identity = IdentityOf(info);
  listing.origin.info = info;
  listing.origin.inode_kept = InodesAgreeAcrossMounts(shard);
  if (use_cache && LoadCachedListing(options.index_cache_dir, listing.origin, &listing)) {
    listing.from_cache = true;
    GlobalShardIndexCounters().cache_hits++;
    return listing;
  }
  const TarReader raw = [&](uint64_t offset, std::span<uint8_t> out) {
    return PreadExactly(fd.get(), offset, out, shard);
  };
  auto keep_payload = [](const WdsIndexEntry& e) {
    return e.size <= kMaxInlineBytes && IsInlineExtension(Lower(e.extension));
  };
  const auto hint = ReadWdsIndex(shard);
  std::optional<PlannedTarReader> planned;
  const uint64_t size = listing.origin.identity.size;
  if (hint && hint->ok()) planned.emplace(size, raw, **hint, keep_payload);
  auto tar = planned
                 ? ListTar(size, [&](uint64_t offset,
                                     std::span<uint8_t> out) { return planned->Read(offset, out); })
                 : ListTar(size, raw);
  if (!tar.ok()) return Status(tar.status().code(), shard.string() + " " + tar.status().message());
  listing.tar = std::move(*tar);
  listing.inline_payloads.resize(listing.tar.members.size());
  for (size_t i = 0; i < listing.tar.members.size(); ++i) {
    const TarMember& m = listing.tar.members[i];
    if (!KeepsInlinePayload(m)) continue;
    std::string& payload = listing.inline_payloads[i];
    if (planned) {
      if (auto kept = planned->TakePayload(m.offset, m.size)) {
        payload = std::move(*kept);
        continue;
      }
    }
    payload.resize(m.size);
    GALLEY_RETURN_IF_ERROR(PreadExactly(
        fd.get(), m.offset, std::span(reinterpret_cast<uint8_t*>(payload.data()), m.size), shard));
  }
  if (planned && !planned->abandoned() && IndexDescribes(**hint, listing.tar)) {
    GlobalShardIndexCounters().idx_hints_used++;
    stats_for_idx->from_idx++;
  } else {
    GlobalShardIndexCounters().scanned++;
    if (hint) {
      GlobalShardIndexCounters().stale_idx++;
      stats_for_idx->stale_idx++;
    }
  }
  if (use_cache)
    StoreCachedListing(options.index_cache_dir, listing, options.index_cache_max_bytes);
  return listing;
}

// One shard's samples, grouped from its listing: the part of the listing a
// ShardSource keeps, and what it skipped.
struct GroupedShard {
  struct Sample {
    uint64_t offset;  // the image member's payload
    uint64_t size;
    int64_t label;
  };
  ShardOrigin origin;
  bool from_cache = false;
  ShardStats idx_stats;  // from_idx and stale_idx
  std::vector<Sample> samples;
  // Keys with the image extension, concatenated; sample i ends at key_ends[i].
  std::string keys;
  std::vector<uint64_t> key_ends;
  // Each sample's field members (offset, size), as ShardSource keeps them.
  std::vector<std::pair<uint64_t, uint64_t>> fields;
  uint64_t bytes = 0;  // the images' and fields' payloads
  uint64_t skipped_members = 0;
  uint64_t skipped_samples = 0;
  // The first kMaxLeftOutNamed, "shard: key (why)", and ShardStats' other
  // figures for this shard.
  std::vector<std::string> left_out;
  std::map<std::string, uint64_t> missing_members;
  std::map<std::string, uint64_t> duplicated_members;
  std::set<std::string> member_extensions;
  std::string damage;
};

// Groups `listing`'s members into samples by WebDataset's rules and picks
// each sample's image, label and fields (shard_source.h).
GroupedShard GroupSamples(const std::string& shard, const ShardListing& listing,
                          const ShardOptions& options,
                          const std::vector<std::string>& field_extensions,
                          const std::string& json_field) {
  GroupedShard out;
  out.origin = listing.origin;
  out.from_cache = listing.from_cache;
  out.skipped_members = listing.tar.skipped_non_regular;
  out.damage = listing.tar.damage;
  const std::string wanted_label_extension = json_field.empty() ? "cls" : "json";
  // Group members by key across the whole shard, in order of first sight.
  struct Sample {
    std::string key;
    std::vector<std::pair<std::string, size_t>> members;  // extension, member index
    std::string duplicated;                               // the extension of a member found twice
  };
  std::vector<Sample> samples;
  std::unordered_map<std::string, size_t> by_key;
  const auto& members = listing.tar.members;
  for (size_t m = 0; m < members.size(); ++m) {
    std::string key, extension;
    if (!SplitMemberName(members[m].name, &key, &extension)) {
      out.skipped_members++;
      continue;
    }
    if (out.member_extensions.size() < kMaxExtensionsNamed) out.member_extensions.insert(extension);
    auto [it, inserted] = by_key.try_emplace(key, samples.size());
    if (inserted) samples.push_back({key, {}});
    Sample& sample = samples[it->second];
    if (std::any_of(sample.members.begin(), sample.members.end(),
                    [&](const auto& e) { return e.first == extension; })) {
      // Which of two members is the sample's is anyone's guess, so the
      // sample is left out, named (webdataset refuses the shard).
      if (sample.duplicated.empty()) sample.duplicated = extension;
      continue;
    }
    sample.members.emplace_back(extension, m);
  }
  for (const Sample& sample : samples) {
    auto find = [&](const std::string& extension) -> const TarMember* {
      for (const auto& [e, m] : sample.members)
        if (e == extension) return &members[m];
      return nullptr;
    };
    auto find_index = [&](const std::string& extension) -> size_t {
      for (const auto& [e, m] : sample.members)
        if (e == extension) return m;
      return members.size();
    };
    const TarMember* image = nullptr;
    std::string image_extension;
    if (!options.image_key.empty()) {
      image_extension = options.image_key;
      image = find(image_extension);
    } else {
      for (const std::string_view e : kShardImageExtensions) {
        if ((image = find(std::string(e))) != nullptr) {
          image_extension = e;
          break;
        }
      }
    }
    std::string why;
    std::string missing;  // the extension of a member the sample lacks
    int64_t label = -1;
    if (!sample.duplicated.empty()) {
      why = "two members named " + sample.key + "." + sample.duplicated;
    } else if (image == nullptr) {
      missing = options.image_key.empty() ? ImageExtensionsText() : options.image_key;
      why = options.image_key.empty() ? "no " + missing + " member"
                                      : "no ." + options.image_key + " member";
    } else if (!options.label_key.empty()) {
      const size_t m = find_index(wanted_label_extension);
      if (m == members.size()) {
        why = "no ." + wanted_label_extension + " member";
        missing = wanted_label_extension;
      } else if (json_field.empty()) {
        if (!ParseIntegerText(listing.inline_payloads[m], &label)) {
          why = "the .cls is not an integer";
        } else if (label < 0) {
          why = "the .cls holds " + std::to_string(label) + "; a label is 0 or more";
        }
      } else {
        const auto doc = nlohmann::json::parse(listing.inline_payloads[m], nullptr, false);
        const auto field = doc.is_object() ? doc.find(json_field) : doc.end();
        if (!doc.is_object() || field == doc.end() || !field->is_number_integer()) {
          why = "the .json has no integer field '" + json_field + "'";
        } else if (field->is_number_unsigned() &&
                   field->get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()}) {
          why = "the .json field '" + json_field + "' is too large for a label";
        } else if ((label = field->get<int64_t>()) < 0) {
          why = "the .json field '" + json_field + "' holds " + std::to_string(label) +
                "; a label is 0 or more";
        }
      }
    }
    if (why.empty() && options.label_key.empty() && !field_extensions.empty()) {
      // With fields and no label key, a sample's label is its .cls where
      // that holds one, so the listing shows what the shards label; no
      // sample is left out for it.
      const size_t m = find_index("cls");
      int64_t value = -1;
      if (m != members.size() && ParseIntegerText(listing.inline_payloads[m], &value) &&
          value >= 0) {
        label = value;
      }
    }
    std::vector<std::pair<uint64_t, uint64_t>> fields;
    for (size_t f = 0; f < field_extensions.size() && why.empty(); ++f) {
      if (field_extensions[f].empty()) {
        fields.push_back({});
      } else if (const TarMember* member = find(field_extensions[f])) {
        fields.push_back({member->offset, member->size});
      } else {
        why = "no ." + field_extensions[f] + " member";
        missing = field_extensions[f];
      }
    }
    if (!why.empty()) {
      out.skipped_samples++;
      if (!missing.empty()) out.missing_members[missing]++;
      if (!sample.duplicated.empty()) out.duplicated_members[sample.duplicated]++;
      if (out.left_out.size() < kMaxLeftOutNamed)
        out.left_out.push_back(shard + ": " + sample.key + " (" + why + ")");
      continue;
    }
    out.samples.push_back({image->offset, image->size, label});
    out.keys += sample.key + "." + image_extension;
    out.key_ends.push_back(out.keys.size());
    out.bytes += image->size;
    for (const auto& field : fields) out.bytes += field.second;
    out.fields.insert(out.fields.end(), fields.begin(), fields.end());
  }
  return out;
}

}  // namespace

std::string DescribeLeftOut(const ShardStats& stats) {
  if (stats.skipped_samples == 0) return "";
  std::string text;
  uint64_t lacking = 0;
  for (const auto& [extension, count] : stats.missing_members) {
    text += (text.empty() ? "" : ", ") + std::to_string(count) +
            (extension.find(',') != std::string::npos ? " have no image member (" + extension + ")"
                                                      : " have no ." + extension + " member");
    lacking += count;
  }
  for (const auto& [extension, count] : stats.duplicated_members) {
    text +=
        (text.empty() ? "" : ", ") + std::to_string(count) + " have two ." + extension + " members";
    lacking += count;
  }
  if (lacking < stats.skipped_samples) {
    text += (text.empty() ? "" : ", ") + std::to_string(stats.skipped_samples - lacking) +
            " have no usable image or label";
  }
  // A member no sample has is usually a misspelt name: say which members
  // the samples do have.
  // (The set is complete only below its cap.)
  for (const auto& [extension, count] : stats.missing_members) {
    if (extension.find(',') != std::string::npos || stats.member_extensions.contains(extension) ||
        stats.member_extensions.size() >= kMaxExtensionsNamed)
      continue;
    std::string held;
    for (const std::string& e : stats.member_extensions) held += (held.empty() ? "" : ", ") + e;
    text += "; no sample has a ." + extension +
            " member (the samples' members: " + (held.empty() ? "none" : held) + ")";
  }
  if (!stats.first_skipped_sample.empty()) text += "; the first: " + stats.first_skipped_sample;
  return text;
}

ShardIndexCounters& GlobalShardIndexCounters() {
  static ShardIndexCounters counters;
  return counters;
}

namespace {

// The shards of a set of files and their descriptors, kept in a
// ShardDescriptorCache (possibly shared with other sets). A reader holds a
// shared_ptr to the descriptor it uses, so closing the least recently used
// one never pulls it from under a pread in flight.
class LocalShards final : public ShardSource::Storage {
 public:
  struct Shard {
    fs::path path;
    FileIdentity identity;
    struct stat info {};
    bool inode_kept = false;
  };
  LocalShards(std::vector<Shard> shards, std::shared_ptr<ShardDescriptorCache> cache,
              size_t set_capacity)
      : shards_(std::move(shards)),
        cache_(std::move(cache)),
        set_(cache_->NewSet()),
        set_capacity_(std::max<size_t>(1, set_capacity)) {}
  ~LocalShards() override { cache_->Release(set_); }
  LocalShards(const LocalShards&) = delete;
  LocalShards& operator=(const LocalShards&) = delete;

  Status ReadInto(uint32_t shard, uint64_t offset, std::span<uint8_t> out) override {
    auto fd = Get(shard);
    if (!fd.ok()) return fd.status();
    Status read = PreadExactly((*fd)->get(), offset, out, shards_[shard].path);
    if (!StillListed(shard, (*fd)->get())) return Changed(shards_[shard]);
    return read;  // an I/O error on an unchanged shard, or Ok
  }
  bool changed() const override { return changed_.load(); }
  void Release() override { cache_->Release(set_); }

  Status Verify(AccessChecker* checker, const std::vector<bool>& holds_served,
                bool* changed) override {
    Status denied = Status::Ok();
    *changed = false;
    for (size_t i = 0; i < shards_.size(); ++i) {
      struct stat info {};
      const bool found = ::stat(shards_[i].path.c_str(), &info) == 0;
      if (!found || !(IdentityOf(info) == shards_[i].identity)) *changed = true;
      if (found && denied.ok() && checker != nullptr && holds_served[i]) {
        denied = checker->CheckFile(shards_[i].path, info);
      }
    }
    if (*changed) changed_ = true;
    return denied;
  }

  // Each shard by canonical path, size, mtime, change time and inode (what
  // no clone of it elsewhere has: content_fingerprint.h).
  void AddFingerprint(uint32_t shard, ContentFingerprintBuilder& fingerprint) const override {
    const Shard& s = shards_[shard];
    fingerprint.AddString(s.path.string());
    fingerprint.AddInteger(s.identity.size);
    fingerprint.AddInteger(static_cast<uint64_t>(s.identity.mtime_ns));
    fingerprint.AddFileOrigin(s.info, s.inode_kept);
  }
  // The same without the times, which a copy (cp -r) does not keep.
  void AddResumeKey(uint32_t shard, ContentFingerprintBuilder& copy,
                    ContentFingerprintBuilder& versions) const override {
    const Shard& s = shards_[shard];
    copy.AddString(s.path.filename().string());
    copy.AddInteger(s.identity.size);
    versions.AddInteger(static_cast<uint64_t>(s.identity.mtime_ns));
  }

 private:
  // The shard's descriptor, checked to still be the listed version.
  Result<ShardDescriptorCache::Descriptor> Get(uint32_t index) {
    const Shard& shard = shards_[index];
    struct stat info {};
    // stat the name too: a shard replaced by rename keeps the old inode
    // open, which would silently serve the old contents.
    if (::stat(shard.path.c_str(), &info) != 0) return OpenError(shard.path, errno);
    if (!(IdentityOf(info) == shard.identity)) return Changed(shard);
    if (auto cached = cache_->Find(set_, index)) return cached;
    const int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK;
    UniqueFd fd(::open(shard.path.c_str(), flags));
    if (!fd.valid() && IsOutOfDescriptors(errno)) {
      // The cache is the process's largest holder of descriptors: it gives
      // back half of them before the open is tried once more.
      cache_->ShedHalf();
      fd.Reset(::open(shard.path.c_str(), flags));
    }
    if (!fd.valid()) return OpenError(shard.path, errno);
    if (::fstat(fd.get(), &info) != 0 || !(IdentityOf(info) == shard.identity))
      return Changed(shard);
    return cache_->Insert(set_, index, std::make_shared<const UniqueFd>(std::move(fd)),
                          set_capacity_);
  }

  // Re-checks the identity after a read: a truncation during the pread shows
  // here rather than as a short read of stale data.
  bool StillListed(uint32_t index, int fd) const {
    struct stat info {};
    return ::fstat(fd, &info) == 0 && IdentityOf(info) == shards_[index].identity;
  }

  Status Changed(const Shard& shard) {
    changed_ = true;
    return Status::DataLoss(shard.path.string() +
                            " changed since it was indexed (size, mtime or inode differ); its "
                            "items fail until a job opens the dataset again, which re-indexes it");
  }

  const std::vector<Shard> shards_;
  const std::shared_ptr<ShardDescriptorCache> cache_;
  const uint64_t set_;
  const size_t set_capacity_;
  std::atomic<bool> changed_{false};
};

}  // namespace

ShardSource::~ShardSource() = default;

const std::vector<fs::path>& ShardSource::shards() const { return paths_; }

void ShardSource::ReleaseDescriptors() const { storage_->Release(); }

Result<std::unique_ptr<ShardSource>> ShardSource::Open(const std::vector<fs::path>& shards,
                                                       const ShardOptions& options) {
  if (shards.empty()) return Status::InvalidArgument("the shard list is empty");
  const bool use_cache =
      !options.index_cache_dir.empty() && PrepareIndexCacheDir(options.index_cache_dir);
  std::vector<std::string> names;
  names.reserve(shards.size());
  for (const fs::path& shard : shards) names.push_back(shard.string());
  return Build(
      names, options,
      [&](size_t i, ShardStats* idx_stats) {
        return ListShard(shards[i], options, use_cache, idx_stats);
      },
      [&](std::vector<ShardOrigin> origins) -> std::unique_ptr<Storage> {
        std::vector<LocalShards::Shard> opened;
        opened.reserve(origins.size());
        for (size_t s = 0; s < origins.size(); ++s) {
          opened.push_back(
              {shards[s], origins[s].identity, origins[s].info, origins[s].inode_kept});
        }
        auto cache = options.descriptors != nullptr
                         ? options.descriptors
                         : std::make_shared<ShardDescriptorCache>(options.max_open_shards);
        return std::make_unique<LocalShards>(std::move(opened), std::move(cache),
                                             options.max_open_shards);
      });
}

Result<std::unique_ptr<ShardSource>> ShardSource::Build(
    const std::vector<std::string>& shards, const ShardOptions& options,
    const std::function<Result<ShardListing>(size_t, ShardStats*)>& list_shard,
    const std::function<std::unique_ptr<Storage>(std::vector<ShardOrigin>)>& make_storage) {
  const auto start = std::chrono::steady_clock::now();
  if (shards.empty()) return Status::InvalidArgument("the shard list is empty");
  if (shards.size() > std::numeric_limits<uint32_t>::max())
    return Status::ResourceExhausted("too many shards");
  std::string json_field;
  if (options.label_key.rfind("json:", 0) == 0) {
    json_field = options.label_key.substr(5);
    if (json_field.empty()) return Status::InvalidArgument("label_key 'json:' needs a field name");
  } else if (!options.label_key.empty() && options.label_key != "cls") {
    return Status::InvalidArgument("label_key must be \"cls\", \"json:FIELD\" or None, not '" +
                                   options.label_key + "'");
  }

  std::unique_ptr<ShardSource> source(new ShardSource());
  // A member field is found by its extension, compared lower-case.
  std::vector<std::string> field_extensions;
  for (const std::string& field : options.fields) {
    field_extensions.push_back(IsSyntheticField(field) ? std::string() : Lower(field));
  }
  source->field_names_ = options.fields;
  // Each shard's samples are grouped by the thread that listed it, and the
  // listing (every member's name, offsets and label payload) is dropped
  // there: a million-sample set never holds all its listings at once.
  std::vector<Result<GroupedShard>> grouped(shards.size(), Status::Internal("not listed"));
  {
    ListingRegistration registration(shards.front(), "shards", "shards", shards.size());
    unsigned threads = options.index_threads != 0
                           ? options.index_threads
                           : std::max(1u, std::thread::hardware_concurrency());
    threads = static_cast<unsigned>(std::min<size_t>(threads, shards.size()));
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i = next++; i < shards.size(); i = next++) {
        if (StopRequested(options.stop)) {
          grouped[i] = options.stop->Why();
          continue;
        }
        ShardStats idx_stats;
        Result<ShardListing> listing = list_shard(i, &idx_stats);
        if (listing.ok()) {
          GroupedShard shard =
              GroupSamples(shards[i], *listing, options, field_extensions, json_field);
          shard.idx_stats = idx_stats;
          grouped[i] = std::move(shard);
        } else {
          grouped[i] = listing.status();
        }
        registration.progress().done++;
      }
    };
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (std::thread& t : pool) t.join();
  }

  std::vector<ShardOrigin> origins;
  origins.reserve(shards.size());
  ShardStats& stats = source->stats_;
  stats.shards = shards.size();
  uint64_t samples = 0, key_bytes = 0;
  for (const Result<GroupedShard>& shard : grouped) {
    if (!shard.ok()) return shard.status();
    samples += shard->samples.size();
    key_bytes += shard->keys.size();
  }
  if (samples >= std::numeric_limits<ItemId>::max())
    return Status::ResourceExhausted("more than 2^32-1 samples in the shard set");
  // Sized once: the kept listing is exactly as large as the samples need.
  source->items_.reserve(samples);
  source->key_offsets_.reserve(samples + 1);
  source->key_pool_.reserve(key_bytes);
  source->field_extents_.reserve(samples * field_extensions.size());
  for (size_t s = 0; s < shards.size(); ++s) {
    GroupedShard& shard = *grouped[s];
    origins.push_back(std::move(shard.origin));
    source->paths_.emplace_back(shards[s]);
    stats.stale_idx += shard.idx_stats.stale_idx;
    stats.from_idx += shard.idx_stats.from_idx;
    if (shard.from_cache) stats.from_cache++;
    stats.skipped_members += shard.skipped_members;
    if (!shard.damage.empty() && stats.damaged_shards++ == 0) {
      stats.first_damage = shards[s] + ": " + shard.damage;
    }
    stats.skipped_samples += shard.skipped_samples;
    for (std::string& name : shard.left_out) {
      if (stats.left_out.size() == kMaxLeftOutNamed) break;
      stats.left_out.push_back(std::move(name));
    }
    for (const auto& [extension, count] : shard.missing_members)
      stats.missing_members[extension] += count;
    for (const auto& [extension, count] : shard.duplicated_members)
      stats.duplicated_members[extension] += count;
    for (const std::string& extension : shard.member_extensions) {
      if (stats.member_extensions.size() == kMaxExtensionsNamed) break;
      stats.member_extensions.insert(extension);
    }
    const uint64_t key_base = source->key_pool_.size();
    for (size_t i = 0; i < shard.samples.size(); ++i) {
      const GroupedShard::Sample& sample = shard.samples[i];
      source->items_.push_back(
          {static_cast<uint32_t>(s), sample.offset, sample.size, sample.label});
      source->key_offsets_.push_back(key_base + shard.key_ends[i]);
    }
    source->key_pool_ += shard.keys;
    for (const auto& [offset, size] : shard.fields)
      source->field_extents_.push_back({offset, size});
    source->total_bytes_ += shard.bytes;
    shard = GroupedShard();  // freed as soon as it is copied
  }
  stats.samples = source->items_.size();
  if (!stats.left_out.empty()) stats.first_skipped_sample = stats.left_out.front();
  source->storage_ = make_storage(std::move(origins));
  const Storage& storage = *source->storage_;
  // Each shard as its storage names it, then each item's byte range.
  ContentFingerprintBuilder fingerprint("shards");
  fingerprint.AddInteger(shards.size());
  for (size_t s = 0; s < shards.size(); ++s)
    storage.AddFingerprint(static_cast<uint32_t>(s), fingerprint);
  for (const Item& item : source->items_) {
    fingerprint.AddInteger(item.shard);
    fingerprint.AddInteger(item.offset);
    fingerprint.AddInteger(item.size);
  }
  source->content_fingerprint_ = fingerprint.Finish();
  // What a copy keeps of each shard, with the keys and labels a resume
  // relies on.
  ContentFingerprintBuilder copy("shards-copy"), mtimes("shards-mtimes");
  copy.AddInteger(shards.size());
  for (size_t s = 0; s < shards.size(); ++s)
    storage.AddResumeKey(static_cast<uint32_t>(s), copy, mtimes);
  for (size_t i = 0; i < source->items_.size(); ++i) {
    const Item& item = source->items_[i];
    copy.AddInteger(item.shard);
    copy.AddInteger(item.offset);
    copy.AddInteger(item.size);
    copy.AddInteger(static_cast<uint64_t>(item.label));
    copy.AddString(std::string_view(source->key_pool_)
                       .substr(source->key_offsets_[i],
                               source->key_offsets_[i + 1] - source->key_offsets_[i]));
  }
  source->resume_key_ = {copy.Finish(), mtimes.Finish()};
  source->listed_at_ = std::chrono::steady_clock::now();
  stats.index_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return source;
}

double ShardSource::index_age_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - listed_at_).count();
}

std::string ShardSource::Locate(ItemId id) const {
  const std::string_view key =
      std::string_view(key_pool_).substr(key_offsets_[id], key_offsets_[id + 1] - key_offsets_[id]);
  return paths_[items_[id].shard].string() + ":" + std::string(key);
}

uint64_t ShardSource::held_bytes() const {
  uint64_t bytes = sizeof(Item) * items_.capacity() + key_pool_.capacity() +
                   sizeof(uint64_t) * key_offsets_.capacity() +
                   sizeof(Extent) * field_extents_.capacity();
  for (const fs::path& shard : paths_) bytes += sizeof(fs::path) + shard.native().size();
  for (const std::string& name : stats_.left_out) bytes += sizeof(std::string) + name.capacity();
  return bytes;
}

bool ShardSource::stale() const { return storage_->changed(); }

Status ShardSource::Verify(AccessChecker* checker, std::span<const ItemId> served,
                           bool* changed) const {
  std::vector<bool> holds_served(checker != nullptr ? paths_.size() : 0);
  if (checker != nullptr) {
    for (ItemId id : served) {
      if (id < items_.size()) holds_served[items_[id].shard] = true;
    }
  }
  return storage_->Verify(checker, holds_served, changed);
}

Status ShardSource::VerifyObjects(const objectstore::Access& access, bool* changed,
                                  ListingStop* stop) const {
  return storage_->VerifyObjects(access, changed, stop);
}

const objectstore::ObjectStoreCounters* ShardSource::object_counters() const {
  return storage_->object_counters();
}

ObjectReadCounts ShardSource::object_reads() const { return storage_->object_reads(); }

Status ShardSource::ReadExtentInto(uint32_t shard, uint64_t offset, std::span<uint8_t> out) const {
  return storage_->ReadInto(shard, offset, out);
}

Result<std::vector<uint8_t>> ShardSource::ReadExtent(uint32_t shard, Extent extent,
                                                     const std::string& what) const {
  // Checked before the buffer is made: a listing may claim any size.
  if (extent.size > kMaxMemberBytes) return TooLarge(what);
  std::vector<uint8_t> bytes(extent.size);
  GALLEY_RETURN_IF_ERROR(ReadExtentInto(shard, extent.offset, bytes));
  return bytes;
}

Result<std::vector<uint8_t>> ShardSource::Read(ItemId id) const {
  const Item& item = items_[id];
  return ReadExtent(item.shard, {item.offset, item.size}, Locate(id));
}

std::string_view ShardSource::KeyOf(ItemId id) const {
  // The pool holds "key.ext"; the key ends at the first dot of the base name.
  std::string_view name =
      std::string_view(key_pool_).substr(key_offsets_[id], key_offsets_[id + 1] - key_offsets_[id]);
  const size_t slash = name.rfind('/');
  const size_t dot = name.find('.', slash == std::string_view::npos ? 0 : slash + 1);
  return name.substr(0, dot);
}

Result<std::vector<uint8_t>> ShardSource::ReadHead(ItemId id, uint64_t max_bytes,
                                                   uint64_t* item_bytes) const {
  const Item& item = items_[id];
  *item_bytes = item.size;
  // From the storage: the cache planner times these reads as its rate.
  std::vector<uint8_t> bytes(std::min(item.size, max_bytes));
  GALLEY_RETURN_IF_ERROR(storage_->ReadFromStorage(item.shard, item.offset, bytes));
  return bytes;
}

Result<std::vector<uint8_t>> ShardSource::BuildRecord(
    ItemId id, const std::function<Status(size_t, std::span<uint8_t>)>& fill) const {
  const std::string shard = paths_[items_[id].shard].string();
  const std::string_view key = KeyOf(id);
  const size_t count = field_names_.size();
  auto text = [](std::string_view value) {
    return std::span(reinterpret_cast<const uint8_t*>(value.data()), value.size());
  };
  // Sized once, so that each member is written in its place and the record
  // never grows into a second copy of itself.
  uint64_t total = 0;
  for (size_t f = 0; f < count; ++f) {
    const std::string& name = field_names_[f];
    const uint64_t size = name == kKeyField   ? key.size()
                          : name == kUrlField ? shard.size()
                                              : field_extents_[id * count + f].size;
    if (size > kMaxMemberBytes)
      return TooLarge(shard + ": member " + std::string(key) + "." + name);
    total += sizeof(uint64_t) + size;
  }
  std::vector<uint8_t> record;
  record.reserve(total);
  for (size_t f = 0; f < count; ++f) {
    const std::string& name = field_names_[f];
    if (name == kKeyField) {
      wire::AppendFieldValue(&record, text(key));
    } else if (name == kUrlField) {
      wire::AppendFieldValue(&record, text(shard));
    } else {
      const std::span<uint8_t> value =
          wire::AppendFieldSpace(&record, field_extents_[id * count + f].size);
      GALLEY_RETURN_IF_ERROR(fill(f, value));
      Status valid = CheckFieldValue(name, value);
      if (!valid.ok()) {
        return Status::InvalidArgument(shard + ": member " + std::string(key) + "." + name + " " +
                                       valid.message());
      }
    }
  }
  return record;
}

Result<std::vector<uint8_t>> ShardSource::ReadFields(ItemId id) const {
  const size_t count = field_names_.size();
  const uint32_t shard = items_[id].shard;
  return BuildRecord(id, [&](size_t f, std::span<uint8_t> out) {
    if (out.empty()) return Status::Ok();
    return ReadExtentInto(shard, field_extents_[id * count + f].offset, out);
  });
}

std::optional<ShardSource::Extent> ShardSource::JointExtent(ItemId id) const {
  const Item& item = items_[id];
  const size_t count = field_names_.size();
  const std::span<const Extent> fields(field_extents_.data() + id * count, count);
  uint64_t begin = item.offset, end = item.offset + item.size, wanted = item.size;
  for (const Extent& e : fields) {
    if (e.size == 0) continue;
    begin = std::min(begin, e.offset);
    end = std::max(end, e.offset + e.size);
    wanted += e.size;
  }
  // Members far apart (a shard not written sample by sample) are read
  // one by one rather than with everything between them; so are large
  // ones, since what is read together is then copied to where it is kept:
  // a joint read costs up to twice its size while the item is in flight,
  // and is worth one pread only while small.
  constexpr uint64_t kMaxReadGap = 64 << 10;
  constexpr uint64_t kMaxJointReadBytes = 1 << 20;
  if (end - begin > wanted + kMaxReadGap || end - begin > kMaxJointReadBytes) return std::nullopt;
  return Extent{begin, end - begin};
}

std::vector<ShardExtent> ShardSource::ReadExtents(std::span<const ItemId> ids) const {
  std::vector<ShardExtent> extents;
  extents.reserve(ids.size());
  const size_t count = field_names_.size();
  for (ItemId id : ids) {
    if (id >= items_.size()) continue;
    const Item& item = items_[id];
    std::optional<Extent> joint;
    if (count != 0 && (joint = JointExtent(id))) {
      extents.push_back({item.shard, joint->offset, joint->size});
      continue;
    }
    for (size_t f = 0; f < count; ++f) {
      const Extent& e = field_extents_[id * count + f];
      if (e.size != 0) extents.push_back({item.shard, e.offset, e.size});
    }
    extents.push_back({item.shard, item.offset, item.size});
  }
  return extents;
}

void ShardSource::Prefetch(std::span<const ItemId> ids) const {
  storage_->Prefetch(ReadExtents(ids));
}

void ShardSource::PrefetchNextWave(std::span<const ItemId> ids) const {
  storage_->PrefetchNextWave(ReadExtents(ids));
}

Result<std::vector<uint8_t>> ShardSource::ReadWithFields(ItemId id,
                                                         std::vector<uint8_t>* record) const {
  const Item& item = items_[id];
  const size_t count = field_names_.size();
  const std::span<const Extent> fields(field_extents_.data() + id * count, count);
  const std::optional<Extent> joint = JointExtent(id);
  if (!joint) {
    GALLEY_ASSIGN_OR_RETURN(*record, ReadFields(id));
    return Read(id);
  }
  const uint64_t begin = joint->offset;
  GALLEY_ASSIGN_OR_RETURN(auto span, ReadExtent(item.shard, *joint, Locate(id)));
  auto slice = [&](const Extent& e) {
    return std::span<const uint8_t>(span).subspan(e.offset - begin, e.size);
  };
  GALLEY_ASSIGN_OR_RETURN(*record, BuildRecord(id, [&](size_t f, std::span<uint8_t> out) {
    const std::span<const uint8_t> member = slice(fields[f]);
    std::copy(member.begin(), member.end(), out.begin());
    return Status::Ok();
  }));
  const std::span<const uint8_t> image = slice({item.offset, item.size});
  return std::vector<uint8_t>(image.begin(), image.end());
}

}  // namespace galley
