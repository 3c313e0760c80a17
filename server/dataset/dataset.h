// Dataset: the list of samples galleyd serves from one root, with a stable
// integer item id per sample.
//
// A root is either an ImageFolder directory (root/<class>/**/<file>), read
// exactly as torchvision 0.14's datasets.ImageFolder reads it, so item ids and
// labels match a PyTorch loader over the same tree; or a manifest file of
// `relative/path<TAB>label` lines, paths relative to the manifest's folder,
// '#' comments and blank lines skipped. Labels are integers, or class names
// (then classes() lists them sorted and a label is the name's index, as in
// ImageFolder); the item id is the line's rank. Paths never leave the
// root: `..` components and symlinks that resolve outside it are refused when
// the dataset is opened, and again when a file is read, in case a link was
// swapped in since.
//
// Thread-safety: immutable after Open; every method may be called from any
// thread. Share it as std::shared_ptr<const Dataset>.
#ifndef GALLEY_SERVER_DATASET_DATASET_H_
#define GALLEY_SERVER_DATASET_DATASET_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "galley/status.h"

namespace galley {

using ItemId = uint32_t;

// Which items of a dataset a job uses. Empty (all three lists empty) means
// every item; otherwise the union of the named classes, the [begin, end)
// ranges and the single ids.
struct SubsetSpec {
  std::vector<std::string> classes;
  std::vector<std::pair<ItemId, ItemId>> ranges;
  std::vector<ItemId> ids;
};

class Dataset {
 public:
  // Largest file Read() returns; larger ones are ResourceExhausted.
  static constexpr uint64_t kMaxFileBytes = uint64_t{256} << 20;

  // Opens `root`: a directory is read as an ImageFolder, a regular file as a
  // manifest. `allowed_roots` are the directories the daemon may serve; the
  // dataset must lie under one of them (an empty list allows any).
  // Errors: NotFound (root or a listed file missing), PermissionDenied
  // (outside the allowed roots, or a `..`/symlink leaving the root),
  // InvalidArgument (no items, an empty class folder, a malformed manifest,
  // a symlink cycle).
  static Result<std::shared_ptr<const Dataset>> Open(
      const std::filesystem::path& root, const std::vector<std::filesystem::path>& allowed_roots);

  // The canonical root: the ImageFolder directory, or the manifest file.
  const std::filesystem::path& root() const { return root_; }
  size_t size() const { return labels_.size(); }
  // Class names, sorted; a label is an index into them. Empty for a manifest
  // whose labels are all integers.
  const std::vector<std::string>& classes() const { return classes_; }
  // Label of an item; -1 for an id out of range.
  int64_t label(ItemId id) const;
  // Absolute path of an item (empty for an id out of range).
  std::filesystem::path path(ItemId id) const;
  // Sum of the files' sizes at open time, for the cache planner.
  uint64_t total_bytes() const { return total_bytes_; }

  // The whole file. InvalidArgument for an id out of range, NotFound if it
  // vanished, PermissionDenied if it now resolves outside the root, DataLoss
  // for I/O errors or a non-regular file, ResourceExhausted over kMaxFileBytes.
  Result<std::vector<uint8_t>> Read(ItemId id) const;

  // The sorted, de-duplicated ids a subset names. InvalidArgument for an
  // unknown class, an id or range outside the dataset, or a reversed range.
  Result<std::vector<ItemId>> Select(const SubsetSpec& subset) const;

 private:
  Dataset() = default;

  Status ScanImageFolder();
  Status ReadManifest();
  void AddItem(const std::string& relative_path, int64_t label);
  std::string_view relative_path(ItemId id) const;

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
};

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_DATASET_H_
