// FileSource: the items of an ImageFolder tree or a manifest file, one file
// per item.
//
// A directory root is read exactly as torchvision 0.14's
// datasets.ImageFolder reads it, so item ids and labels match a PyTorch
// loader over the same tree. A manifest holds `relative/path<TAB>label`
// lines, paths relative to the manifest's folder, '#' comments and blank
// lines skipped; labels are integers, or class names (then classes() lists
// them sorted and a label is the name's index); the item id is the line's
// rank. Paths never leave the root: `..` components and symlinks that
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

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "galley/dataset/dataset_source.h"

namespace galley {

struct ListingProgress;

class FileSource final : public DatasetSource {
 public:
  // Largest file Read() returns; larger ones are ResourceExhausted.
  static constexpr uint64_t kMaxFileBytes = uint64_t{256} << 20;

  // Lists canonical `root`: a directory as an ImageFolder, a regular file as
  // a manifest. Errors as Dataset::Open describes.
  static Result<std::unique_ptr<FileSource>> Open(const std::filesystem::path& root);

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
  uint64_t total_bytes() const override { return total_bytes_; }
  // Each item's relative path, size and modification time, in id order.
  const ContentFingerprint& content_fingerprint() const override { return content_fingerprint_; }
  // Each item's relative path, size and label, the class names and the
  // count; the modification times apart.
  const ResumeKey& resume_key() const override { return resume_key_; }
  Status Verify(AccessChecker* checker, std::span<const ItemId> served,
                bool* changed) const override;

 private:
  FileSource() = default;

  Status ScanImageFolder();
  Status ReadManifest();
  void AddItem(const std::string& relative_path, int64_t label);
  // What Verify compares: the identities of the listed directories (an
  // ImageFolder's walked folders, or the manifest file), then of the items.
  uint64_t DirectoriesFingerprint() const;
  std::string_view relative_path(ItemId id) const;

  // The registered progress while Open lists; null after.
  ListingProgress* progress_ = nullptr;
  // Folds each listed item while Open lists; null after.
  std::unique_ptr<ContentFingerprintBuilder> fingerprint_;
  std::unique_ptr<ContentFingerprintBuilder> copy_fingerprint_;
  std::unique_ptr<ContentFingerprintBuilder> mtimes_fingerprint_;
  ContentFingerprint content_fingerprint_;
  ResumeKey resume_key_;

  std::filesystem::path root_;
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
};

// Whether canonical path `path` is `dir` or lies below it (both canonical).
bool IsWithinDirectory(const std::filesystem::path& path, const std::filesystem::path& dir);

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_FILE_SOURCE_H_
