#include "galley/daemon/shard_datasets.h"

#include <algorithm>

#include "galley/dataset/listing_progress.h"
#include "wire/messages.h"

namespace galley {

ShardOptions ShardOptionsFor(const JobSpec& spec, const ShardOptions& daemon_wide) {
  ShardOptions shard = daemon_wide;
  shard.image_key = spec.image_key;
  shard.label_key = spec.label_key;
  shard.fields = spec.fields;
  return shard;
}

objectstore::Access ObjectAccessFor(const ObjectStoreAccess& access) {
  objectstore::Access out;
  out.endpoint.url = access.endpoint_url;
  out.endpoint.region = access.region.empty() ? "us-east-1" : access.region;
  out.endpoint.path_style = access.path_style;
  out.credentials = {access.access_key_id, access.secret_access_key, access.session_token};
  return out;
}

bool EndpointAllowed(const std::string& endpoint, const std::vector<std::string>& allowed) {
  const bool aws = endpoint == "https://s3.amazonaws.com" ||
                   (endpoint.rfind("https://s3.", 0) == 0 &&
                    endpoint.size() > std::string_view(".amazonaws.com").size() &&
                    endpoint.compare(endpoint.size() - 14, 14, ".amazonaws.com") == 0 &&
                    endpoint.find('/', 8) == std::string::npos);
  return std::any_of(allowed.begin(), allowed.end(), [&](const std::string& entry) {
    if (entry == "aws") return aws;
    objectstore::Endpoint named;
    named.url = entry;
    return !entry.empty() && ObjectEndpointName(named) == endpoint;
  });
}

ManifestOptions ManifestOptionsFor(const JobSpec& spec) {
  return {.header_row = !spec.fields.empty(), .image_column = spec.image_key};
}

Status CheckShardJob(const Dataset& dataset, const JobSpec& spec) {
  const ShardSource* shards = dataset.shard_source();
  if (shards == nullptr) return Status::Ok();
  if (spec.on_error == "raise") {
    const ShardStats& stats = shards->stats();
    if (stats.skipped_samples > 0) {
      return Status::InvalidArgument(
          std::to_string(stats.skipped_samples) + " sample(s) of the shards are left out: " +
          DescribeLeftOut(stats) + " (on_error=\"skip\" serves the others, with a warning)");
    }
    if (stats.damaged_shards > 0) {
      return Status::InvalidArgument(std::to_string(stats.damaged_shards) +
                                     " shards are damaged, the first: " + stats.first_damage +
                                     " (on_error=\"skip\" serves what precedes the damage)");
    }
  }
  return Status::Ok();
}

namespace {

// `names` as the job's Python code writes them, fields=('image', 'label'),
// so that a refusal reads as the client's own for a manifest it can read.
std::string FieldsText(const std::vector<std::string>& names) {
  std::string text = "fields=(";
  for (size_t i = 0; i < names.size(); ++i) {
    // Python quotes with ' unless the text holds a ' and no ".
    const bool has_single = names[i].find('\'') != std::string::npos;
    const char quote = has_single && names[i].find('"') == std::string::npos ? '"' : '\'';
    text += (i == 0 ? "" : ", ") + std::string(1, quote) + wire::EscapeBytes(names[i]) + quote;
  }
  return text + (names.size() == 1 ? ",)" : ")");
}

}  // namespace

Result<std::vector<uint32_t>> JobFieldMap(const Dataset& dataset, const JobSpec& spec) {
  std::vector<uint32_t> map;
  if (spec.fields.empty()) return map;
  const std::vector<std::string>& names = dataset.field_names();
  if (names.empty()) {
    return Status::InvalidArgument(
        "'fields' needs tar shards or a manifest with a header row (.csv, .tsv or .jsonl); " +
        dataset.root().string() + " has neither");
  }
  std::vector<std::string> fields = spec.fields;
  if (spec.image_in_fields) {
    const std::string& image = dataset.image_column();
    if (image.empty()) {
      return Status::InvalidArgument("'image_in_fields' applies to a manifest with a header row; " +
                                     dataset.root().string() + " is none");
    }
    if (std::erase(fields, image) == 0) {
      return Status::InvalidArgument(
          FieldsText(spec.fields) + " does not name the image manifest column '" +
          wire::EscapeBytes(image) + "'" +
          (spec.image_key.empty() ? " (the first column, or the one image_key= names)"
                                  : " (image_key= names it; with fields= the two must agree)"));
    }
    if (fields.empty()) {
      return Status::InvalidArgument(FieldsText(spec.fields) +
                                     " names only the image; leave fields= out for (images, "
                                     "labels) batches");
    }
  }
  for (const std::string& field : fields) {
    auto it = std::find(names.begin(), names.end(), field);
    if (it == names.end()) {
      std::string known;
      for (const std::string& name : names) known += (known.empty() ? "" : ", ") + name;
      return Status::InvalidArgument(dataset.root().string() + " has no field '" + field +
                                     "'; its fields: " + known);
    }
    map.push_back(static_cast<uint32_t>(it - names.begin()));
  }
  return map;
}

std::optional<ShardSetSnapshot> SnapshotShards(const Dataset& dataset) {
  const ShardSource* shards = dataset.shard_source();
  if (shards == nullptr) return std::nullopt;
  const ShardStats& stats = shards->stats();
  const ShardIndexCounters& counters = GlobalShardIndexCounters();
  ShardSetSnapshot s;
  s.shards = stats.shards;
  s.samples = stats.samples;
  s.skipped_members = stats.skipped_members;
  s.skipped_samples = stats.skipped_samples;
  s.first_skipped_sample = stats.first_skipped_sample;
  s.damaged_shards = stats.damaged_shards;
  s.first_damage = stats.first_damage;
  s.from_index_cache = stats.from_cache;
  s.stale_idx = stats.stale_idx;
  s.from_idx = stats.from_idx;
  s.index_seconds = stats.index_seconds;
  s.index_age_seconds = shards->index_age_seconds();
  s.stale = dataset.stale();
  s.daemon_shards_scanned = counters.scanned.load();
  s.daemon_idx_hints_used = counters.idx_hints_used.load();
  s.daemon_index_cache_hits = counters.cache_hits.load();
  s.daemon_stale_idx = counters.stale_idx.load();
  if (const objectstore::ObjectStoreCounters* store = dataset.object_counters()) {
    s.object_store = SnapshotObjectStore(*store);
    const ObjectReadCounts reads = shards->object_reads();
    s.prefetched_reads = reads.prefetched;
    s.on_demand_reads = reads.on_demand;
    s.gets = reads.gets;
    s.bytes = reads.bytes;
    s.verify_heads = reads.verify_heads;
    s.listing_reads = reads.listing_reads;
    s.listing_kept_bytes = reads.listing_kept_bytes;
  }
  return s;
}

std::optional<ObjectFolderSnapshot> SnapshotObjectFolder(const Dataset& dataset) {
  const std::optional<ObjectFolderCounts> counts = dataset.object_folder_counts();
  const objectstore::ObjectStoreCounters* store = dataset.object_counters();
  if (!counts || store == nullptr) return std::nullopt;
  ObjectFolderSnapshot s;
  s.kind = counts->manifest ? "manifest" : "prefix";
  s.prefixes = counts->prefixes;
  s.prefetched_reads = counts->reads.prefetched;
  s.on_demand_reads = counts->reads.on_demand;
  s.gets = counts->reads.gets;
  s.bytes = counts->reads.bytes;
  s.verify_heads = counts->reads.verify_heads;
  s.manifest_heads = counts->manifest_heads;
  s.listings = counts->listings;
  s.object_store = SnapshotObjectStore(*store);
  return s;
}

ObjectStoreSnapshot SnapshotObjectStore(const objectstore::ObjectStoreCounters& c) {
  return {c.gets.load(),    c.heads.load(),    c.lists.load(),     c.bytes.load(),
          c.retries.load(), c.failures.load(), c.in_flight.load(), c.full_bodies.load()};
}

std::vector<IndexingSnapshot> SnapshotIndexing() {
  std::vector<IndexingSnapshot> list;
  for (const auto& p : ActiveListings()) {
    IndexingSnapshot& s = list.emplace_back();
    s.path = p->path;
    s.kind = p->kind;
    s.unit = p->unit;
    s.done = p->done.load();
    const uint64_t total = p->total.load();
    if (total > 0) s.total = total;
    s.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - p->started).count();
    s.rate = s.seconds > 0 ? double(s.done) / s.seconds : 0.0;
    s.seconds_left =
        total > 0 && s.rate > 0 && s.done <= total ? double(total - s.done) / s.rate : -1.0;
    if (p->kind == "folder") {
      s.classes = p->classes.load();
      s.classes_done = p->classes_done.load();
    }
  }
  return list;
}

}  // namespace galley
