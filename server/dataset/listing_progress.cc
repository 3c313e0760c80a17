#include "server/dataset/listing_progress.h"

#include <algorithm>
#include <mutex>

namespace galley {
namespace {

std::mutex registry_mutex;
// Guarded by registry_mutex.
std::vector<std::shared_ptr<ListingProgress>>& Registry() {
  static auto* listings = new std::vector<std::shared_ptr<ListingProgress>>();
  return *listings;
}

}  // namespace

ListingRegistration::ListingRegistration(std::string path, std::string kind, std::string unit,
                                         uint64_t total)
    : progress_(std::make_shared<ListingProgress>()) {
  progress_->path = std::move(path);
  progress_->kind = std::move(kind);
  progress_->unit = std::move(unit);
  progress_->total = total;
  progress_->started = std::chrono::steady_clock::now();
  std::lock_guard lock(registry_mutex);
  Registry().push_back(progress_);
}

ListingRegistration::~ListingRegistration() {
  std::lock_guard lock(registry_mutex);
  std::erase(Registry(), progress_);
}

std::vector<std::shared_ptr<const ListingProgress>> ActiveListings() {
  std::lock_guard lock(registry_mutex);
  return {Registry().begin(), Registry().end()};
}

}  // namespace galley
