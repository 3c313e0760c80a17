// DatasetListing: a dataset's listing as the "listing" request returns it
// (docs/protocol.md §1.2), page by page, without a job.
//
// A page holds the items' names and labels from `begin` on, in id order, as
// many as fit in a bounded reply, with what a client needs to stand in for
// torchvision's dataset object (the size, how names are spelled, and in the
// first page the classes) and to key a saved loader state (the resume key,
// the total size). Every page repeats the resume key, so a client that
// reads several can tell that they come from one listing.
//
// Thread-safety: a pure function of an immutable Dataset; any thread.
#ifndef GALLEY_SERVER_DAEMON_DATASET_LISTING_H_
#define GALLEY_SERVER_DAEMON_DATASET_LISTING_H_

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "galley/dataset/dataset.h"

namespace galley {

// The largest page ListingPage builds by default: well under the frame cap
// (wire::kMaxPayloadBytes), so a page always travels in one reply.
inline constexpr size_t kListingPageBytes = size_t{8} << 20;

// The page of `dataset` that starts at item `begin` (past the end: an empty
// page) and holds at most `count` items. `names` and `labels` hold at least
// one item when any is left and `count` allows, and stop before their JSON
// text, with the first page's classes, would pass `max_bytes`. `kind` says how a name
// is spelled: "folder" (relative to the ImageFolder root), "manifest"
// (relative to the manifest's folder) or "shards" (shard:member).
nlohmann::json ListingPage(const Dataset& dataset, uint64_t begin, uint64_t count = UINT64_MAX,
                           size_t max_bytes = kListingPageBytes);

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_DATASET_LISTING_H_
