// The dataset listings under way in this process (shard sets indexed,
// ImageFolder trees walked, manifests read), for the progress a waiting job
// prints and `galleyctl datasets` shows.
//
// A listing holds a ListingRegistration for its duration and bumps the
// counters of its ListingProgress as it goes; ActiveListings() snapshots the
// registry. A snapshot's entries stay valid after their listing ends (shared
// ownership) and are then simply no longer listed.
//
// Thread-safety: the registry is guarded by an internal mutex; the counters
// are atomics, written by the listing's threads and read by any thread.
#ifndef GALLEY_SERVER_DATASET_LISTING_PROGRESS_H_
#define GALLEY_SERVER_DATASET_LISTING_PROGRESS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace galley {

struct ListingProgress {
  std::string path;  // the first shard, the ImageFolder root or the manifest (canonical)
  std::string kind;  // "shards", "folder" or "manifest"
  std::string unit;  // what `done` counts: "shards", "files" or "lines"
  std::atomic<uint64_t> total{0};  // of `unit`; 0 while unknown (a folder being walked)
  std::atomic<uint64_t> done{0};
  // A folder: its class folders, and how many have been walked.
  std::atomic<uint64_t> classes{0};
  std::atomic<uint64_t> classes_done{0};
  std::chrono::steady_clock::time_point started;
};

// Registers a listing from construction to destruction.
class ListingRegistration {
 public:
  ListingRegistration(std::string path, std::string kind, std::string unit, uint64_t total);
  ~ListingRegistration();
  ListingRegistration(const ListingRegistration&) = delete;
  ListingRegistration& operator=(const ListingRegistration&) = delete;
  ListingProgress& progress() { return *progress_; }

 private:
  std::shared_ptr<ListingProgress> progress_;
};

// The listings under way now, oldest first.
std::vector<std::shared_ptr<const ListingProgress>> ActiveListings();

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_LISTING_PROGRESS_H_
