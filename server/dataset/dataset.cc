#include "galley/dataset/dataset.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>

#include "galley/dataset/file_source.h"
#include "object_folder.h"

namespace galley {
namespace {

namespace fs = std::filesystem;

Status CheckAllowed(const fs::path& canonical, const std::vector<fs::path>& allowed_roots,
                    const std::string& what) {
  if (allowed_roots.empty()) return Status::Ok();
  const bool allowed =
      std::any_of(allowed_roots.begin(), allowed_roots.end(), [&](const fs::path& allowed_root) {
        std::error_code e;
        const fs::path dir = fs::canonical(allowed_root, e);
        return !e && IsWithinDirectory(canonical, dir);
      });
  if (!allowed) {
    return Status::PermissionDenied(what + " " + canonical.string() +
                                    " is not under an allowed root");
  }
  return Status::Ok();
}

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Refusals by name, before any file or object is touched.
Status CheckShardName(const std::string& shard, bool object) {
  if (!object && (shard.find("://") != std::string::npos || shard.rfind("pipe:", 0) == 0)) {
    return Status::InvalidArgument(
        "shard '" + shard +
        "' is a URL or pipe; galley reads local (or mounted) files and s3:// objects: copy the "
        "shards to local storage or to S3-compatible storage, or mount them");
  }
  std::string lower = shard;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* suffix : {".tar.gz", ".tgz", ".tar.zst", ".tar.zstd", ".tar.bz2", ".tar.xz"}) {
    if (EndsWith(lower, suffix)) {
      return Status::InvalidArgument("shard '" + shard +
                                     "' is compressed; a compressed tar cannot be read by byte "
                                     "range: decompress it to a plain .tar first");
    }
  }
  return Status::Ok();
}

// What opening a shard set that holds no usable sample says.
Status NoUsableSamples(const ShardSource& source, size_t shards) {
  const ShardStats& stats = source.stats();
  std::string why = stats.skipped_samples == 0
                        ? ""
                        : "; " + std::to_string(stats.skipped_samples) +
                              " sample(s) left out: " + DescribeLeftOut(stats);
  if (!stats.first_damage.empty()) why += "; damage: " + stats.first_damage;
  return Status::InvalidArgument("the " + std::to_string(shards) + " shards starting with " +
                                 source.shards().front().string() + " hold no usable samples" +
                                 why);
}

}  // namespace

Result<std::shared_ptr<const Dataset>> Dataset::Open(const fs::path& root,
                                                     const std::vector<fs::path>& allowed_roots,
                                                     const ManifestOptions& manifest) {
  std::error_code error;
  const fs::path canonical = fs::canonical(root, error);
  if (error) return Status::NotFound("dataset root " + root.string() + ": " + error.message());
  GALLEY_RETURN_IF_ERROR(CheckAllowed(canonical, allowed_roots, "dataset root"));
  std::shared_ptr<Dataset> dataset(new Dataset());
  dataset->root_ = canonical;
  GALLEY_ASSIGN_OR_RETURN(dataset->source_, FileSource::Open(canonical, manifest));
  if (dataset->size() == 0) {
    return Status::InvalidArgument("dataset " + canonical.string() + " has no items");
  }
  if (dataset->size() > std::numeric_limits<ItemId>::max()) {
    return Status::ResourceExhausted("dataset " + canonical.string() + " has too many items");
  }
  return std::shared_ptr<const Dataset>(std::move(dataset));
}

Result<std::shared_ptr<const Dataset>> Dataset::OpenShards(
    const std::vector<std::string>& shards, const ShardOptions& options,
    const std::vector<fs::path>& allowed_roots) {
  if (shards.empty()) return Status::InvalidArgument("the shard list is empty");
  std::vector<fs::path> canonical;
  canonical.reserve(shards.size());
  for (const std::string& shard : shards) {
    GALLEY_RETURN_IF_ERROR(CheckShardName(shard, /*object=*/false));
    std::error_code error;
    fs::path path = fs::canonical(shard, error);
    if (error) return Status::NotFound("shard " + shard + ": " + error.message());
    GALLEY_RETURN_IF_ERROR(CheckAllowed(path, allowed_roots, "shard"));
    canonical.push_back(std::move(path));
  }
  std::shared_ptr<Dataset> dataset(new Dataset());
  dataset->root_ = canonical.front();
  GALLEY_ASSIGN_OR_RETURN(auto source, ShardSource::Open(canonical, options));
  dataset->shards_ = source.get();
  dataset->source_ = std::move(source);
  if (dataset->size() == 0) return NoUsableSamples(*dataset->shards_, shards.size());
  return std::shared_ptr<const Dataset>(std::move(dataset));
}

Result<std::shared_ptr<const Dataset>> Dataset::OpenObjectShards(
    const std::vector<std::string>& urls, std::shared_ptr<objectstore::ObjectStore> store,
    const objectstore::Access& access, const ShardOptions& options) {
  if (urls.empty()) return Status::InvalidArgument("the shard list is empty");
  for (const std::string& url : urls) {
    GALLEY_RETURN_IF_ERROR(CheckShardName(url, /*object=*/true));
  }
  std::shared_ptr<Dataset> dataset(new Dataset());
  GALLEY_ASSIGN_OR_RETURN(auto source,
                          ShardSource::OpenObjects(urls, std::move(store), access, options));
  dataset->root_ = source->shards().front();
  dataset->shards_ = source.get();
  dataset->source_ = std::move(source);
  if (dataset->size() == 0) return NoUsableSamples(*dataset->shards_, urls.size());
  return std::shared_ptr<const Dataset>(std::move(dataset));
}

Result<std::shared_ptr<const Dataset>> Dataset::OpenObjectFolder(
    const std::string& url, const std::shared_ptr<objectstore::ObjectStore>& store,
    const objectstore::Access& access, const ShardOptions& options,
    const ManifestOptions& manifest) {
  std::shared_ptr<Dataset> dataset(new Dataset());
  GALLEY_ASSIGN_OR_RETURN(auto source,
                          ObjectFolderSource::Open(url, store, access, options, manifest));
  dataset->root_ = url;
  dataset->source_ = std::move(source);
  if (dataset->size() > std::numeric_limits<ItemId>::max()) {
    return Status::ResourceExhausted("dataset " + url + " has too many items");
  }
  return std::shared_ptr<const Dataset>(std::move(dataset));
}

Result<std::shared_ptr<const Dataset>> Dataset::OpenObjectManifest(
    const fs::path& path, const std::vector<fs::path>& allowed_roots,
    const std::shared_ptr<objectstore::ObjectStore>& store, const objectstore::Access& access,
    const ShardOptions& options, const ManifestOptions& manifest) {
  std::error_code error;
  const fs::path canonical = fs::canonical(path, error);
  if (error) return Status::NotFound("dataset root " + path.string() + ": " + error.message());
  GALLEY_RETURN_IF_ERROR(CheckAllowed(canonical, allowed_roots, "dataset root"));
  // Its identity before it is read: a change while it is read shows later.
  const std::optional<FileIdentity> identity = LocalFileIdentity(canonical.string());
  std::ifstream in(canonical, std::ios::binary);
  if (!in) return Status::NotFound("cannot read manifest " + canonical.string());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::shared_ptr<Dataset> dataset(new Dataset());
  GALLEY_ASSIGN_OR_RETURN(
      auto source, ObjectFolderSource::OpenManifest(canonical.string(), text, "", store, access,
                                                    options, manifest, identity));
  dataset->root_ = canonical;
  dataset->source_ = std::move(source);
  return std::shared_ptr<const Dataset>(std::move(dataset));
}

bool Dataset::IsObjectUrl(const std::string& shard) { return shard.rfind("s3://", 0) == 0; }

std::string Dataset::ShardSetKey(const std::vector<std::string>& shards,
                                 const ShardOptions& options, const std::string& endpoint) {
  std::string key = "shards\n" + options.image_key + "\n" + options.label_key;
  // Jobs share a set listed with the same fields: a sample lacking one is
  // left out, and every item carries them.
  for (const std::string& field : options.fields) key += "\tfield:" + field;
  // Objects: one bucket name on two stores is two datasets.
  if (!endpoint.empty()) key += "\tendpoint:" + endpoint;
  for (const std::string& shard : shards) {
    if (!endpoint.empty()) {
      key += "\n" + shard;
      continue;
    }
    std::error_code error;
    const fs::path canonical = fs::weakly_canonical(shard, error);
    key += "\n" + (error ? shard : canonical.string());
  }
  return key;
}

fs::path Dataset::path(ItemId id) const {
  if (id >= size()) return {};
  return fs::path(source_->Locate(id));
}

Result<std::vector<uint8_t>> Dataset::Read(ItemId id) const {
  if (id >= size()) {
    return Status::InvalidArgument("item " + std::to_string(id) + " is out of range (dataset has " +
                                   std::to_string(size()) + " items)");
  }
  return source_->Read(id);
}

Result<std::vector<uint8_t>> Dataset::ReadHead(ItemId id, uint64_t max_bytes,
                                               uint64_t* item_bytes) const {
  if (id >= size())
    return Status::InvalidArgument("item " + std::to_string(id) + " is out of range");
  return source_->ReadHead(id, max_bytes, item_bytes);
}

Result<std::vector<uint8_t>> Dataset::ReadFields(ItemId id) const {
  if (id >= size())
    return Status::InvalidArgument("item " + std::to_string(id) + " is out of range");
  return source_->ReadFields(id);
}

Result<std::vector<uint8_t>> Dataset::ReadWithFields(ItemId id,
                                                     std::vector<uint8_t>* record) const {
  if (id >= size())
    return Status::InvalidArgument("item " + std::to_string(id) + " is out of range");
  return source_->ReadWithFields(id, record);
}

Result<std::vector<ItemId>> Dataset::Select(const SubsetSpec& subset) const {
  const size_t n = size();
  if (subset.classes.empty() && subset.ranges.empty() && subset.ids.empty()) {
    std::vector<ItemId> all(n);
    for (size_t i = 0; i < n; ++i) all[i] = static_cast<ItemId>(i);
    return all;
  }
  std::vector<bool> chosen(n, false);
  if (!subset.classes.empty()) {
    std::set<int64_t> wanted;
    for (const std::string& name : subset.classes) {
      const std::vector<std::string>& names = classes();
      if (names.empty()) {
        // Integer labels: a class is named by its value.
        int64_t value = 0;
        const auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), value);
        if (ec != std::errc() || ptr != name.data() + name.size()) {
          return Status::InvalidArgument("unknown class '" + name +
                                         "' (this dataset's labels are integers: name a label "
                                         "value)");
        }
        wanted.insert(value);
        continue;
      }
      const auto it = std::lower_bound(names.begin(), names.end(), name);
      if (it == names.end() || *it != name) {
        return Status::InvalidArgument("unknown class '" + name + "'");
      }
      wanted.insert(it - names.begin());
    }
    for (size_t i = 0; i < n; ++i) {
      if (wanted.contains(source_->label(static_cast<ItemId>(i)))) chosen[i] = true;
    }
  }
  for (const auto& [begin, end] : subset.ranges) {
    if (begin > end || end > n) {
      return Status::InvalidArgument("range [" + std::to_string(begin) + ", " +
                                     std::to_string(end) + ") is not within [0, " +
                                     std::to_string(n) + ")");
    }
    std::fill(chosen.begin() + begin, chosen.begin() + end, true);
  }
  for (ItemId id : subset.ids) {
    if (id >= n) {
      return Status::InvalidArgument("item " + std::to_string(id) +
                                     " is out of range (dataset has " + std::to_string(n) +
                                     " items)");
    }
    chosen[id] = true;
  }
  std::vector<ItemId> ids;
  for (size_t i = 0; i < n; ++i) {
    if (chosen[i]) ids.push_back(static_cast<ItemId>(i));
  }
  return ids;
}

}  // namespace galley
