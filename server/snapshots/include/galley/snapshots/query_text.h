// How galleyctl shows galleyd's query replies (snapshot_json.h) to people.
//
// FullText prints every field of a reply as indented "key: value" lines;
// DatasetsSummary turns the "datasets" reply into one line per dataset, one
// per listing in progress and one per sampler group, so that a set of a
// thousand tar shards is a line, not a thousand (FullText still lists each
// shard). Both read only the keys snapshot_json.cc writes and skip any that
// is missing, so an older daemon's reply prints what it has.
//
// Thread-safety: free functions of their arguments; call from any thread.
#ifndef GALLEY_SERVER_SNAPSHOTS_QUERY_TEXT_H_
#define GALLEY_SERVER_SNAPSHOTS_QUERY_TEXT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace galley {

// Every field, nested values indented by two spaces; a string of several
// lines (a shard set's key: one shard per line) is printed line by line.
std::string FullText(const nlohmann::json& reply);

// The "datasets" reply in a few lines: per dataset its root (for a shard set
// the first and last shard), shard count, items, classes, size and the age
// of its listing, and its damage if any.
std::string DatasetsSummary(const nlohmann::json& reply);

// 1536 -> "1.5 KiB": binary units, one decimal.
std::string ByteSizeText(uint64_t bytes);

}  // namespace galley

#endif  // GALLEY_SERVER_SNAPSHOTS_QUERY_TEXT_H_
