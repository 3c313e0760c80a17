#include "galley/dataset/file_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>

#include "galley/dataset/descriptor_exhaustion.h"
#include "galley/dataset/listing_progress.h"
#include "galley/dataset/manifest_table.h"
#include "galley/errno_text.h"
#include "galley/unique_fd.h"
#include "wire/field_record.h"
#include "wire/messages.h"

namespace galley {
namespace {

namespace fs = std::filesystem;

// torchvision.datasets.folder.IMG_EXTENSIONS, matched case-insensitively.
constexpr const char* kImageExtensions[] = {".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
                                            ".pgm", ".tif",  ".tiff", ".webp"};

bool IsWithin(const fs::path& path, const fs::path& dir) { return IsWithinDirectory(path, dir); }

// A file descriptor that closes itself.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// A non-directory entry of a walked directory. Only a symlink (or an entry
// whose type the directory did not say) can resolve outside the directory,
// so only those are resolved when listed.
struct WalkedFile {
  std::string name;
  bool may_leave = false;
  bool operator<(const WalkedFile& other) const { return name < other.name; }
};

// One directory as os.walk yields it: its path relative to the root, and
// its non-directory entries.
struct WalkedDirectory {
  std::string relative;
  std::vector<WalkedFile> files;
};

// os.walk(top, followlinks=True), collecting every directory. Symlinked
// directories are followed, but never outside `boundary`, and never into one
// of their own ancestors (os.walk would loop until the path grew too long).
Status Walk(const fs::path& boundary, const fs::path& directory, const std::string& relative,
            std::vector<fs::path>& ancestors, std::vector<WalkedDirectory>& out,
            ListingStop* stop) {
  std::error_code error;
  const fs::path canonical = fs::canonical(directory, error);
  if (error)
    return Status::NotFound("cannot resolve " + directory.string() + ": " + error.message());
  if (!IsWithin(canonical, boundary)) {
    return Status::PermissionDenied("symlink " + directory.string() + " leads outside the root");
  }
  if (std::find(ancestors.begin(), ancestors.end(), canonical) != ancestors.end()) {
    return Status::InvalidArgument("symlink cycle at " + directory.string());
  }
  WalkedDirectory walked{relative, {}};
  std::vector<std::string> subdirectories;
  fs::directory_iterator it(directory, error);
  if (error) return Status::NotFound("cannot list " + directory.string() + ": " + error.message());
  for (; it != fs::directory_iterator(); it.increment(error)) {
    if (error) break;
    if (StopRequested(stop)) return stop->Why();
    const std::string name = it->path().filename().string();
    std::error_code type_error;
    // is_directory follows symlinks, as os.scandir's entry.is_dir() does.
    if (it->is_directory(type_error)) {
      subdirectories.push_back(name);
    } else {
      std::error_code link_error;
      const bool symlink = it->is_symlink(link_error);
      walked.files.push_back({name, symlink || static_cast<bool>(link_error)});
    }
  }
  if (error) return Status::NotFound("cannot list " + directory.string() + ": " + error.message());
  out.push_back(std::move(walked));
  ancestors.push_back(canonical);
  for (const std::string& name : subdirectories) {
    GALLEY_RETURN_IF_ERROR(
        Walk(boundary, directory / name, relative + "/" + name, ancestors, out, stop));
  }
  ancestors.pop_back();
  return Status::Ok();
}

// Folds what identifies one version of a file into `hash`: a path that
// cannot be stat'ed folds a marker, so its vanishing changes the result.
uint64_t FoldIdentity(uint64_t hash, const struct stat* info) {
  auto mix = [&hash](uint64_t value) {
    hash ^= value + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2);
  };
  if (info == nullptr) {
    mix(~uint64_t{0});
    return hash;
  }
  mix(info->st_dev);
  mix(info->st_ino);
  mix(static_cast<uint64_t>(info->st_size));
  mix(static_cast<uint64_t>(info->st_mtim.tv_sec) * 1000000000ULL +
      static_cast<uint64_t>(info->st_mtim.tv_nsec));
  mix(static_cast<uint64_t>(info->st_ctim.tv_sec) * 1000000000ULL +
      static_cast<uint64_t>(info->st_ctim.tv_nsec));
  return hash;
}

bool ParseInteger(std::string_view text, int64_t& value) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end;
}

// The lines of `in` (a last one without a newline counts), leaving it
// rewound to the start; 0 when `stop` asked to give up.
uint64_t CountLines(std::istream& in, ListingStop* stop) {
  uint64_t lines = 0;
  char last = '\n';
  std::vector<char> chunk(1 << 20);
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
    if (StopRequested(stop)) break;
    const auto n = static_cast<size_t>(in.gcount());
    lines += static_cast<uint64_t>(std::count(chunk.data(), chunk.data() + n, '\n'));
    last = chunk[n - 1];
  }
  if (last != '\n') ++lines;
  in.clear();
  in.seekg(0);
  return lines;
}

}  // namespace

bool HasImageExtension(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* extension : kImageExtensions) {
    const size_t n = std::strlen(extension);
    if (lower.size() >= n && lower.compare(lower.size() - n, n, extension) == 0) return true;
  }
  return false;
}

Status NoClassFolders(const std::string& root) {
  return Status::InvalidArgument("no class folders in " + root);
}

Status EmptyClassFolder(const std::string& name) {
  // torchvision's make_dataset raises for an empty class too: a silently
  // missing class would shift no labels but would surprise a user.
  return Status::InvalidArgument("class folder '" + name +
                                 "' has no image files (extensions: .jpg .jpeg .png .ppm "
                                 ".bmp .pgm .tif .tiff .webp)");
}

bool IsWithinDirectory(const fs::path& path, const fs::path& dir) {
  auto p = path.begin();
  for (auto d = dir.begin(); d != dir.end(); ++d, ++p) {
    if (p == path.end() || *p != *d) return false;
  }
  return true;
}

Result<std::unique_ptr<FileSource>> FileSource::Open(const fs::path& canonical,
                                                     const ManifestOptions& options) {
  std::unique_ptr<FileSource> source(new FileSource());
  source->root_ = canonical;
  source->fingerprint_ = std::make_unique<ContentFingerprintBuilder>("files");
  source->copy_fingerprint_ = std::make_unique<ContentFingerprintBuilder>("files-copy");
  source->mtimes_fingerprint_ = std::make_unique<ContentFingerprintBuilder>("files-mtimes");
  source->inodes_kept_ = InodesAgreeAcrossMounts(canonical);
  std::error_code error;
  if (fs::is_directory(canonical, error)) {
    ListingRegistration registration(canonical.string(), "folder", "files", 0);
    source->progress_ = &registration.progress();
    source->stop_ = options.stop;
    source->base_dir_ = canonical;
    source->directories_.push_back("");
    const Status scanned = source->ScanImageFolder();
    source->progress_ = nullptr;
    source->stop_ = nullptr;
    GALLEY_RETURN_IF_ERROR(scanned);
  } else if (fs::is_regular_file(canonical, error)) {
    ListingRegistration registration(canonical.string(), "manifest", "lines", 0);
    source->progress_ = &registration.progress();
    source->stop_ = options.stop;
    source->base_dir_ = canonical.parent_path();
    source->directories_.push_back(canonical.filename().string());
    std::ifstream in(canonical);
    if (!in) return Status::NotFound("cannot read manifest " + canonical.string());
    const Status read = source->ReadManifest(in, options);
    source->progress_ = nullptr;
    source->stop_ = nullptr;
    GALLEY_RETURN_IF_ERROR(read);
  } else {
    return Status::InvalidArgument("dataset root " + canonical.string() +
                                   " is neither a directory nor a manifest file");
  }
  source->directories_fingerprint_ = source->DirectoriesFingerprint();
  // The folder the relative paths hang from makes each of them absolute:
  // a clone of the files elsewhere gets another fingerprint.
  source->fingerprint_->AddString(source->base_dir_.string());
  source->content_fingerprint_ = source->fingerprint_->Finish();
  source->fingerprint_.reset();
  // The classes and the count close the copy's fingerprint: a label names a
  // class only through them.
  for (const std::string& name : source->classes_) source->copy_fingerprint_->AddString(name);
  source->copy_fingerprint_->AddInteger(source->size());
  source->resume_key_ = {source->copy_fingerprint_->Finish(),
                         source->mtimes_fingerprint_->Finish()};
  source->copy_fingerprint_.reset();
  source->mtimes_fingerprint_.reset();
  // The listing grew by doubling; what it keeps for the dataset's lifetime
  // is what it holds, not up to twice that.
  source->path_pool_.shrink_to_fit();
  source->path_offsets_.shrink_to_fit();
  source->labels_.shrink_to_fit();
  source->record_pool_.shrink_to_fit();
  source->record_offsets_.shrink_to_fit();
  return source;
}

Result<std::unique_ptr<FileSource>> FileSource::OpenManifestText(const std::string& name,
                                                                 const std::string& text,
                                                                 const ManifestOptions& options,
                                                                 PathCheck check) {
  std::unique_ptr<FileSource> source(new FileSource());
  // The name stands for the path in messages and says the table format by
  // its extension; nothing is looked up on the local file system.
  source->root_ = name;
  source->path_check_ = std::move(check);
  source->fingerprint_ = std::make_unique<ContentFingerprintBuilder>("files");
  source->copy_fingerprint_ = std::make_unique<ContentFingerprintBuilder>("files-copy");
  source->mtimes_fingerprint_ = std::make_unique<ContentFingerprintBuilder>("files-mtimes");
  ListingRegistration registration(name, "manifest", "lines", 0);
  source->progress_ = &registration.progress();
  source->stop_ = options.stop;
  std::istringstream in(text);
  const Status read = source->ReadManifest(in, options);
  source->progress_ = nullptr;
  source->stop_ = nullptr;
  GALLEY_RETURN_IF_ERROR(read);
  source->content_fingerprint_ = source->fingerprint_->Finish();
  source->fingerprint_.reset();
  source->resume_key_ = {source->copy_fingerprint_->Finish(),
                         source->mtimes_fingerprint_->Finish()};
  source->copy_fingerprint_.reset();
  source->mtimes_fingerprint_.reset();
  return source;
}

void FileSource::AddItem(const std::string& relative_path, int64_t label,
                         const struct stat* found_info) {
  path_pool_ += relative_path;
  path_offsets_.push_back(path_pool_.size());
  labels_.push_back(label);
  const bool found = found_info != nullptr;
  struct stat info {};
  if (found) info = *found_info;
  if (found) total_bytes_ += static_cast<uint64_t>(info.st_size);
  items_fingerprint_ = FoldIdentity(items_fingerprint_, found ? &info : nullptr);
  // No device number: it differs between two mounts of one export.
  const uint64_t size = found ? static_cast<uint64_t>(info.st_size) : ~uint64_t{0};
  const uint64_t mtime = found ? static_cast<uint64_t>(info.st_mtim.tv_sec) * 1000000000ULL +
                                     static_cast<uint64_t>(info.st_mtim.tv_nsec)
                               : 0;
  fingerprint_->AddString(relative_path);
  fingerprint_->AddInteger(size);
  fingerprint_->AddInteger(mtime);
  if (found) {
    fingerprint_->AddFileOrigin(info, inodes_kept_);
  } else {
    fingerprint_->AddInteger(~uint64_t{0});
  }
  // A copy (cp -r) keeps the names and bytes but not the times.
  copy_fingerprint_->AddString(relative_path);
  copy_fingerprint_->AddInteger(size);
  copy_fingerprint_->AddInteger(static_cast<uint64_t>(label));
  mtimes_fingerprint_->AddInteger(mtime);
}

uint64_t FileSource::DirectoriesFingerprint() const {
  uint64_t hash = 0;
  for (const std::string& relative : directories_) {
    struct stat info {};
    const fs::path path = relative.empty() ? base_dir_ : base_dir_ / relative;
    hash = FoldIdentity(hash, ::stat(path.c_str(), &info) == 0 ? &info : nullptr);
  }
  return hash;
}

Status FileSource::Verify(AccessChecker* checker, std::span<const ItemId> served,
                          bool* changed) const {
  Status denied = checker != nullptr ? checker->CheckDirectory(base_dir_) : Status::Ok();
  uint64_t items = 0;
  size_t next = 0;  // the next served id
  // Items are listed directory by directory: each is stat'ed relative to its
  // directory, opened once for all of its items.
  std::string_view open_directory;
  std::optional<ScopedFd> directory_fd;
  for (ItemId id = 0; id < size(); ++id) {
    const std::string_view relative = relative_path(id);
    const size_t slash = relative.rfind('/');
    const std::string_view directory =
        slash == std::string_view::npos ? std::string_view() : relative.substr(0, slash);
    if (!directory_fd || directory != open_directory) {
      open_directory = directory;
      directory_fd.emplace(
          ::open((base_dir_ / std::string(directory)).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    }
    const std::string name(relative.substr(slash == std::string_view::npos ? 0 : slash + 1));
    struct stat info {};
    const bool found =
        directory_fd->get() >= 0
            ? ::fstatat(directory_fd->get(), name.c_str(), &info, 0) == 0
            : ::stat((base_dir_ / fs::path(std::string(relative))).c_str(), &info) == 0;
    items = FoldIdentity(items, found ? &info : nullptr);
    while (next < served.size() && served[next] < id) ++next;
    // A file gone since the listing fails as a sample error when read; the
    // listing is stale anyway.
    if (found && denied.ok() && checker != nullptr && next < served.size() && served[next] == id) {
      denied = checker->CheckFile(base_dir_ / fs::path(std::string(relative)), info);
    }
  }
  *changed = items != items_fingerprint_ || DirectoriesFingerprint() != directories_fingerprint_;
  return denied;
}

Status FileSource::ScanImageFolder() {
  // find_classes: sorted names of the root's subdirectories (links followed).
  std::error_code error;
  for (fs::directory_iterator it(root_, error); !error && it != fs::directory_iterator();
       it.increment(error)) {
    std::error_code type_error;
    if (it->is_directory(type_error)) classes_.push_back(it->path().filename().string());
  }
  if (error) return Status::NotFound("cannot list " + root_.string() + ": " + error.message());
  if (classes_.empty()) return NoClassFolders(root_.string());
  std::sort(classes_.begin(), classes_.end());
  progress_->classes = classes_.size();
  // make_dataset: for each class, sorted(os.walk(class_dir)) (directories in
  // path-string order), then each directory's files sorted by name.
  for (size_t label = 0; label < classes_.size(); ++label) {
    std::vector<WalkedDirectory> directories;
    std::vector<fs::path> ancestors;
    GALLEY_RETURN_IF_ERROR(
        Walk(root_, root_ / classes_[label], classes_[label], ancestors, directories, stop_));
    std::sort(
        directories.begin(), directories.end(),
        [](const WalkedDirectory& a, const WalkedDirectory& b) { return a.relative < b.relative; });
    const size_t before = size();
    for (WalkedDirectory& directory : directories) {
      directories_.push_back(directory.relative);
      std::sort(directory.files.begin(), directory.files.end());
      // Each file is stat'ed relative to its directory: a path lookup of one
      // component instead of the whole path, for each of a million files.
      const ScopedFd directory_fd(
          ::open((root_ / directory.relative).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      for (const WalkedFile& file : directory.files) {
        if (StopRequested(stop_)) return stop_->Why();
        if (!HasImageExtension(file.name)) continue;
        const std::string relative = directory.relative + "/" + file.name;
        // Walk resolved the directory inside the root; a file that is not a
        // symlink stays in it.
        if (file.may_leave) {
          const fs::path resolved = fs::weakly_canonical(root_ / relative, error);
          if (error || !IsWithin(resolved, root_)) {
            return Status::PermissionDenied("symlink " + (root_ / relative).string() +
                                            " leads outside the root");
          }
        }
        struct stat info {};
        const bool found = directory_fd.get() >= 0
                               ? ::fstatat(directory_fd.get(), file.name.c_str(), &info, 0) == 0
                               : ::stat((root_ / relative).c_str(), &info) == 0;
        AddItem(relative, static_cast<int64_t>(label), found ? &info : nullptr);
        progress_->done++;
      }
    }
    progress_->classes_done++;
    if (size() == before) return EmptyClassFolder(classes_[label]);
  }
  return Status::Ok();
}

Result<std::string> FileSource::CheckListedPath(const std::string& path,
                                                const std::string& where) const {
  if (path_check_) return path_check_(path, where);
  const fs::path relative(path);
  if (relative.is_absolute()) {
    return Status::PermissionDenied(where + "absolute path '" + path + "' refused");
  }
  const fs::path normal = (base_dir_ / relative).lexically_normal();
  if (!IsWithin(normal, base_dir_)) {
    return Status::PermissionDenied(where + "path '" + path + "' leaves the root");
  }
  std::error_code error;
  if (!fs::exists(normal, error)) {
    return Status::NotFound(where + "file '" + path + "' does not exist");
  }
  const fs::path resolved = fs::canonical(normal, error);
  if (error || !IsWithin(resolved, base_dir_)) {
    return Status::PermissionDenied(where + "symlink '" + path + "' leads outside the root");
  }
  return normal.lexically_relative(base_dir_).string();
}

Status FileSource::AddListedItems(const std::vector<ListedLine>& lines, Labels labels) {
  const bool labelled = labels != Labels::kNone;
  int64_t number = 0;
  const bool numeric = labels == Labels::kIntegersOrNames &&
                       std::all_of(lines.begin(), lines.end(), [&](const ListedLine& line) {
                         return ParseInteger(line.label, number);
                       });
  std::map<std::string, int64_t> class_index;
  if (labelled && !numeric) {
    for (const ListedLine& line : lines) class_index.emplace(line.label, 0);
    for (auto& [name, index] : class_index) {
      index = static_cast<int64_t>(classes_.size());
      classes_.push_back(name);
    }
  }
  for (const ListedLine& line : lines) {
    if (StopRequested(stop_)) return stop_->Why();
    int64_t label = -1;
    if (labelled && numeric) {
      ParseInteger(line.label, label);
    } else if (labelled) {
      label = class_index.at(line.label);
    }
    struct stat info {};
    // Items named through path_check_ are not local files.
    const bool found = !path_check_ && ::stat((base_dir_ / line.path).c_str(), &info) == 0;
    AddItem(line.path, label, found ? &info : nullptr);
  }
  return Status::Ok();
}

class FileSource::LineReader {
 public:
  LineReader(std::istream& in, const fs::path& manifest, const ManifestOptions& options)
      : in_(in),
        manifest_(manifest),
        max_line_bytes_(options.max_line_bytes),
        stop_(options.stop),
        chunk_(kChunkBytes) {}

  // The number of the first line of what Next() or NextCsvRecord() gave
  // last (1-based).
  size_t number() const { return first_; }
  // Lines read so far.
  size_t lines() const { return number_; }

  Result<bool> Next(std::string* line) {
    line->clear();
    first_ = number_ + 1;
    spanning_ = false;
    GALLEY_ASSIGN_OR_RETURN(const bool more, AppendLine(line));
    if (more) GALLEY_RETURN_IF_ERROR(TrimCarriageReturn(line));
    return more;
  }

  // The next CSV record: a line, and the lines after it while a quoted cell
  // is open (RFC 4180), each joined by the '\n' that ended the one before
  // (a '\r' before it stays in the cell, as Python's csv module keeps it).
  // The byte limit bounds the whole record. A file that ends inside a
  // quoted cell gives what there is, which the table refuses naming the
  // open quote.
  Result<bool> NextCsvRecord(std::string* record) {
    record->clear();
    first_ = number_ + 1;
    spanning_ = false;
    GALLEY_ASSIGN_OR_RETURN(bool more, AppendLine(record));
    if (!more) return false;
    CsvScanner quotes;
    quotes.Feed(*record);
    while (quotes.in_quotes()) {
      const size_t joint = record->size();
      record->push_back('\n');
      spanning_ = true;
      GALLEY_ASSIGN_OR_RETURN(more, AppendLine(record));
      if (!more) {
        record->pop_back();
        break;
      }
      quotes.Feed(std::string_view(*record).substr(joint));
    }
    GALLEY_RETURN_IF_ERROR(TrimCarriageReturn(record));
    return true;
  }

 private:
  static constexpr size_t kChunkBytes = size_t{1} << 16;

  // Appends the manifest's next line to `text`, its '\n' taken off: false
  // at the end of the file. `text` stays within the limit (one byte over
  // may be the '\r' of a CRLF ending, which the caller takes off).
  Result<bool> AppendLine(std::string* text) {
    bool any = false;
    while (true) {
      if (StopRequested(stop_)) return stop_->Why();
      if (next_ == end_) {
        in_.read(chunk_.data(), static_cast<std::streamsize>(chunk_.size()));
        if (in_.bad()) return Status::DataLoss("error reading manifest " + manifest_.string());
        next_ = 0;
        end_ = static_cast<size_t>(in_.gcount());
        if (end_ == 0) {
          if (!any) return false;
          break;  // a last line without a newline
        }
      }
      any = true;
      const char* from = chunk_.data() + next_;
      const auto* newline = static_cast<const char*>(std::memchr(from, '\n', end_ - next_));
      const size_t take = newline != nullptr ? static_cast<size_t>(newline - from) : end_ - next_;
      if (text->size() + take > max_line_bytes_ + 1) return TooLong();
      text->append(from, take);
      next_ += take;
      if (newline != nullptr) {
        ++next_;
        break;
      }
    }
    ++number_;
    return true;
  }

  Status TrimCarriageReturn(std::string* text) {
    if (!text->empty() && text->back() == '\r') text->pop_back();
    return text->size() > max_line_bytes_ ? TooLong() : Status::Ok();
  }

  // The line or record being read is over the limit.
  Status TooLong() const {
    const std::string where = manifest_.string() + ":" + std::to_string(first_) + ": ";
    const std::string limit =
        std::to_string(max_line_bytes_) + " bytes (galleyd's max_manifest_line_bytes); ";
    if (spanning_) {
      return Status::InvalidArgument(
          where +
          "the record starting on this line, a quoted cell spanning lines, is longer "
          "than " +
          limit + "close the quote (or split the cell), or ask the node's operator to raise it");
    }
    return Status::InvalidArgument(where + "the line is longer than " + limit +
                                   "split the line, or ask the node's operator to raise the limit");
  }

  std::istream& in_;
  const fs::path& manifest_;
  const uint64_t max_line_bytes_;
  ListingStop* const stop_;
  std::vector<char> chunk_;
  size_t next_ = 0, end_ = 0;
  size_t number_ = 0;      // lines read
  size_t first_ = 0;       // the first line of the last line or record given
  bool spanning_ = false;  // the record being read goes on past its first line
};

Status FileSource::ReadManifest(std::istream& in, const ManifestOptions& options) {
  progress_->total = CountLines(in, options.stop);
  if (options.header_row || HasHeaderByName(root_)) return ReadTable(in, options);
  std::vector<ListedLine> lines;
  std::string text;
  LineReader reader(in, root_, options);
  while (true) {
    GALLEY_ASSIGN_OR_RETURN(const bool more, reader.Next(&text));
    if (!more) break;
    const size_t number = reader.number();
    progress_->done = number;
    const size_t first = text.find_first_not_of(" \t");
    if (first == std::string::npos || text[first] == '#') continue;
    const std::string where = root_.string() + ":" + std::to_string(number) + ": ";
    const size_t tab = text.find('\t');
    if (tab == std::string::npos || tab == 0 || tab + 1 >= text.size()) {
      return Status::InvalidArgument(where + "expected 'relative/path<TAB>label'");
    }
    GALLEY_ASSIGN_OR_RETURN(std::string path, CheckListedPath(text.substr(0, tab), where));
    lines.push_back({std::move(path), text.substr(tab + 1)});
  }
  return AddListedItems(lines, Labels::kIntegersOrNames);
}

Status FileSource::ReadTable(std::istream& in, const ManifestOptions& options) {
  ManifestTable table(TableFormatOf(root_), options.image_column, options.max_columns);
  const bool csv = TableFormatOf(root_) == TableFormat::kCsv;
  std::vector<ListedLine> lines;
  bool header = false;
  std::string text;
  LineReader reader(in, root_, options);
  while (true) {
    // A CSV record may span lines inside a quoted cell (RFC 4180).
    GALLEY_ASSIGN_OR_RETURN(const bool more,
                            csv ? reader.NextCsvRecord(&text) : reader.Next(&text));
    if (!more) break;
    const size_t number = reader.number();
    progress_->done = reader.lines();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = root_.string() + ":" + std::to_string(number) + ": ";
    if (!header) {
      Status read = table.Header(text);
      if (!read.ok()) return Status::InvalidArgument(where + read.message());
      header = true;
      if (!table.header_is_a_row()) continue;
    }
    auto row = table.Parse(text);
    if (!row.ok()) return Status::InvalidArgument(where + row.status().message());
    GALLEY_ASSIGN_OR_RETURN(std::string path, CheckListedPath(row->image, where));
    lines.push_back({std::move(path), std::move(row->label)});
    record_pool_.insert(record_pool_.end(), row->record.begin(), row->record.end());
    record_offsets_.push_back(record_pool_.size());
  }
  if (!header) return Status::InvalidArgument(root_.string() + " has no header row");
  field_names_ = table.field_names();
  image_column_ = table.image_column();
  field_types_ = table.column_types();
  field_collations_ = table.collations();
  // Labels follow the first field column's type: an integer column's
  // values, or a string column's cells as class names ("007" included).
  if (table.integer_labels()) {
    for (ListedLine& line : lines) {
      line.label = ManifestTable::TypedValue(ManifestTable::ColumnType::kInteger, line.label);
    }
    return AddListedItems(lines, Labels::kIntegersOrNames);
  }
  // A class name must be UTF-8 (a job names classes in its protocol): a
  // column holding a cell that is not is no class name column.
  const bool named =
      table.named_labels() && std::all_of(lines.begin(), lines.end(), [](const ListedLine& line) {
        return wire::IsValidUtf8(line.label);
      });
  return AddListedItems(lines, named ? Labels::kNames : Labels::kNone);
}

Result<std::vector<uint8_t>> FileSource::ReadFields(ItemId id) const {
  if (field_names_.empty()) return std::vector<uint8_t>();
  const std::span<const uint8_t> record(record_pool_.data() + record_offsets_[id],
                                        record_offsets_[id + 1] - record_offsets_[id]);
  if (std::all_of(field_types_.begin(), field_types_.end(), [](ManifestTable::ColumnType type) {
        return type == ManifestTable::ColumnType::kAsWritten;
      })) {
    return std::vector<uint8_t>(record.begin(), record.end());
  }
  // A CSV or TSV row keeps its cells as written; each is typed here by its
  // column's type, decided once the whole column was read.
  GALLEY_ASSIGN_OR_RETURN(auto cells, wire::SplitFieldRecord(record, field_names_.size()));
  std::vector<uint8_t> typed;
  for (size_t f = 0; f < cells.size(); ++f) {
    const std::string value = ManifestTable::TypedValue(
        field_types_[f],
        std::string_view(reinterpret_cast<const char*>(cells[f].data()), cells[f].size()));
    wire::AppendFieldValue(&typed,
                           std::span(reinterpret_cast<const uint8_t*>(value.data()), value.size()));
  }
  return typed;
}

uint64_t FileSource::held_bytes() const {
  uint64_t bytes = path_pool_.capacity() + record_pool_.capacity() +
                   sizeof(uint64_t) * (path_offsets_.capacity() + record_offsets_.capacity()) +
                   sizeof(int64_t) * labels_.capacity();
  for (const std::string& name : classes_) bytes += sizeof(std::string) + name.capacity();
  for (const std::string& name : directories_) bytes += sizeof(std::string) + name.capacity();
  return bytes;
}

std::string_view FileSource::relative_path(ItemId id) const {
  return std::string_view(path_pool_)
      .substr(path_offsets_[id], path_offsets_[id + 1] - path_offsets_[id]);
}

std::string FileSource::Locate(ItemId id) const {
  return (base_dir_ / fs::path(std::string(relative_path(id)))).string();
}

Result<std::vector<uint8_t>> FileSource::Read(ItemId id) const {
  uint64_t size = 0;
  GALLEY_ASSIGN_OR_RETURN(UniqueFd fd, OpenItem(id, &size));
  return ReadOpened(fd.get(), id, size);
}

Result<std::vector<uint8_t>> FileSource::ReadHead(ItemId id, uint64_t max_bytes,
                                                  uint64_t* item_bytes) const {
  GALLEY_ASSIGN_OR_RETURN(UniqueFd fd, OpenItem(id, item_bytes));
  return ReadOpened(fd.get(), id, std::min(*item_bytes, max_bytes));
}

Result<UniqueFd> FileSource::OpenItem(ItemId id, uint64_t* size) const {
  const fs::path file = Locate(id);
  // O_NONBLOCK: opening a FIFO planted in the tree must not hang a worker.
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    const int error = errno;
    if (IsOutOfDescriptors(error)) return OutOfDescriptors(file.string(), error);
    if (error == ENOENT) return Status::NotFound(file.string() + ": no such file");
    if (error == EACCES || error == EPERM) {
      return Status::PermissionDenied(file.string() + ": " + ErrnoText(error));
    }
    return Status::DataLoss(file.string() + ": " + ErrnoText(error));
  }
  // Check what was actually opened, not the name: a link swapped in between a
  // check and the open cannot redirect the read.
  std::error_code error;
  const fs::path opened = fs::read_symlink("/proc/self/fd/" + std::to_string(fd.get()), error);
  if (error || !IsWithin(opened, base_dir_)) {
    return Status::PermissionDenied(file.string() + " resolves outside the dataset root");
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0)
    return Status::DataLoss(file.string() + ": " + ErrnoText(errno));
  if (!S_ISREG(info.st_mode)) return Status::DataLoss(file.string() + " is not a regular file");
  if (static_cast<uint64_t>(info.st_size) > kMaxFileBytes) {
    return Status::ResourceExhausted(file.string() + " is larger than " +
                                     std::to_string(kMaxFileBytes) + " bytes");
  }
  *size = static_cast<uint64_t>(info.st_size);
  return fd;
}

Result<std::vector<uint8_t>> FileSource::ReadOpened(int fd, ItemId id, uint64_t count) const {
  std::vector<uint8_t> bytes(static_cast<size_t>(count));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::DataLoss(Locate(id) + ": read failed: " + ErrnoText(errno));
    }
    if (n == 0) break;  // the file shrank while being read
    done += static_cast<size_t>(n);
  }
  if (done != bytes.size()) return Status::DataLoss(Locate(id) + ": file shrank while read");
  return bytes;
}

}  // namespace galley
