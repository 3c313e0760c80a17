#include "galley/dataset/listing_progress.h"

#include <algorithm>

#include "galley/mutex.h"

namespace galley {
namespace {

Mutex registry_mutex;
std::vector<std::shared_ptr<ListingProgress>>& Registry() REQUIRES(registry_mutex) {
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
  MutexLock lock(&registry_mutex);
  Registry().push_back(progress_);
}

ListingRegistration::~ListingRegistration() {
  MutexLock lock(&registry_mutex);
  std::erase(Registry(), progress_);
}

std::vector<std::shared_ptr<const ListingProgress>> ActiveListings() {
  MutexLock lock(&registry_mutex);
  return {Registry().begin(), Registry().end()};
}

}  // namespace galley
