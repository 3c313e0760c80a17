// InMemoryObjectStore: an ObjectStore over objects held in memory, for tests
// of what galleyd builds on object storage. ETags are a hash of the bytes;
// requests are checked against the access keys allowed to read each bucket
// (PermissionDenied otherwise) and counted (ObjectStoreCounters, plus
// streams and per-key GETs). GetAsync is served on the store's own thread,
// so callers really wait; Hold() keeps requests in flight until Release(),
// and WaitForInFlight(n) waits (on a condition, not a clock) until n are.
// Credentials can be expired (their requests refused as S3 refuses an
// expired session token). Failures can be injected for the next requests. set_latency() answers
// each GET that long after it was sent, however many are in flight (a
// network round trip), for measurements; tests of behaviour use Hold().
//
// Thread-safety: every method may be called from any thread.
#ifndef GALLEY_TESTS_UNIT_OBJECTSTORE_IN_MEMORY_OBJECT_STORE_H_
#define GALLEY_TESTS_UNIT_OBJECTSTORE_IN_MEMORY_OBJECT_STORE_H_

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "galley/objectstore/object_store.h"

namespace galley::testing {

class InMemoryObjectStore final : public objectstore::ObjectStore {
 public:
  InMemoryObjectStore() : thread_([this] { Serve(); }) {}
  ~InMemoryObjectStore() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      held_ = false;
    }
    changed_.notify_all();
    thread_.join();
  }

  // Stores `bytes` under bucket/key; returns its ETag.
  std::string Put(const std::string& bucket, const std::string& key,
                  const std::vector<uint8_t>& bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t hash = 1469598103934665603ull;
    for (uint8_t b : bytes) hash = (hash ^ b) * 1099511628211ull;
    char etag[40];
    std::snprintf(etag, sizeof(etag), "%016llx-%zu", static_cast<unsigned long long>(hash),
                  bytes.size());
    objects_[{bucket, key}] = {bytes, etag};
    return etag;
  }
  // Lets `access_key_id` read `bucket`.
  void Allow(const std::string& bucket, const std::string& access_key_id) {
    std::lock_guard<std::mutex> lock(mu_);
    allowed_.insert({bucket, access_key_id});
  }
  void Revoke(const std::string& bucket, const std::string& access_key_id) {
    std::lock_guard<std::mutex> lock(mu_);
    allowed_.erase({bucket, access_key_id});
  }
  // Refuses `access_key_id` the object bucket/key (HEAD and GET), as an
  // object's own policy or ACL may, while it may still list the bucket.
  void DenyObject(const std::string& bucket, const std::string& key,
                  const std::string& access_key_id) {
    std::lock_guard<std::mutex> lock(mu_);
    denied_objects_.insert({bucket + "/" + key, access_key_id});
  }
  // Listings answer pages of at most `keys` keys, each counted in lists.
  void set_list_page_keys(size_t keys) {
    std::lock_guard<std::mutex> lock(mu_);
    list_page_keys_ = keys;
  }
  // Called, outside the store's lock, as each LIST page is requested, with
  // the pages requested so far (counters().lists).
  void set_on_list_page(std::function<void(uint64_t)> hook) {
    std::lock_guard<std::mutex> lock(mu_);
    on_list_page_ = std::move(hook);
  }
  // Called, outside the store's lock, as each HEAD is sent, with the HEADs
  // sent so far (counters().heads).
  void set_on_head(std::function<void(uint64_t)> hook) {
    std::lock_guard<std::mutex> lock(mu_);
    on_head_ = std::move(hook);
  }
  // Requests signed with `access_key_id` are refused from now on as S3
  // refuses expired credentials (400 ExpiredToken), whatever they may read.
  void Expire(const std::string& access_key_id) {
    std::lock_guard<std::mutex> lock(mu_);
    expired_.insert(access_key_id);
  }
  // Requests refused for their credentials so far; WaitForRefusals(n)
  // waits (on a condition) until there have been n.
  uint64_t refusals() const {
    std::lock_guard<std::mutex> lock(mu_);
    return refusals_;
  }
  void WaitForRefusals(uint64_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return refusals_ >= n; });
  }
  // The next `count` GETs (async or streamed) fail with `status`.
  void FailNextGets(int count, Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_count_ = count;
    fail_status_ = std::move(status);
  }
  // Stream() hands out chunks of at most this many bytes.
  void set_chunk_bytes(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    chunk_bytes_ = bytes;
  }
  void set_latency(std::chrono::microseconds latency) {
    std::lock_guard<std::mutex> lock(mu_);
    latency_ = latency;
  }
  // While held, GETs stay in flight (counted) until Release().
  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = true;
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_ = false;
    }
    changed_.notify_all();
  }
  // Waits until exactly `n` GETs are in flight.
  void WaitForInFlight(uint64_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return counters_.in_flight.load() == n; });
  }
  uint64_t streams() const { return streams_.load(); }
  // The most GETs ever in flight at once.
  uint64_t max_in_flight() const {
    std::lock_guard<std::mutex> lock(mu_);
    return max_in_flight_;
  }
  // Access key of the last GET served.
  std::string last_get_key_id() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_get_key_id_;
  }
  // Byte ranges the GETs asked for, in the order they were sent.
  std::vector<std::pair<uint64_t, uint64_t>> get_ranges() const {
    std::lock_guard<std::mutex> lock(mu_);
    return get_ranges_;
  }

  void GetAsync(const objectstore::Access& access, const std::string& bucket,
                const std::string& key, uint64_t offset, uint64_t length, const std::string& etag,
                GetDone done) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      counters_.gets++;
      counters_.in_flight++;
      max_in_flight_ = std::max(max_in_flight_, counters_.in_flight.load());
      get_ranges_.push_back({offset, length});
      queue_.push_back({access, bucket, key, offset, length, etag, std::move(done),
                        std::chrono::steady_clock::now() + latency_});
    }
    changed_.notify_all();
  }

  Result<objectstore::ObjectInfo> Head(const objectstore::Access& access, const std::string& bucket,
                                       const std::string& key) override {
    std::function<void(uint64_t)> on_head;
    {
      std::lock_guard<std::mutex> lock(mu_);
      on_head = on_head_;
    }
    const uint64_t heads = ++counters_.heads;
    if (on_head) on_head(heads);
    std::lock_guard<std::mutex> lock(mu_);
    GALLEY_RETURN_IF_ERROR(CheckAccess(access, bucket, key));
    GALLEY_RETURN_IF_ERROR(CheckObject(access, bucket, key));
    auto it = objects_.find({bucket, key});
    if (it == objects_.end()) return Status::NotFound("s3://" + bucket + "/" + key + ": NoSuchKey");
    return objectstore::ObjectInfo{key, it->second.bytes.size(), it->second.etag};
  }

  Status List(const objectstore::Access& access, const std::string& bucket,
              const std::string& prefix,
              const std::function<Status(const objectstore::ObjectInfo&)>& each) override {
    std::vector<objectstore::ObjectInfo> found;
    size_t page_keys = 0;
    std::function<void(uint64_t)> on_page;
    {
      std::lock_guard<std::mutex> lock(mu_);
      counters_.lists++;
      GALLEY_RETURN_IF_ERROR(CheckAccess(access, bucket, prefix));
      for (const auto& [name, object] : objects_) {
        if (name.first == bucket && name.second.compare(0, prefix.size(), prefix) == 0)
          found.push_back({name.second, object.bytes.size(), object.etag});
      }
      page_keys = list_page_keys_ > 0 ? list_page_keys_ : std::max<size_t>(found.size(), 1);
      on_page = on_list_page_;
    }
    // Page by page, as S3 answers: the next page is requested (counted)
    // only once the caller took every key of the one before.
    for (size_t first = 0;; first += page_keys) {
      const uint64_t pages = first == 0 ? counters_.lists.load() : ++counters_.lists;
      if (on_page) on_page(pages);
      const size_t end = std::min(first + page_keys, found.size());
      for (size_t i = first; i < end; ++i) GALLEY_RETURN_IF_ERROR(each(found[i]));
      if (end >= found.size()) return Status::Ok();
    }
  }

  Status Stream(const objectstore::Access& access, const std::string& bucket,
                const std::string& key, const std::string& etag,
                const std::function<Status(std::span<const uint8_t>)>& chunk) override {
    std::vector<uint8_t> bytes;
    size_t chunk_bytes = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      counters_.gets++;
      streams_++;
      auto got = Fetch(access, bucket, key, 0, 0, etag);
      if (!got.ok()) return got.status();
      bytes = std::move(*got);
      chunk_bytes = chunk_bytes_;
    }
    for (size_t at = 0; at < bytes.size(); at += chunk_bytes) {
      const size_t n = std::min(chunk_bytes, bytes.size() - at);
      counters_.bytes += n;
      GALLEY_RETURN_IF_ERROR(chunk(std::span<const uint8_t>(bytes.data() + at, n)));
    }
    return Status::Ok();
  }

  const objectstore::ObjectStoreCounters& counters() const override { return counters_; }

 private:
  struct Object {
    std::vector<uint8_t> bytes;
    std::string etag;
  };
  struct Request {
    objectstore::Access access;
    std::string bucket, key;
    uint64_t offset, length;
    std::string etag;
    GetDone done;
    std::chrono::steady_clock::time_point due;  // sent + latency
  };

  Status CheckAccess(const objectstore::Access& access, const std::string& bucket,
                     const std::string& key) {
    if (expired_.contains(access.credentials.access_key_id)) {
      refusals_++;
      changed_.notify_all();
      return Status::PermissionDenied("s3://" + bucket + "/" + key + ": " +
                                      std::string(objectstore::kCredentialRefusalWords) +
                                      " (400 ExpiredToken)");
    }
    if (!allowed_.contains({bucket, access.credentials.access_key_id}))
      return Status::PermissionDenied("s3://" + bucket + "/" + key + ": AccessDenied (403)");
    return Status::Ok();
  }

  Status CheckObject(const objectstore::Access& access, const std::string& bucket,
                     const std::string& key) const {
    if (denied_objects_.contains({bucket + "/" + key, access.credentials.access_key_id}))
      return Status::PermissionDenied("s3://" + bucket + "/" + key + ": AccessDenied (403)");
    return Status::Ok();
  }

  // The bytes a GET returns; mu_ held.
  Result<std::vector<uint8_t>> Fetch(const objectstore::Access& access, const std::string& bucket,
                                     const std::string& key, uint64_t offset, uint64_t length,
                                     const std::string& etag) {
    if (fail_count_ > 0) {
      fail_count_--;
      counters_.failures++;
      return fail_status_;
    }
    GALLEY_RETURN_IF_ERROR(CheckAccess(access, bucket, key));
    GALLEY_RETURN_IF_ERROR(CheckObject(access, bucket, key));
    auto it = objects_.find({bucket, key});
    if (it == objects_.end()) return Status::NotFound("s3://" + bucket + "/" + key + ": NoSuchKey");
    if (!etag.empty() && etag != it->second.etag)
      return Status::DataLoss("s3://" + bucket + "/" + key + ": PreconditionFailed (412)");
    const auto& bytes = it->second.bytes;
    if (offset > bytes.size()) return Status::InvalidArgument("InvalidRange (416)");
    const uint64_t end =
        length == 0 ? bytes.size() : std::min<uint64_t>(bytes.size(), offset + length);
    last_get_key_id_ = access.credentials.access_key_id;
    return std::vector<uint8_t>(bytes.begin() + static_cast<std::ptrdiff_t>(offset),
                                bytes.begin() + static_cast<std::ptrdiff_t>(end));
  }

  void Serve() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      changed_.wait(lock, [&] { return stop_ || (!held_ && !queue_.empty()); });
      if (queue_.empty()) return;  // stopping, nothing left
      // Requests are due in the order they were sent: the first waits for
      // its round trip, the others for what is left of theirs.
      if (!stop_ && std::chrono::steady_clock::now() < queue_.front().due) {
        changed_.wait_until(lock, queue_.front().due);
        continue;
      }
      Request request = std::move(queue_.front());
      queue_.pop_front();
      auto result = Fetch(request.access, request.bucket, request.key, request.offset,
                          request.length, request.etag);
      if (result.ok()) counters_.bytes += result->size();
      counters_.in_flight--;  // answered: off the wire before its callback runs
      changed_.notify_all();
      lock.unlock();
      request.done(std::move(result));
      lock.lock();
    }
  }

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::pair<std::string, std::string>, Object> objects_;
  std::set<std::pair<std::string, std::string>> allowed_;         // bucket, access key id
  std::set<std::pair<std::string, std::string>> denied_objects_;  // bucket/key, access key id
  size_t list_page_keys_ = 0;                                     // 0: one page
  std::function<void(uint64_t)> on_list_page_;                    // see set_on_list_page
  std::function<void(uint64_t)> on_head_;                         // see set_on_head
  std::set<std::string> expired_;                                 // access key ids
  uint64_t refusals_ = 0;
  std::deque<Request> queue_;
  bool held_ = false;
  bool stop_ = false;
  int fail_count_ = 0;
  Status fail_status_ = Status::Ok();
  size_t chunk_bytes_ = 1000;
  std::chrono::microseconds latency_{0};
  std::string last_get_key_id_;
  std::vector<std::pair<uint64_t, uint64_t>> get_ranges_;
  std::atomic<uint64_t> streams_{0};
  uint64_t max_in_flight_ = 0;
  objectstore::ObjectStoreCounters counters_;
  std::thread thread_;  // last: starts after the rest is made
};

}  // namespace galley::testing

#endif  // GALLEY_TESTS_UNIT_OBJECTSTORE_IN_MEMORY_OBJECT_STORE_H_
