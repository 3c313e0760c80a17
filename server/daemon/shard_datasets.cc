#include "server/daemon/shard_datasets.h"

#include <cstdlib>

#include "server/dataset/listing_progress.h"

namespace galley {

ShardOptions ShardOptionsFor(const JobSpec& spec, const DaemonOptions& options) {
  ShardOptions shard;
  shard.image_key = spec.image_key;
  shard.label_key = spec.label_key;
  shard.max_open_shards = options.max_open_shards;
  shard.index_cache_max_bytes = options.tar_index_max_bytes;
  if (options.tar_index_dir == "none") return shard;
  if (!options.tar_index_dir.empty()) {
    shard.index_cache_dir = options.tar_index_dir;
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    shard.index_cache_dir = std::filesystem::path(xdg) / "galley" / "tar-index";
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    shard.index_cache_dir = std::filesystem::path(home) / ".cache" / "galley" / "tar-index";
  }
  return shard;
}

Status CheckShardJob(const Dataset& dataset, const JobSpec& spec) {
  const ShardSource* shards = dataset.shard_source();
  if (shards == nullptr) return Status::Ok();
  if (spec.on_error == "raise") {
    const ShardStats& stats = shards->stats();
    if (stats.skipped_samples > 0) {
      return Status::InvalidArgument(
          std::to_string(stats.skipped_samples) +
          " samples have no usable image or label, the first: " + stats.first_skipped_sample +
          " (on_error=\"skip\" serves the others)");
    }
    if (stats.damaged_shards > 0) {
      return Status::InvalidArgument(std::to_string(stats.damaged_shards) +
                                     " shards are damaged, the first: " + stats.first_damage +
                                     " (on_error=\"skip\" serves what precedes the damage)");
    }
  }
  return Status::Ok();
}

nlohmann::json DescribeShards(const Dataset& dataset) {
  const ShardSource* shards = dataset.shard_source();
  if (shards == nullptr) return nullptr;
  const ShardStats& s = shards->stats();
  const ShardIndexCounters& counters = GlobalShardIndexCounters();
  return {{"shards", s.shards},
          {"samples", s.samples},
          {"skipped_members", s.skipped_members},
          {"skipped_samples", s.skipped_samples},
          {"first_skipped_sample", s.first_skipped_sample},
          {"damaged_shards", s.damaged_shards},
          {"first_damage", s.first_damage},
          {"from_index_cache", s.from_cache},
          {"stale_idx", s.stale_idx},
          {"from_idx", s.from_idx},
          {"index_seconds", s.index_seconds},
          {"index_age_seconds", shards->index_age_seconds()},
          {"stale", dataset.stale()},
          {"daemon_shards_scanned", counters.scanned.load()},
          {"daemon_idx_hints_used", counters.idx_hints_used.load()},
          {"daemon_index_cache_hits", counters.cache_hits.load()},
          {"daemon_stale_idx", counters.stale_idx.load()}};
}

nlohmann::json DescribeIndexing() {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& p : ActiveListings()) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - p->started).count();
    const uint64_t done = p->done.load();
    const uint64_t total = p->total.load();
    const double rate = seconds > 0 ? double(done) / seconds : 0.0;
    nlohmann::json entry = {
        {"path", p->path},
        {"kind", p->kind},
        {"unit", p->unit},
        {"done", done},
        {"total", total > 0 ? nlohmann::json(total) : nlohmann::json(nullptr)},
        {"seconds", seconds},
        {"rate", rate},
        {"seconds_left",
         total > 0 && rate > 0 && done <= total ? double(total - done) / rate : -1.0}};
    if (p->kind == "shards") {
      entry["first_shard"] = p->path;
      entry["shards"] = total;
    } else if (p->kind == "folder") {
      entry["classes"] = p->classes.load();
      entry["classes_done"] = p->classes_done.load();
    }
    list.push_back(std::move(entry));
  }
  return list;
}

}  // namespace galley
