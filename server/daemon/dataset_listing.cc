#include "galley/daemon/dataset_listing.h"

#include <string>
#include <system_error>
#include <vector>

namespace galley {
namespace {

// The most bytes `text` can take as a JSON string: quotes and a comma, two
// for an escaped quote or backslash, six for a control character, three for
// a byte that is not UTF-8 (replaced by U+FFFD when the reply is written).
size_t JsonStringBound(const std::string& text) {
  size_t bytes = 3;
  for (unsigned char c : text) {
    bytes += c < 0x20 ? 6 : (c == '"' || c == '\\') ? 2 : c >= 0x80 ? 3 : 1;
  }
  return bytes;
}

}  // namespace

nlohmann::json ListingPage(const Dataset& dataset, uint64_t begin, uint64_t count,
                           size_t max_bytes) {
  std::error_code error;
  // An s3:// prefix (its root ends in '/') is a folder too.
  const std::string& root = dataset.root().native();
  const bool folder =
      Dataset::IsObjectUrl(root) ? root.back() == '/' : std::filesystem::is_directory(root, error);
  const char* kind = dataset.shard_source() != nullptr ? "shards" : folder ? "folder" : "manifest";
  // The classes travel in the first page only, inside its budget.
  std::vector<std::string> classes;
  size_t bytes = 0;
  if (begin == 0) {
    classes = dataset.classes();
    for (const std::string& name : classes) bytes += JsonStringBound(name);
  }
  std::vector<std::string> names;
  std::vector<int64_t> labels;
  // A label takes at most 21 bytes with its comma.
  for (uint64_t id = begin; id < dataset.size() && names.size() < count; ++id) {
    std::string name = dataset.name(static_cast<ItemId>(id));
    const size_t cost = JsonStringBound(name) + 21;
    if (!names.empty() && bytes + cost > max_bytes) break;
    bytes += cost;
    names.push_back(std::move(name));
    labels.push_back(dataset.label(static_cast<ItemId>(id)));
  }
  return {{"dataset_size", dataset.size()},
          {"classes", std::move(classes)},
          {"kind", kind},
          {"content_key", dataset.resume_key().content.Hex()},
          {"mtimes_key", dataset.resume_key().mtimes.Hex()},
          {"dataset_bytes", dataset.total_bytes()},
          {"begin", begin},
          {"names", std::move(names)},
          {"labels", std::move(labels)}};
}

}  // namespace galley
