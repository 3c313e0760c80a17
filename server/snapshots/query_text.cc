#include "galley/snapshots/query_text.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

namespace galley {

using nlohmann::json;

namespace {

void AppendFull(const json& value, int indent, std::string* out) {
  const std::string pad(indent, ' ');
  // " value", or the lines of a string of several under its key.
  auto scalar = [&](const json& child) {
    if (!child.is_string()) return " " + child.dump();
    const std::string text = child.get<std::string>();
    if (text.find('\n') == std::string::npos) return " " + text;
    // One line each, under the key, so that a list kept in a string (a
    // shard set's key) reads like one.
    std::string lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines += "\n" + pad + "  | " + line;
    return lines;
  };
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      if (child.is_structured() && !child.empty()) {
        *out += pad + key + ":\n";
        AppendFull(child, indent + 2, out);
      } else {
        *out += pad + key + ":" + scalar(child) + "\n";
      }
    }
  } else if (value.is_array()) {
    for (const auto& child : value) {
      if (child.is_structured()) {
        *out += pad + "-\n";
        AppendFull(child, indent + 2, out);
      } else {
        *out += pad + "- " + child.dump() + "\n";
      }
    }
  } else {
    *out += pad + value.dump() + "\n";
  }
}

uint64_t Count(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<uint64_t>() : 0;
}

double Number(const json& object, const char* key, double missing = 0) {
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : missing;
}

std::string Text(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string SecondsText(double seconds) {
  char text[32];
  if (seconds < 120) {
    std::snprintf(text, sizeof(text), "%.0f s", seconds);
  } else if (seconds < 2 * 3600) {
    std::snprintf(text, sizeof(text), "%.0f min", seconds / 60);
  } else {
    std::snprintf(text, sizeof(text), "%.1f h", seconds / 3600);
  }
  return text;
}

// A shard set's key is "shards", the image key, the label key, then one
// shard per line (Dataset::ShardSetKey); anything else names no shards.
std::vector<std::string> ShardsOfKey(const std::string& key) {
  std::vector<std::string> lines;
  std::istringstream in(key);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  if (lines.size() < 4 || lines[0] != "shards") return {};
  return std::vector<std::string>(lines.begin() + 3, lines.end());
}

// The dataset as a person names it: its root, or a shard set's first and
// last shard (the last by file name when both share a folder).
std::string DatasetName(const json& dataset) {
  const std::vector<std::string> shards = ShardsOfKey(Text(dataset, "key"));
  if (shards.size() < 2) return Text(dataset, "root");
  const std::string& first = shards.front();
  const std::string& last = shards.back();
  const size_t slash = first.rfind('/');
  const bool same_folder = slash != std::string::npos &&
                           last.compare(0, slash + 1, first, 0, slash + 1) == 0 &&
                           last.find('/', slash + 1) == std::string::npos;
  return first + " .. " + (same_folder ? last.substr(slash + 1) : last);
}

// "object store (the node's): ..." of a shard set's or a folder of
// objects' `store` counts.
std::string NodeStoreText(const json& store) {
  return "object store (the node's): " + std::to_string(Count(store, "gets")) + " GETs, " +
         ByteSizeText(Count(store, "bytes")) + ", " + std::to_string(Count(store, "retries")) +
         " retries, " + std::to_string(Count(store, "lists")) + " LIST pages, " +
         std::to_string(Count(store, "in_flight")) + " in flight";
}

// "this set's reads: ..., by N GETs of B" of a dataset of objects' own
// counts (a shard set's or a folder's); `what` names the dataset.
std::string ObjectReadsText(const json& counts, const std::string& what) {
  return "this " + what + "'s reads: " + std::to_string(Count(counts, "prefetched_reads")) +
         " prefetched, " + std::to_string(Count(counts, "on_demand_reads")) + " on demand, by " +
         std::to_string(Count(counts, "gets")) + " GETs of " + ByteSizeText(Count(counts, "bytes"));
}

// The lines of a prefix folder's or a manifest of objects' own counts.
std::string ObjectFolderLines(const json& objects) {
  const bool manifest = Text(objects, "kind") == "manifest";
  std::string line = "    " + ObjectReadsText(objects, manifest ? "manifest" : "prefix") + "; " +
                     std::to_string(Count(objects, "listings")) + " listing(s) of " +
                     std::to_string(Count(objects, "prefixes")) + " prefix(es), " +
                     std::to_string(Count(objects, "verify_heads")) +
                     " HEADs to admit other access keys";
  if (manifest)
    line += ", " + std::to_string(Count(objects, "manifest_heads")) + " of the manifest";
  line += "\n";
  if (auto store = objects.find("object_store"); store != objects.end() && store->is_object()) {
    line += "    " + NodeStoreText(*store) + "\n";
  }
  return line;
}

std::string DatasetLine(const json& dataset) {
  std::string line = "  " + DatasetName(dataset) + ":";
  const json* shards = nullptr;
  if (auto it = dataset.find("shards"); it != dataset.end() && it->is_object()) shards = &*it;
  if (auto it = dataset.find("objects"); it != dataset.end() && it->is_object()) {
    std::vector<std::string> parts{std::to_string(Count(dataset, "items")) + " objects"};
    if (const uint64_t classes = Count(dataset, "classes")) {
      parts.push_back(std::to_string(classes) + " classes");
    }
    parts.push_back(ByteSizeText(Count(dataset, "bytes")));
    parts.push_back("listed " + SecondsText(Number(dataset, "listed_seconds_ago")) + " ago");
    for (size_t i = 0; i < parts.size(); ++i) line += (i == 0 ? " " : ", ") + parts[i];
    return line + "\n" + ObjectFolderLines(*it);
  }
  std::vector<std::string> parts;
  if (shards != nullptr) parts.push_back(std::to_string(Count(*shards, "shards")) + " shards");
  parts.push_back(std::to_string(Count(dataset, "items")) + " items");
  if (const uint64_t classes = Count(dataset, "classes")) {
    parts.push_back(std::to_string(classes) + " classes");
  }
  parts.push_back(ByteSizeText(Count(dataset, "bytes")));
  parts.push_back("listed " + SecondsText(Number(dataset, "listed_seconds_ago")) + " ago");
  for (size_t i = 0; i < parts.size(); ++i) line += (i == 0 ? " " : ", ") + parts[i];
  line += "\n";
  if (shards == nullptr) return line;
  // What is wrong with a shard set gets a line of its own.
  std::vector<std::string> faults;
  if (const uint64_t damaged = Count(*shards, "damaged_shards")) {
    faults.push_back(std::to_string(damaged) +
                     " damaged shard(s), first: " + Text(*shards, "first_damage"));
  }
  if (const uint64_t skipped = Count(*shards, "skipped_samples")) {
    faults.push_back(std::to_string(skipped) +
                     " sample(s) left out, first: " + Text(*shards, "first_skipped_sample"));
  }
  if (auto stale = shards->find("stale"); stale != shards->end() && *stale == true) {
    faults.push_back("a shard changed since it was indexed");
  }
  for (const std::string& fault : faults) line += "    " + fault + "\n";
  if (auto store = shards->find("object_store"); store != shards->end() && store->is_object()) {
    line += "    " + ObjectReadsText(*shards, "set") + "; " +
            std::to_string(Count(*shards, "verify_heads")) + " HEADs to admit other access keys; " +
            std::to_string(Count(*shards, "listing_reads")) + " read from its listing's bytes, " +
            ByteSizeText(Count(*shards, "listing_kept_bytes")) + " of them kept\n    " +
            NodeStoreText(*store) + "\n";
  }
  return line;
}

std::string IndexingLine(const json& indexing) {
  std::string line = "  " + Text(indexing, "path") + ": " + std::to_string(Count(indexing, "done"));
  if (auto total = indexing.find("total"); total != indexing.end() && total->is_number()) {
    line += " of " + std::to_string(total->get<uint64_t>());
  }
  line += " " + Text(indexing, "unit");
  const double left = Number(indexing, "seconds_left", -1);
  if (left >= 0) line += ", " + SecondsText(left) + " left";
  return line + "\n";
}

std::string SamplerLine(const json& group, const std::map<std::string, std::string>& names) {
  const std::string root = Text(group, "dataset");
  auto named = names.find(root);
  char ratio[64];
  std::snprintf(ratio, sizeof(ratio), "%.3f", Number(group, "loads_per_request"));
  std::string line = "  " + (named != names.end() ? named->second : root) + " (" +
                     Text(group, "policy") + "): " + std::to_string(Count(group, "jobs")) +
                     " jobs, " + std::to_string(Count(group, "requests")) + " requests, " +
                     std::to_string(Count(group, "loads")) + " loads (" + ratio +
                     " loads per request";
  // What the loads cost, per request: the figures that tell sharing jobs.
  if (group.contains("decodes_per_request")) {
    char costs[160];
    std::snprintf(costs, sizeof(costs),
                  "; per request %.3f file reads, %.3f decodes, %.3f cache hits",
                  Number(group, "file_reads_per_request"), Number(group, "decodes_per_request"),
                  Number(group, "cache_hits_per_request"));
    line += costs;
  }
  line += ")";
  if (const uint64_t substitutions = Count(group, "substitutions")) {
    line += ", " + std::to_string(substitutions) + " substitutions";
  }
  return line + "\n";
}

const json& ListOf(const json& reply, const char* key) {
  static const json kEmpty = json::array();
  auto it = reply.find(key);
  return it != reply.end() && it->is_array() ? *it : kEmpty;
}

}  // namespace

std::string FullText(const json& reply) {
  std::string out;
  AppendFull(reply, 0, &out);
  return out;
}

std::string DatasetsSummary(const json& reply) {
  const json& datasets = ListOf(reply, "datasets");
  const json& indexing = ListOf(reply, "indexing");
  const json& samplers = ListOf(reply, "samplers");
  std::map<std::string, std::string> names;  // root -> DatasetName
  std::string lines;
  bool shard_sets = false;
  for (const json& dataset : datasets) {
    names[Text(dataset, "root")] = DatasetName(dataset);
    lines += DatasetLine(dataset);
    shard_sets = shard_sets || !ShardsOfKey(Text(dataset, "key")).empty();
  }
  std::string out = "datasets: " + std::to_string(datasets.size()) +
                    (shard_sets ? " (--verbose lists every shard)" : "") + "\n" + lines;
  if (!indexing.empty()) {
    out += "listing now: " + std::to_string(indexing.size()) + "\n";
    for (const json& entry : indexing) out += IndexingLine(entry);
  }
  out += "sampler groups: " + std::to_string(samplers.size()) + "\n";
  for (const json& group : samplers) out += SamplerLine(group, names);
  return out;
}

std::string ByteSizeText(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0) {
    std::snprintf(text, sizeof(text), "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(text, sizeof(text), "%.1f %s", value, kUnits[unit]);
  }
  return text;
}

}  // namespace galley
