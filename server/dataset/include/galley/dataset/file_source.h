// FileSource: the items of an ImageFolder tree or a manifest file, one file
// per item.
//
// Listing is bounded by what ManifestOptions allows (a manifest line's
// bytes and a header's columns) and stops early, Cancelled, when its
// ListingStop says so (galleyd stopping, the asking client gone).
//
// A directory root is read exactly as torchvision 0.14's
// datasets.ImageFolder reads it, so item ids and labels match a PyTorch
// loader over the same tree. A manifest holds `relative/path<TAB>label`
// lines, paths relative to the manifest's folder, '#' comments and blank
// lines skipped; labels are integers, or class names (then classes() lists
// them sorted and a label is the name's index); the item id is the line's
// rank. A manifest with a header row (manifest_table.h: `.csv` and
// `.jsonl` always, another file when ManifestOptions::header_row) names
// each item's image in one column and its fields in the others, which are
// kept in memory with the listing. Paths never leave the root: `..` components and symlinks that
// resolve outside it are refused when listed, and again when a file is read.
//
// While Open lists, its progress is registered (ListingProgress): files
// listed so far and class folders walked for a directory, lines read of the
// manifest's total for a manifest.
//
// Thread-safety: immutable after Open; every method may be called from any
// thread.
#ifndef GALLEY_SERVER_DATASET_FILE_SOURCE_H_
#define GALLEY_SERVER_DATASET_FILE_SOURCE_H_

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "galley/dataset/dataset_source.h"
#include "galley/dataset/listing_stop.h"
#include "galley/dataset/manifest_table.h"
#include "galley/unique_fd.h"

namespace galley {

struct ListingProgress;

struct ManifestOptions {
  // Read a manifest file with a header row even when its name does not say
  // so (a job naming fields).
  bool header_row = false;
  // The column naming the images in a header row; "" = the first.
  std::string image_column;
  // Bounds on what one manifest may make the listing hold (galleyd's
  // max_manifest_line_bytes and max_manifest_columns): a longer line, the
  // header's included, or a header with more columns is refused, naming the
  // limit, before the line is all read or the columns compared.
  uint64_t max_line_bytes = kDefaultMaxLineBytes;
  uint32_t max_columns = kDefaultMaxColumns;
  // Asked between files and lines; null: the listing runs to its end.
  ListingStop* stop = nullptr;

  static constexpr uint64_t kDefaultMaxLineBytes = uint64_t{1} << 20;
  static constexpr uint32_t kDefaultMaxColumns = 1024;
};

class FileSource final : public DatasetSource {
 public:
  // Largest file Read() returns; larger ones are ResourceExhausted.
  static constexpr uint64_t kMaxFileBytes = uint64_t{256} << 20;

  // Lists canonical `root`: a directory as an ImageFolder, a regular file as
  // a manifest. Errors as Dataset::Open describes.
  static Result<std::unique_ptr<FileSource>> Open(const std::filesystem::path& root,
                                                  const ManifestOptions& options = {});

  // What a listed image cell names, as the listing keeps it, or the error
  // (`where` prefixes messages: "manifest:line: ").
  using PathCheck =
      std::function<Result<std::string>(const std::string& path, const std::string& where)>;
  // Lists a manifest held in memory (`text`; `name`, for messages and the
  // table format by its extension), its image cells passed through `check`
  // instead of being looked up under a folder: the names and labels of an
  // object-storage manifest (ObjectFolderSource). Its items are not files:
  // Read, Verify and the fingerprints' sizes mean nothing for it.
  static Result<std::unique_ptr<FileSource>> OpenManifestText(const std::string& name,
                                                              const std::string& text,
                                                              const ManifestOptions& options,
                                                              PathCheck check);

  size_t size() const override { return labels_.size(); }
  int64_t label(ItemId id) const override { return labels_[id]; }
  const std::vector<std::string>& classes() const override { return classes_; }
  std::string Locate(ItemId id) const override;
  // The item's path relative to the root (an ImageFolder's folder, or the
  // manifest's), as the manifest or torchvision's listing spells it.
  std::string Name(ItemId id) const override { return std::string(relative_path(id)); }
  // NotFound if the file vanished, PermissionDenied if it now resolves
  // outside the root, DataLoss for I/O errors or a non-regular file,
  // ResourceExhausted over kMaxFileBytes.
  Result<std::vector<uint8_t>> Read(ItemId id) const override;
  // The first `max_bytes` of the file, its size in `*item_bytes`: a large
  // file is not read whole for its header. Errors as Read's.
  Result<std::vector<uint8_t>> ReadHead(ItemId id, uint64_t max_bytes,
                                        uint64_t* item_bytes) const override;
  // A header-row manifest's other columns; none otherwise.
  const std::vector<std::string>& field_names() const override { return field_names_; }
  // A header-row manifest's image column (ManifestOptions::image_column,
  // or its first).
  const std::string& image_column() const override { return image_column_; }
  // What a batch of each field column collates to (ManifestTable::collations).
  const std::vector<std::string>& field_collations() const override { return field_collations_; }
  Result<std::vector<uint8_t>> ReadFields(ItemId id) const override;
  uint64_t total_bytes() const override { return total_bytes_; }
  uint64_t held_bytes() const override;
  // Each item's relative path, size and modification time, in id order.
  const ContentFingerprint& content_fingerprint() const override { return content_fingerprint_; }
  // Each item's relative path, size and label, the class names and the
  // count; the modification times apart.
  const ResumeKey& resume_key() const override { return resume_key_; }
  Status Verify(AccessChecker* checker, std::span<const ItemId> served,
                bool* changed) const override;

 private:
  FileSource() = default;

  // The item's file opened for reading, checked as Read describes; its
  // size in `*size`.
  Result<UniqueFd> OpenItem(ItemId id, uint64_t* size) const;
  // The first `count` bytes of item `id`'s opened file `fd`.
  Result<std::vector<uint8_t>> ReadOpened(int fd, ItemId id, uint64_t count) const;
  Status ScanImageFolder();
  struct ListedLine {
    std::string path;  // relative to base_dir_, checked
    std::string label;
  };
  Status ReadManifest(std::istream& in, const ManifestOptions& options);
  Status ReadTable(std::istream& in, const ManifestOptions& options);
  // The manifest's next line into `line` ('\r' and '\n' taken off), or its
  // next CSV record (lines joined while a quoted cell spans them): false at
  // its end. Holds at most the line or record and one chunk of the file; a
  // line or record longer than the limit is InvalidArgument before it is
  // all read, a stopped listing Cancelled.
  class LineReader;
  // `path` relative to base_dir_ as listed, refused if it leaves the root
  // or does not exist; `where` prefixes messages.
  Result<std::string> CheckListedPath(const std::string& path, const std::string& where) const;
  // What the lines' labels are: none (every label -1), integers when every
  // one is an integer else class names, or class names whatever they hold.
  enum class Labels { kNone, kIntegersOrNames, kNames };
  // Integers as labels, or class names sorted into classes_, as `labels`
  // says. Cancelled when the listing is stopped.
  Status AddListedItems(const std::vector<ListedLine>& lines, Labels labels);
  // `info` is the item's stat, null when it could not be stat'ed.
  void AddItem(const std::string& relative_path, int64_t label, const struct stat* info);
  // What Verify compares: the identities of the listed directories (an
  // ImageFolder's walked folders, or the manifest file), then of the items.
  uint64_t DirectoriesFingerprint() const;
  std::string_view relative_path(ItemId id) const;

  // The registered progress while Open lists; null after.
  ListingProgress* progress_ = nullptr;
  // What Open asks whether to give up; null after (and when none was given).
  ListingStop* stop_ = nullptr;
  // Folds each listed item while Open lists; null after.
  std::unique_ptr<ContentFingerprintBuilder> fingerprint_;
  std::unique_ptr<ContentFingerprintBuilder> copy_fingerprint_;
  std::unique_ptr<ContentFingerprintBuilder> mtimes_fingerprint_;
  ContentFingerprint content_fingerprint_;
  // Whether the root's file system numbers files alike on every client.
  bool inodes_kept_ = false;
  ResumeKey resume_key_;

  std::filesystem::path root_;
  // Set for a manifest whose cells are not files (OpenManifestText).
  PathCheck path_check_;
  // Directory every item must stay inside: root_ itself, or the manifest's.
  std::filesystem::path base_dir_;
  std::vector<std::string> classes_;
  std::vector<int64_t> labels_;
  // Relative paths, concatenated; item i is [path_offsets_[i], path_offsets_[i+1]).
  // One buffer instead of a string per item keeps ten million items compact.
  std::string path_pool_;
  std::vector<uint64_t> path_offsets_{0};
  uint64_t total_bytes_ = 0;
  // Relative to base_dir_ ("" for base_dir_ itself), or the manifest's name.
  std::vector<std::string> directories_;
  uint64_t items_fingerprint_ = 0;  // as listed
  uint64_t directories_fingerprint_ = 0;
  // A header-row manifest's field columns, and each item's record:
  // [record_offsets_[i], record_offsets_[i+1]) of record_pool_.
  std::vector<std::string> field_names_;
  std::string image_column_;
  std::vector<ManifestTable::ColumnType> field_types_;
  std::vector<std::string> field_collations_;
  std::vector<uint8_t> record_pool_;
  std::vector<uint64_t> record_offsets_{0};
};

// Whether `name` ends in one of torchvision's image extensions (IMG_EXTENSIONS,
// any case): the files an ImageFolder lists.
bool HasImageExtension(std::string_view name);
// What listing an ImageFolder with no class folder, or a class folder
// (`name`) holding no image, says: InvalidArgument, as torchvision raises.
Status NoClassFolders(const std::string& root);
Status EmptyClassFolder(const std::string& name);

// Whether canonical path `path` is `dir` or lies below it (both canonical).
bool IsWithinDirectory(const std::filesystem::path& path, const std::filesystem::path& dir);

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_FILE_SOURCE_H_
