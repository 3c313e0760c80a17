#include "object_shards.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>

#include "galley/dataset/tar_index.h"

namespace galley {

namespace os = objectstore;

std::string ObjectEndpointName(const os::Endpoint& endpoint) {
  if (endpoint.url.empty()) return "https://s3." + endpoint.region + ".amazonaws.com";
  std::string url = endpoint.url;
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

namespace {

// `status` with `url` in front, unless the message names it already.
Status Naming(const os::S3Url& url, const Status& status) {
  const std::string name = url.ToString();
  if (status.message().find(url.key) != std::string::npos) return status;
  return Status(status.code(), name + " " + status.message());
}

}  // namespace

Result<ShardListing> ListObjectShard(os::ObjectStore& store, const os::Access& access,
                                     const os::S3Url& url, const ShardOptions& options,
                                     bool use_cache, std::atomic<uint64_t>* keep_budget) {
  auto info = store.Head(access, url.bucket, url.key);
  if (!info.ok()) return Naming(url, info.status());
  ShardListing listing;
  ShardOrigin& origin = listing.origin;
  origin.name = url.ToString();
  origin.identity.size = info->size;
  origin.etag = info->etag;
  // The ETag names the version: another one is another cache file.
  origin.cache_key =
      ObjectEndpointName(access.endpoint) + "\n" + origin.name + "\netag " + info->etag;
  if (use_cache && LoadCachedListing(options.index_cache_dir, origin, &listing)) {
    listing.from_cache = true;
    GlobalShardIndexCounters().cache_hits++;
    return listing;
  }
  // One pass over the object; the labels' payloads are taken as they pass,
  // so the listing needs no GET after it. The whole object is kept for the
  // set's first reads while the budget has room for it.
  bool keep = false;
  if (keep_budget != nullptr) {
    uint64_t left = keep_budget->load();
    while (left >= info->size && !keep)
      keep = keep_budget->compare_exchange_weak(left, left - info->size);
  }
  std::vector<uint8_t> kept;
  if (keep) kept.reserve(info->size);
  TarStreamLister lister(info->size, KeepsInlinePayload);
  Status feed_error = Status::Ok();
  bool complete = false;
  const Status streamed =
      store.Stream(access, url.bucket, url.key, info->etag, [&](std::span<const uint8_t> chunk) {
        if (keep) kept.insert(kept.end(), chunk.begin(), chunk.end());
        feed_error = lister.Feed(chunk);
        if (!feed_error.ok()) return feed_error;
        if (lister.done()) {
          // The rest (padding after the end-of-archive marker, or what
          // follows damage) is not needed.
          complete = true;
          return Status::Cancelled("the listing is complete");
        }
        return Status::Ok();
      });
  const bool listed = feed_error.ok() && (streamed.ok() || complete);
  if (keep && (!listed || kept.size() > info->size)) {
    *keep_budget += info->size;  // nothing kept: the budget goes back
    keep = false;
  }
  if (!feed_error.ok()) return Naming(url, feed_error);
  if (!streamed.ok() && !complete) return Naming(url, streamed);
  auto tar = std::move(lister).Finish(&listing.inline_payloads);
  if (!tar.ok()) {
    if (keep) *keep_budget += info->size;
    return Naming(url, tar.status());
  }
  listing.tar = std::move(*tar);
  if (keep) origin.streamed = std::make_shared<const std::vector<uint8_t>>(std::move(kept));
  GlobalShardIndexCounters().scanned++;
  if (use_cache)
    StoreCachedListing(options.index_cache_dir, listing, options.index_cache_max_bytes);
  return listing;
}

Result<std::unique_ptr<ShardSource>> ShardSource::OpenObjects(
    const std::vector<std::string>& urls, std::shared_ptr<os::ObjectStore> store,
    const os::Access& access, const ShardOptions& options) {
  if (urls.empty()) return Status::InvalidArgument("the shard list is empty");
  if (store == nullptr) return Status::InvalidArgument("this galleyd reads no object storage");
  if (options.object_requests_in_flight < 1 || options.object_requests_in_flight > 4096) {
    return Status::InvalidArgument("object_requests_in_flight must be 1 to 4096, not " +
                                   std::to_string(options.object_requests_in_flight));
  }
  std::vector<os::S3Url> parsed;
  std::vector<std::string> names;
  parsed.reserve(urls.size());
  for (const std::string& url : urls) {
    GALLEY_ASSIGN_OR_RETURN(os::S3Url shard, os::S3Url::Parse(url));
    if (shard.key.empty() || shard.key.back() == '/') {
      return Status::InvalidArgument(url + " names no object (a shard is s3://BUCKET/KEY.tar)");
    }
    names.push_back(shard.ToString());
    parsed.push_back(std::move(shard));
  }
  const bool use_cache =
      !options.index_cache_dir.empty() && PrepareIndexCacheDir(options.index_cache_dir);
  std::atomic<uint64_t> keep_budget{options.object_listing_keep_bytes};
  ObjectShards* objects = nullptr;
  auto source = Build(
      names, options,
      [&](size_t i, ShardStats*) {
        return ListObjectShard(*store, access, parsed[i], options, use_cache, &keep_budget);
      },
      [&](std::vector<ShardOrigin> origins) -> std::unique_ptr<Storage> {
        std::vector<ObjectShards::Shard> shards;
        shards.reserve(origins.size());
        for (size_t s = 0; s < origins.size(); ++s) {
          shards.push_back({parsed[s], origins[s].identity.size, origins[s].etag});
        }
        auto made = std::make_unique<ObjectShards>(store, access, std::move(shards), options);
        for (size_t s = 0; s < origins.size(); ++s) {
          if (origins[s].streamed != nullptr) {
            made->KeepListed(static_cast<uint32_t>(s), std::move(origins[s].streamed));
          }
        }
        objects = made.get();
        return made;
      });
  if (source.ok() && objects != nullptr) {
    // The ranges the items read, so that each kept shard goes once its
    // items have read it.
    std::vector<ItemId> every((*source)->size());
    std::iota(every.begin(), every.end(), ItemId{0});
    objects->ExpectListedReads((*source)->ReadExtents(every));
  }
  return source;
}

ObjectShards::ObjectShards(std::shared_ptr<os::ObjectStore> store, const os::Access& access,
                           std::vector<Shard> shards, const ShardOptions& options,
                           uint32_t heads_in_flight)
    : store_(std::move(store)),
      endpoint_(ObjectEndpointName(access.endpoint)),
      shards_(std::move(shards)),
      max_in_flight_(options.object_requests_in_flight),
      max_bytes_(options.object_prefetch_bytes),
      heads_in_flight_(std::max<uint32_t>(1, heads_in_flight)),
      refresh_wait_(options.object_refresh_wait),
      admitted_{Admitted{0, access, false}} {}

void ObjectShards::KeepListed(uint32_t shard, std::shared_ptr<const std::vector<uint8_t>> bytes) {
  if (shard >= shards_.size() || bytes == nullptr) return;
  MutexLock lock(&mu_);
  listed_[shard] = Listed{std::move(bytes), {}};
}

void ObjectShards::ExpectListedReads(std::span<const ShardExtent> extents) {
  MutexLock lock(&mu_);
  for (const ShardExtent& e : extents) {
    if (auto it = listed_.find(e.shard); it != listed_.end()) it->second.unread.insert(e.offset);
  }
  std::erase_if(listed_, [](const auto& entry) { return entry.second.unread.empty(); });
}

uint64_t ObjectShards::listed_bytes() const {
  MutexLock lock(&mu_);
  uint64_t bytes = 0;
  for (const auto& [shard, listed] : listed_) bytes += listed.bytes->size();
  return bytes;
}

bool ObjectShards::ListedLocked(const ShardExtent& extent) const {
  auto it = listed_.find(extent.shard);
  return it != listed_.end() && extent.offset + extent.size <= it->second.bytes->size();
}

ObjectShards::~ObjectShards() {
  // The store calls back exactly once per GET: wait for those in flight,
  // whose callbacks use this object.
  MutexLock lock(&mu_);
  queued_.clear();
  queued_ahead_.clear();
  while (in_flight_ > 0) fetched_.Wait(&mu_);
}

std::optional<ObjectShards::Signed> ObjectShards::CurrentLocked() const {
  for (auto it = admitted_.rbegin(); it != admitted_.rend(); ++it) {
    if (!it->refused) return Signed{it->generation, it->access};
  }
  return std::nullopt;
}

ObjectShards::Signed ObjectShards::SigningLocked() const {
  if (std::optional<Signed> current = CurrentLocked()) return *current;
  return Signed{admitted_.back().generation, admitted_.back().access};
}

void ObjectShards::Admit(const os::Access& access) {
  {
    MutexLock lock(&mu_);
    const os::Credentials& c = access.credentials;
    std::erase_if(admitted_, [&](const Admitted& a) {
      const os::Credentials& old = a.access.credentials;
      return old.access_key_id == c.access_key_id && old.secret_access_key == c.secret_access_key &&
             old.session_token == c.session_token;
    });
    admitted_.push_back(Admitted{next_generation_++, access, false});
    if (admitted_.size() > kMaxAdmitted) admitted_.erase(admitted_.begin());
  }
  admitted_cv_.SignalAll();
}

Status ObjectShards::ReadDirect(uint32_t shard, uint64_t offset, std::span<uint8_t> out,
                                const os::Access& access) {
  const Shard& s = shards_[shard];
  gets_++;
  auto bytes = store_->Get(access, s.url.bucket, s.url.key, offset, out.size(), s.etag);
  if (!bytes.ok()) return bytes.status();
  bytes_ += bytes->size();
  if (bytes->size() != out.size()) {
    return Status::DataLoss("the store sent " + std::to_string(bytes->size()) + " bytes of " +
                            std::to_string(out.size()));
  }
  std::memcpy(out.data(), bytes->data(), out.size());
  return Status::Ok();
}

Status ObjectShards::ReadAfterRefusal(uint32_t shard, uint64_t offset, std::span<uint8_t> out,
                                      Status failure, uint64_t generation) {
  const auto deadline = std::chrono::steady_clock::now() + refresh_wait_;
  bool waited_out = false;
  while (os::IsCredentialRefusal(failure)) {
    std::optional<Signed> next;
    {
      MutexLock lock(&mu_);
      for (Admitted& a : admitted_) {
        if (a.generation == generation) a.refused = true;
      }
      next = CurrentLocked();
      // Credentials are admitted only by a job's open or refresh, whose
      // HEADs the store answered: wait for those, not for the clock.
      while (!next && !waited_out) {
        if (!admitted_cv_.WaitUntil(&mu_, deadline)) {
          waited_out = std::chrono::steady_clock::now() >= deadline;
        }
        next = CurrentLocked();
      }
    }
    if (!next) {
      const int64_t ms = refresh_wait_.count();
      const std::string wait =
          ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
      return ReadError(
          shard,
          Status(failure.code(), failure.message() + "; no fresh credentials came within " + wait));
    }
    failure = ReadDirect(shard, offset, out, next->access);
    generation = next->generation;
  }
  return failure.ok() ? failure : ReadError(shard, failure);
}

Status ObjectShards::ReadError(uint32_t shard, const Status& status) {
  const Shard& s = shards_[shard];
  if (status.code() == StatusCode::kDataLoss) {
    changed_ = true;
    return Status::DataLoss(s.url.ToString() + " changed since it was listed (ETag " + s.etag +
                            " is no longer its version); its items fail until a job opens the "
                            "dataset again, which lists it again (" +
                            status.message() + ")");
  }
  return Naming(s.url, status);
}

Status ObjectShards::ReadInto(uint32_t shard, uint64_t offset, std::span<uint8_t> out) {
  std::shared_ptr<const std::vector<uint8_t>> listed;
  {
    MutexLock lock(&mu_);
    if (ListedLocked(ShardExtent{shard, offset, out.size()})) {
      // The listing's bytes, as streamed: the listed version.
      auto it = listed_.find(shard);
      listed = it->second.bytes;
      it->second.unread.erase(offset);
      if (it->second.unread.empty()) listed_.erase(it);
    }
  }
  if (listed == nullptr) return ReadFromStorage(shard, offset, out);
  std::memcpy(out.data(), listed->data() + offset, out.size());
  listed_reads_++;
  prefetched_reads_++;
  return Status::Ok();
}

Status ObjectShards::ReadFromStorage(uint32_t shard, uint64_t offset, std::span<uint8_t> out) {
  FetchPtr fetch;
  bool start_now = false;
  Signed signing;
  {
    MutexLock lock(&mu_);
    signing = SigningLocked();
    // The current wave's registration first: a next wave's one of the
    // same range stays for that wave.
    auto [first, last] = claims_.equal_range(ShardExtent{shard, offset, out.size()});
    auto it = std::find_if(first, last, [](const auto& c) { return !c.second.ahead; });
    if (it == last) it = first;
    if (it != last) {
      fetch = it->second.fetch;
      claims_.erase(it);
      if (!fetch->started) {
        // Its turn has not come: the read needs it now.
        std::deque<FetchPtr>& queue = fetch->ahead ? queued_ahead_ : queued_;
        queue.erase(std::find(queue.begin(), queue.end(), fetch));
        MarkStartedLocked(fetch);
        start_now = true;
      }
    }
  }
  if (fetch == nullptr) {
    // Not prefetched: one GET of its own.
    on_demand_reads_++;
    Status read = ReadDirect(shard, offset, out, signing.access);
    if (read.ok()) return read;
    return ReadAfterRefusal(shard, offset, out, read, signing.generation);
  }
  if (start_now) Start(fetch, signing);
  prefetched_reads_++;
  Status status = Status::Ok();
  {
    MutexLock lock(&mu_);
    while (!fetch->done) fetched_.Wait(&mu_);
  }
  // The claim keeps the fetched bytes until it is given up below.
  bool refused = false;
  if (!fetch->bytes.ok()) {
    refused = os::IsCredentialRefusal(fetch->bytes.status());
    status = refused ? fetch->bytes.status() : ReadError(shard, fetch->bytes.status());
  } else if (fetch->bytes->size() != fetch->end - fetch->begin) {
    status = ReadError(shard,
                       Status::DataLoss("the store sent " + std::to_string(fetch->bytes->size()) +
                                        " bytes of " + std::to_string(fetch->end - fetch->begin)));
  } else {
    std::memcpy(out.data(), fetch->bytes->data() + (offset - fetch->begin), out.size());
  }
  std::vector<FetchPtr> startable;
  {
    MutexLock lock(&mu_);
    Unclaim(fetch);
    startable = TakeStartable();
    signing = SigningLocked();
  }
  for (const FetchPtr& f : startable) Start(f, signing);
  // Outside the lock and with the claim given up: the wait for a refresh
  // holds no fetched bytes.
  if (refused) return ReadAfterRefusal(shard, offset, out, status, fetch->generation);
  return status;
}

Status ObjectShards::Verify(AccessChecker* /*checker*/, const std::vector<bool>& /*holds_served*/,
                            bool* changed) {
  // Whether an object changed is seen by VerifyObjects (HEAD) and by the
  // reads (If-Match); a local user's permissions do not apply to it.
  *changed = changed_.load();
  return Status::Ok();
}

Status ObjectShards::VerifyObjects(const os::Access& access, bool* changed, ListingStop* stop) {
  // HEADs in parallel: a set of a thousand shards is admitted in the time
  // of a few dozen round trips.
  const size_t parallel_heads = heads_in_flight_;
  std::vector<Status> denied(shards_.size(), Status::Ok());
  std::atomic<bool> differs{false};
  std::atomic<bool> stopped{false};
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < shards_.size(); i = next++) {
      // The client that asked has gone (or galleyd stops): no more HEADs;
      // those in flight on the other threads end on their own.
      if (stopped.load() || StopRequestedNow(stop)) {
        stopped = true;
        return;
      }
      const Shard& s = shards_[i];
      verify_heads_++;
      auto info = store_->Head(access, s.url.bucket, s.url.key);
      if (info.ok()) {
        if (info->size != s.size || info->etag != s.etag) differs = true;
      } else if (info.status().code() == StatusCode::kNotFound) {
        differs = true;  // deleted: the next listing says so
      } else {
        denied[i] = Naming(s.url, info.status());
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < std::min(parallel_heads, shards_.size()); ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (stopped.load()) {
    *changed = false;  // not all HEADed: the next job's HEADs tell
    return stop->Why();
  }
  *changed = differs.load();
  if (*changed) changed_ = true;
  for (const Status& status : denied) {
    if (!status.ok()) return status;
  }
  // Every shard HEADed with these credentials: later reads may carry them
  // (the newest admitted, so refreshed temporary credentials take over).
  if (!*changed) Admit(access);
  return Status::Ok();
}

void ObjectShards::Prefetch(std::span<const ShardExtent> extents) {
  std::vector<FetchPtr> startable;
  Signed signing;
  {
    MutexLock lock(&mu_);
    ++wave_;
    DropStaleLocked();
    RegisterLocked(extents, wave_, /*ahead=*/false);
    startable = TakeStartable();
    signing = SigningLocked();
  }
  for (const FetchPtr& f : startable) Start(f, signing);
}

void ObjectShards::PrefetchNextWave(std::span<const ShardExtent> extents) {
  std::vector<FetchPtr> startable;
  Signed signing;
  {
    MutexLock lock(&mu_);
    RegisterLocked(extents, wave_ + 1, /*ahead=*/true);
    startable = TakeStartable();
    signing = SigningLocked();
  }
  for (const FetchPtr& f : startable) Start(f, signing);
}

void ObjectShards::DropStaleLocked() {
  // Ranges registered for kWavesKept waves ago and never read are dropped.
  for (auto it = claims_.begin(); it != claims_.end();) {
    if (it->second.wave + kWavesKept < wave_) {
      FetchPtr fetch = it->second.fetch;
      it = claims_.erase(it);
      Unclaim(fetch);
    } else {
      ++it;
    }
  }
}

void ObjectShards::RegisterLocked(std::span<const ShardExtent> extents, uint64_t wave, bool ahead) {
  std::vector<ShardExtent> sorted(extents.begin(), extents.end());
  std::sort(sorted.begin(), sorted.end());
  std::deque<FetchPtr>& queue = ahead ? queued_ahead_ : queued_;
  FetchPtr current;
  for (const ShardExtent& e : sorted) {
    if (e.size == 0 || e.shard >= shards_.size()) continue;
    if (ListedLocked(e)) continue;  // its read takes the listing's bytes
    if (!ahead) {
      // Named by the last wave for this one: its fetch serves it, and
      // moves up with this wave's if it still waits its turn.
      auto [first, last] = claims_.equal_range(e);
      auto hinted = std::find_if(first, last, [](const auto& c) { return c.second.ahead; });
      if (hinted != last) {
        hinted->second.ahead = false;
        hinted->second.wave = wave;
        const FetchPtr& fetch = hinted->second.fetch;
        if (fetch->ahead) {
          fetch->ahead = false;
          if (!fetch->started) {
            queued_ahead_.erase(std::find(queued_ahead_.begin(), queued_ahead_.end(), fetch));
            queued_.push_back(fetch);
          }
        }
        continue;
      }
    }
    const uint64_t end = e.offset + e.size;
    if (current == nullptr || current->shard != e.shard || e.offset > current->end + kCoalesceGap ||
        std::max(current->end, end) - current->begin > kMaxCoalescedBytes) {
      current = std::make_shared<Fetch>();
      current->shard = e.shard;
      current->begin = e.offset;
      current->end = end;
      current->ahead = ahead;
      queue.push_back(current);
    }
    current->end = std::max(current->end, end);
    current->claims++;
    claims_.emplace(e, Claim{current, wave, ahead});
  }
}

void ObjectShards::MarkStartedLocked(const FetchPtr& fetch) {
  fetch->started = true;
  in_flight_++;
  max_in_flight_seen_ = std::max(max_in_flight_seen_, in_flight_);
  held_bytes_ += fetch->end - fetch->begin;
  if (fetch->ahead) ahead_fetches_++;
}

std::vector<ObjectShards::FetchPtr> ObjectShards::TakeStartable() {
  std::vector<FetchPtr> startable;
  while (!queued_.empty() && in_flight_ < max_in_flight_) {
    const FetchPtr fetch = queued_.front();
    const uint64_t size = fetch->end - fetch->begin;
    if (fetch->claims == 0) {  // every range dropped before it started
      queued_.pop_front();
      continue;
    }
    if (held_bytes_ != 0 && held_bytes_ + size > max_bytes_) break;
    queued_.pop_front();
    MarkStartedLocked(fetch);
    startable.push_back(fetch);
  }
  // The next wave's only behind every fetch of this one, and within half
  // the bounds: what the current wave registers later (its substitutes, a
  // wave the hint missed) finds the other half free.
  if (!queued_.empty()) return startable;
  const uint64_t ahead_requests = std::max<uint64_t>(1, max_in_flight_ / 2);
  while (!queued_ahead_.empty() && in_flight_ < ahead_requests) {
    const FetchPtr fetch = queued_ahead_.front();
    const uint64_t size = fetch->end - fetch->begin;
    if (fetch->claims == 0) {
      queued_ahead_.pop_front();
      continue;
    }
    if (held_bytes_ + size > max_bytes_ / 2) break;
    queued_ahead_.pop_front();
    MarkStartedLocked(fetch);
    startable.push_back(fetch);
  }
  return startable;
}

void ObjectShards::Unclaim(const FetchPtr& fetch) {
  if (--fetch->claims > 0 || !fetch->done) return;
  held_bytes_ -= fetch->end - fetch->begin;
  fetch->bytes = Status::Cancelled("released");
}

void ObjectShards::Start(const FetchPtr& fetch, const Signed& credentials) {
  const Shard& s = shards_[fetch->shard];
  fetch->generation = credentials.generation;
  gets_++;
  store_->GetAsync(
      credentials.access, s.url.bucket, s.url.key, fetch->begin, fetch->end - fetch->begin, s.etag,
      [this, fetch](Result<std::vector<uint8_t>> bytes) { Finished(fetch, std::move(bytes)); });
}

void ObjectShards::Finished(const FetchPtr& fetch, Result<std::vector<uint8_t>> bytes) {
  if (bytes.ok()) bytes_ += bytes->size();
  std::vector<FetchPtr> startable;
  Signed signing;
  {
    MutexLock lock(&mu_);
    fetch->done = true;
    fetch->bytes = std::move(bytes);
    in_flight_--;
    if (fetch->claims == 0) {  // every range was dropped while it was fetched
      held_bytes_ -= fetch->end - fetch->begin;
      fetch->bytes = Status::Cancelled("released");
    }
    startable = TakeStartable();
    signing = SigningLocked();
  }
  fetched_.SignalAll();
  for (const FetchPtr& f : startable) Start(f, signing);
}

void ObjectShards::AddFingerprint(uint32_t shard, ContentFingerprintBuilder& fingerprint) const {
  const Shard& s = shards_[shard];
  fingerprint.AddString(endpoint_);
  fingerprint.AddString(s.url.bucket);
  fingerprint.AddString(s.url.key);
  fingerprint.AddInteger(s.size);
  fingerprint.AddString(s.etag);
}

void ObjectShards::AddResumeKey(uint32_t shard, ContentFingerprintBuilder& copy,
                                ContentFingerprintBuilder& versions) const {
  const Shard& s = shards_[shard];
  const size_t slash = s.url.key.rfind('/');
  copy.AddString(slash == std::string::npos ? s.url.key : s.url.key.substr(slash + 1));
  copy.AddInteger(s.size);
  versions.AddString(s.etag);
}

uint64_t ObjectShards::prefetches_in_flight() const {
  MutexLock lock(&mu_);
  return in_flight_;
}

uint64_t ObjectShards::fetches_ahead() const {
  MutexLock lock(&mu_);
  return ahead_fetches_;
}

uint64_t ObjectShards::max_prefetches_in_flight() const {
  MutexLock lock(&mu_);
  return max_in_flight_seen_;
}

}  // namespace galley
