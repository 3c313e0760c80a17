#include "galley/cache/disk_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "galley/errno_text.h"

namespace galley::cache {
namespace {

// An entry's file: a 64-byte header, all integers little-endian, then the
// payload and the field record.
//    0  magic "GLYD"           4  version (1)        5  flags (bit 0: has a record)
//    6  reserved (0, 2 B)      8  fingerprint high (u64)
//   16  fingerprint low (u64) 24  item (u32)         28  width (u32)
//   32  height (u32)          36  channels (u32)     40  payload length (u64)
//   48  record length (u64)   56  XXH3-64 of bytes 0..55, the payload, the record
// The key inside the file guards against a file renamed or copied to
// another entry's name; the checksum against a torn or damaged one.
constexpr size_t kHeaderBytes = 64;
constexpr char kMagic[4] = {'G', 'L', 'Y', 'D'};
constexpr uint8_t kVersion = 1;
constexpr uint8_t kHasRecord = 1;
constexpr uint64_t kBlockBytes = 4096;
constexpr int kFanout = 256;
constexpr const char* kEntriesFolder = "entries-v1";
constexpr const char* kRecordsFolder = "records-v1";
// A file being written is "<entry>.tmp-<pid>": the start-up scan removes
// the ones another process left (a crash; only one galleyd uses a folder at
// a time) and never one this process's writer is writing.
constexpr std::string_view kTempMark = ".tmp-";
// Entries a victim search passes over because jobs still need them, before
// it takes the least recently used one anyway: bounds the work of one write.
constexpr int kMaxDemandSkips = 1024;

void PutU32(uint8_t* at, uint32_t v) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutU64(uint8_t* at, uint64_t v) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetU32(const uint8_t* at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | at[i];
  return v;
}
uint64_t GetU64(const uint8_t* at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | at[i];
  return v;
}

uint64_t Charged(uint64_t file_bytes) {
  return (file_bytes + kBlockBytes - 1) / kBlockBytes * kBlockBytes;
}

uint64_t Checksum(const uint8_t* header, std::span<const uint8_t> payload,
                  std::span<const uint8_t> record) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, header, 56);
  XXH3_64bits_update(&state, payload.data(), payload.size());
  XXH3_64bits_update(&state, record.data(), record.size());
  return XXH3_64bits_digest(&state);
}

// Whether `name` is "<32 hex>-<8 hex>" (an entry), filling *key.
bool ParseEntryName(std::string_view name, DiskKey* key) {
  if (name.size() != 32 + 1 + 8 || name[32] != '-') return false;
  auto hex = [](std::string_view digits, uint64_t* out) {
    uint64_t v = 0;
    for (char c : digits) {
      int d;
      if (c >= '0' && c <= '9') {
        d = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        d = c - 'a' + 10;
      } else {
        return false;
      }
      v = (v << 4) | static_cast<uint64_t>(d);
    }
    *out = v;
    return true;
  };
  uint64_t item = 0;
  if (!hex(name.substr(0, 16), &key->dataset_high) ||
      !hex(name.substr(16, 16), &key->dataset_low) || !hex(name.substr(33, 8), &item)) {
    return false;
  }
  key->item = static_cast<uint32_t>(item);
  return true;
}

// Writes all of `parts` at the file's start; false with errno set.
bool WriteAll(int fd, std::vector<iovec> parts) {
  size_t index = 0;
  while (index < parts.size()) {
    const ssize_t n = ::writev(fd, parts.data() + index, static_cast<int>(parts.size() - index));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    size_t left = static_cast<size_t>(n);
    while (index < parts.size() && left >= parts[index].iov_len) {
      left -= parts[index].iov_len;
      ++index;
    }
    if (index < parts.size()) {
      parts[index].iov_base = static_cast<uint8_t*>(parts[index].iov_base) + left;
      parts[index].iov_len -= left;
    }
  }
  return true;
}

bool ReadAll(int fd, uint64_t offset, uint8_t* into, size_t bytes) {
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, into, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    into += n;
    bytes -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

// Makes `dir` (0700) or checks the one there: a real folder of ours,
// narrowed to 0700 when others may enter it.
Status PrepareFolder(const std::filesystem::path& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Internal("cannot make " + dir.string() + ": " + ErrnoText(errno));
  }
  struct stat info {};
  if (::lstat(dir.c_str(), &info) != 0) {
    return Status::Internal("cannot stat " + dir.string() + ": " + ErrnoText(errno));
  }
  if (S_ISLNK(info.st_mode) || !S_ISDIR(info.st_mode)) {
    return Status::PermissionDenied(dir.string() +
                                    " is not a folder (a symlink or a file); give a folder "
                                    "galleyd's user owns");
  }
  if (info.st_uid != ::geteuid()) {
    return Status::PermissionDenied(dir.string() + " is owned by uid " +
                                    std::to_string(info.st_uid) + ", not by galleyd's user (uid " +
                                    std::to_string(::geteuid()) +
                                    "); give galleyd a folder of its own");
  }
  if ((info.st_mode & 077) != 0) {
    spdlog::warn(
        "disk cache folder {} was mode {:04o}; narrowed to 0700 (entries can hold "
        "private pixels)",
        dir.string(), info.st_mode & 07777);
    if (::chmod(dir.c_str(), 0700) != 0) {
      return Status::Internal("cannot chmod 700 " + dir.string() + ": " + ErrnoText(errno));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<DiskTier>> DiskTier::Open(const DiskTierOptions& options,
                                                 const DemandTracker* demand) {
  if (!options.dir.is_absolute()) {
    return Status::InvalidArgument("the disk cache folder must be an absolute path, got '" +
                                   options.dir.string() + "'");
  }
  if (options.dir.has_parent_path()) {
    std::error_code ignored;
    std::filesystem::create_directories(options.dir.parent_path(), ignored);
  }
  GALLEY_RETURN_IF_ERROR(PrepareFolder(options.dir));
  std::unique_ptr<DiskTier> tier(new DiskTier(options, demand));
  const std::filesystem::path lock = options.dir / "lock";
  tier->lock_fd_.Reset(::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!tier->lock_fd_.valid()) {
    return Status::Internal("cannot open " + lock.string() + ": " + ErrnoText(errno));
  }
  if (::flock(tier->lock_fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    return Status::Unavailable(options.dir.string() +
                               " is in use by another galleyd; give each galleyd its own disk "
                               "cache folder");
  }
  struct statvfs space {};
  if (::statvfs(options.dir.c_str(), &space) == 0 &&
      uint64_t{space.f_bavail} * space.f_frsize < options.budget_bytes) {
    spdlog::warn(
        "disk cache {}: its budget is {} MiB but the file system has {} MiB free; writes "
        "it refuses are counted (write_errors), lower disk_cache_bytes to fit",
        options.dir.string(), options.budget_bytes >> 20,
        (uint64_t{space.f_bavail} * space.f_frsize) >> 20);
  }
  GALLEY_RETURN_IF_ERROR(PrepareFolder(tier->entries_dir_));
  GALLEY_RETURN_IF_ERROR(PrepareFolder(tier->records_dir()));
  for (int i = 0; i < kFanout; ++i) {
    char name[3];
    std::snprintf(name, sizeof(name), "%02x", i);
    GALLEY_RETURN_IF_ERROR(PrepareFolder(tier->entries_dir_ / name));
  }
  DiskTier* raw = tier.get();
  tier->writer_ = std::thread([raw] { raw->WriterLoop(); });
  tier->indexer_ = std::thread([raw] { raw->IndexLoop(); });
  return tier;
}

DiskTier::DiskTier(const DiskTierOptions& options, const DemandTracker* demand)
    : options_(options),
      demand_(demand),
      entries_dir_(options.dir / kEntriesFolder),
      temp_suffix_(std::string(kTempMark) + std::to_string(::getpid())) {
  stats_.budget_bytes = options.budget_bytes;
}

DiskTier::~DiskTier() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  queue_cv_.SignalAll();
  if (writer_.joinable()) writer_.join();
  if (indexer_.joinable()) indexer_.join();
}

std::string DiskTier::FileName(const DiskKey& key) {
  char name[48];
  std::snprintf(name, sizeof(name), "%016llx%016llx-%08x",
                static_cast<unsigned long long>(key.dataset_high),
                static_cast<unsigned long long>(key.dataset_low), key.item);
  return name;
}

std::string DiskTier::Subfolder(const DiskKey& key) const {
  // A hash of the whole key spreads one dataset's items over every folder.
  const uint64_t words[3] = {key.dataset_high, key.dataset_low, key.item};
  char name[3];
  std::snprintf(name, sizeof(name), "%02x",
                static_cast<unsigned>(XXH3_64bits(words, sizeof(words)) % kFanout));
  return name;
}

std::filesystem::path DiskTier::EntryPath(const DiskKey& key) const {
  return entries_dir_ / Subfolder(key) / FileName(key);
}

std::filesystem::path DiskTier::records_dir() const { return options_.dir / kRecordsFolder; }

bool DiskTier::MayHold(const DiskKey& key) const {
  // By name, as Get opens it: the start-up index may not list it yet.
  struct stat info {};
  return ::lstat(EntryPath(key).c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         info.st_uid == ::geteuid();
}

uint64_t DiskTier::IndexKeyLocked(const DiskKey& key) {
  // Few datasets, many items: the index keeps a dataset's number, not its
  // 16-byte fingerprint, per entry.
  const std::pair<uint64_t, uint64_t> fingerprint(key.dataset_high, key.dataset_low);
  auto [it, added] =
      fingerprint_numbers_.try_emplace(fingerprint, static_cast<uint32_t>(fingerprints_.size()));
  if (added) fingerprints_.push_back(fingerprint);
  return (uint64_t{it->second} << 32) | key.item;
}

DiskKey DiskTier::DiskKeyOf(uint64_t index_key) const {
  const auto& fingerprint = fingerprints_[index_key >> 32];
  return DiskKey{fingerprint.first, fingerprint.second, static_cast<uint32_t>(index_key)};
}

std::shared_ptr<Blob> DiskTier::Get(const DiskKey& key, Key cache_key) {
  const std::string path = EntryPath(key).string();
  auto miss = [&] {
    MutexLock lock(&mu_);
    stats_.misses++;
    return nullptr;
  };
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return miss();
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) return miss();
  auto damaged = [&] {
    DropDamaged(key, path, info.st_ino);
    return miss();
  };
  const uint64_t size = static_cast<uint64_t>(info.st_size);
  if (!S_ISREG(info.st_mode) || info.st_uid != ::geteuid() || size < kHeaderBytes ||
      size - kHeaderBytes > options_.max_entry_bytes) {
    return damaged();
  }
  uint8_t header[kHeaderBytes];
  if (!ReadAll(fd.get(), 0, header, kHeaderBytes)) return damaged();
  const uint64_t payload_bytes = GetU64(header + 40);
  const uint64_t record_bytes = GetU64(header + 48);
  const uint8_t flags = header[5];
  if (std::memcmp(header, kMagic, 4) != 0 || header[4] != kVersion || (flags & ~kHasRecord) != 0 ||
      GetU64(header + 8) != key.dataset_high || GetU64(header + 16) != key.dataset_low ||
      GetU32(header + 24) != key.item || payload_bytes > size - kHeaderBytes ||
      record_bytes != size - kHeaderBytes - payload_bytes ||
      ((flags & kHasRecord) == 0 && record_bytes != 0)) {
    return damaged();
  }
  auto blob = std::make_shared<Blob>();
  blob->width = GetU32(header + 28);
  blob->height = GetU32(header + 32);
  blob->channels = GetU32(header + 36);
  blob->bytes.resize(payload_bytes);
  std::vector<uint8_t> record(record_bytes);
  if (!ReadAll(fd.get(), kHeaderBytes, blob->bytes.data(), payload_bytes) ||
      !ReadAll(fd.get(), kHeaderBytes + payload_bytes, record.data(), record_bytes) ||
      Checksum(header, blob->bytes, record) != GetU64(header + 56)) {
    return damaged();
  }
  if ((flags & kHasRecord) != 0) {
    blob->fields = std::make_shared<const std::vector<uint8_t>>(std::move(record));
  }
  MutexLock lock(&mu_);
  stats_.hits++;
  auto it = index_.find(IndexKeyLocked(key));
  if (it != index_.end()) {
    lru_.splice(lru_.end(), lru_, it->second.order);  // most recently used
    it->second.cache_key = cache_key;
    it->second.has_cache_key = true;
  }
  return blob;
}

void DiskTier::DropDamaged(const DiskKey& key, const std::string& path, ino_t inode) {
  uint64_t damaged = 0;
  {
    MutexLock lock(&mu_);
    damaged = ++stats_.damaged;
    // Under mu_, so the writer cannot rename a sound entry over it between
    // the check and the unlink (it renames under mu_ too).
    struct stat now {};
    if (::lstat(path.c_str(), &now) == 0 && now.st_ino == inode) ::unlink(path.c_str());
    RemoveLocked(IndexKeyLocked(key));
  }
  // The first and then every 1024th: a failing disk damages many.
  if (damaged % 1024 == 1) {
    spdlog::warn(
        "disk cache: {} is damaged (short, or its header or checksum is wrong); removed, "
        "its item is read from storage again ({} so far)",
        path, damaged);
  }
}

void DiskTier::RemoveLocked(uint64_t index_key) {
  auto it = index_.find(index_key);
  if (it == index_.end()) return;
  bytes_ -= it->second.charged_bytes;
  lru_.erase(it->second.order);
  index_.erase(it);
}

bool DiskTier::Erase(const DiskKey& key) {
  MutexLock lock(&mu_);
  const uint64_t index_key = IndexKeyLocked(key);
  const bool known = index_.count(index_key) != 0;
  RemoveLocked(index_key);
  ::unlink(EntryPath(key).c_str());
  return known;
}

bool DiskTier::Put(const DiskKey& key, Key cache_key, BlobPtr blob, Encoder encode) {
  if (blob == nullptr) return false;
  const uint64_t queued =
      blob->payload().size() + (blob->fields ? blob->fields->size() : 0) + kHeaderBytes;
  {
    MutexLock lock(&mu_);
    if (stop_) return false;
    if (index_.count(IndexKeyLocked(key)) != 0) return true;
    if (queued_bytes_ + queued > options_.write_queue_bytes ||
        Charged(queued) > options_.budget_bytes) {
      stats_.write_drops++;
      return false;
    }
    queued_bytes_ += queued;
    queue_.push_back(PendingWrite{key, cache_key, std::move(blob), std::move(encode), queued});
  }
  queue_cv_.Signal();
  return true;
}

std::vector<std::string> DiskTier::MakeRoomLocked(uint64_t bytes) {
  std::vector<std::string> victims;
  int skipped = 0;
  auto it = lru_.begin();
  while (bytes_ + bytes > options_.budget_bytes && !lru_.empty()) {
    if (it == lru_.end()) {
      it = lru_.begin();
      skipped = kMaxDemandSkips;  // everything is needed: least recently used goes
    }
    const uint64_t index_key = *it;
    const Entry& entry = index_.at(index_key);
    if (skipped < kMaxDemandSkips && demand_ != nullptr && entry.has_cache_key &&
        demand_->Demand(entry.cache_key) > 0) {
      ++skipped;
      ++it;
      continue;
    }
    ++it;
    victims.push_back(EntryPath(DiskKeyOf(index_key)).string());
    RemoveLocked(index_key);
    stats_.evictions++;
  }
  return victims;
}

bool DiskTier::WriteFile(const DiskKey& key, const Blob& blob, uint64_t* charged) {
  const std::span<const uint8_t> payload = blob.payload();
  const std::span<const uint8_t> record =
      blob.fields != nullptr ? std::span<const uint8_t>(*blob.fields) : std::span<const uint8_t>();
  uint8_t header[kHeaderBytes] = {};
  std::memcpy(header, kMagic, 4);
  header[4] = kVersion;
  header[5] = blob.fields != nullptr ? kHasRecord : 0;
  PutU64(header + 8, key.dataset_high);
  PutU64(header + 16, key.dataset_low);
  PutU32(header + 24, key.item);
  PutU32(header + 28, blob.width);
  PutU32(header + 32, blob.height);
  PutU32(header + 36, blob.channels);
  PutU64(header + 40, payload.size());
  PutU64(header + 48, record.size());
  PutU64(header + 56, Checksum(header, payload, record));
  *charged = Charged(kHeaderBytes + payload.size() + record.size());

  const std::string path = EntryPath(key).string();
  const std::string temp = path + temp_suffix_;
  UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  bool ok = fd.valid();
  if (ok) {
    ok = WriteAll(fd.get(), {iovec{header, kHeaderBytes},
                             iovec{const_cast<uint8_t*>(payload.data()), payload.size()},
                             iovec{const_cast<uint8_t*>(record.data()), record.size()}});
  }
  const int error = errno;
  if (fd.valid()) fd.Reset();
  if (!ok) {
    ::unlink(temp.c_str());
    // The first failure and then every 1024th: a full disk fails every write.
    if (write_failures_++ % 1024 == 0) {
      spdlog::warn(
          "disk cache: cannot write {}: {}; the item stays uncached ({} such writes "
          "so far)",
          temp, ErrnoText(error), write_failures_);
    }
    return false;
  }
  return true;
}

void DiskTier::WriterLoop() {
  for (;;) {
    PendingWrite write;
    {
      MutexLock lock(&mu_);
      while (!stop_ && queue_.empty()) queue_cv_.Wait(&mu_);
      if (stop_) {
        queue_.clear();
        queued_bytes_ = 0;
        writing_ = false;
        idle_cv_.SignalAll();
        return;
      }
      write = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
      if (index_.count(IndexKeyLocked(write.key)) != 0) write.blob = nullptr;  // written since
    }
    BlobPtr blob = std::move(write.blob);
    if (blob != nullptr && write.encode) blob = write.encode(*blob);
    if (blob != nullptr) {
      uint64_t charged = 0;
      const std::string path = EntryPath(write.key).string();
      const bool written = WriteFile(write.key, *blob, &charged);
      std::vector<std::string> victims;
      {
        MutexLock lock(&mu_);
        const uint64_t index_key = IndexKeyLocked(write.key);
        if (!written) {
          stats_.write_errors++;
        } else if (index_.count(index_key) != 0 || charged > options_.budget_bytes) {
          ::unlink((path + temp_suffix_).c_str());
        } else {
          victims = MakeRoomLocked(charged);
          if (::rename((path + temp_suffix_).c_str(), path.c_str()) != 0) {
            stats_.write_errors++;
            ::unlink((path + temp_suffix_).c_str());
          } else {
            lru_.push_back(index_key);
            index_[index_key] = Entry{charged, write.cache_key, true, std::prev(lru_.end())};
            bytes_ += charged;
            stats_.writes++;
          }
        }
      }
      for (const std::string& victim : victims) ::unlink(victim.c_str());
    }
    MutexLock lock(&mu_);
    queued_bytes_ -= write.queued_bytes;
    writing_ = false;
    if (queue_.empty()) idle_cv_.SignalAll();
  }
}

void DiskTier::IndexLoop() {
  const auto start = std::chrono::steady_clock::now();
  struct Found {
    int64_t mtime_ns;
    DiskKey key;
    uint64_t charged;
  };
  std::vector<Found> found;
  uint64_t foreign = 0;
  for (int i = 0; i < kFanout; ++i) {
    {
      MutexLock lock(&mu_);
      if (stop_) break;
    }
    char name[3];
    std::snprintf(name, sizeof(name), "%02x", i);
    const std::filesystem::path folder = entries_dir_ / name;
    UniqueFd folder_fd(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    if (!folder_fd.valid()) continue;
    DIR* listing = ::fdopendir(::dup(folder_fd.get()));
    if (listing == nullptr) continue;
    while (const dirent* child = ::readdir(listing)) {
      const std::string_view file = child->d_name;
      if (file == "." || file == "..") continue;
      DiskKey key;
      if (file.size() > 41 + kTempMark.size() && file.substr(41, kTempMark.size()) == kTempMark &&
          ParseEntryName(file.substr(0, 41), &key)) {
        // Another process's write, cut short by a crash: never renamed into
        // place. This process's own are in flight.
        if (file.substr(41) != temp_suffix_) ::unlinkat(folder_fd.get(), child->d_name, 0);
        continue;
      }
      struct stat info {};
      if (!ParseEntryName(file, &key) || Subfolder(key) != name ||
          ::fstatat(folder_fd.get(), child->d_name, &info, AT_SYMLINK_NOFOLLOW) != 0 ||
          !S_ISREG(info.st_mode) || info.st_uid != ::geteuid()) {
        ++foreign;
        continue;
      }
      found.push_back(Found{int64_t{info.st_mtim.tv_sec} * 1000000000 + info.st_mtim.tv_nsec, key,
                            Charged(static_cast<uint64_t>(info.st_size))});
    }
    ::closedir(listing);
  }
  // Newest first, each put in front: the oldest ends up first to go, and
  // all of them before anything this run wrote or read.
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.mtime_ns > b.mtime_ns; });
  // In slices, so lookups and writes wait for mu_ a few milliseconds at a
  // time, not for the whole of a million entries.
  constexpr size_t kSlice = 4096;
  for (size_t begin = 0; begin < found.size(); begin += kSlice) {
    MutexLock lock(&mu_);
    for (size_t i = begin; i < std::min(found.size(), begin + kSlice); ++i) {
      const uint64_t index_key = IndexKeyLocked(found[i].key);
      if (index_.count(index_key) != 0) continue;  // written or read already
      lru_.push_front(index_key);
      index_[index_key] = Entry{found[i].charged, 0, false, lru_.begin()};
      bytes_ += found[i].charged;
    }
  }
  std::vector<std::string> victims;
  {
    MutexLock lock(&mu_);
    victims = MakeRoomLocked(0);
  }
  for (const std::string& victim : victims) ::unlink(victim.c_str());
  {
    MutexLock lock(&mu_);
    stats_.foreign_files = foreign;
    stats_.index_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    indexed_ = true;
  }
  idle_cv_.SignalAll();
  spdlog::info("disk cache {}: {} entries, {} MiB of {} MiB, indexed in {:.2f} s{}",
               options_.dir.string(), found.size(), Stats().bytes >> 20,
               options_.budget_bytes >> 20, Stats().index_seconds,
               foreign > 0 ? fmt::format(" ({} other files left alone)", foreign) : "");
}

void DiskTier::WaitForWrites() {
  MutexLock lock(&mu_);
  while (!stop_ && (!queue_.empty() || writing_)) idle_cv_.Wait(&mu_);
}

void DiskTier::WaitForIndex() {
  MutexLock lock(&mu_);
  while (!stop_ && !indexed_) idle_cv_.Wait(&mu_);
}

DiskTierStats DiskTier::Stats() const {
  MutexLock lock(&mu_);
  DiskTierStats s = stats_;
  s.bytes = bytes_;
  s.entries = index_.size();
  s.write_queue_bytes = queued_bytes_;
  s.indexed = indexed_;
  return s;
}

}  // namespace galley::cache
