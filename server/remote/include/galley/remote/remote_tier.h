// RemoteTier: the cache tier shared by every node, on a memcached pool
// (docs/cache.md, "The remote tier").
//
// libmemcached does what a distributed cache client must: it spreads keys
// over the servers by consistent hashing (ketama), so adding or losing a
// server moves only that server's share of the keys; it ejects a server
// that fails from the ring and tries it again after `retry_after`, so a
// dead server costs one bounded wait (connect or I/O timeout), then
// nothing, and a server that comes back is used again; it authenticates
// every connection with SASL. This class keys and checks values
// (remote_value.h), counts, and keeps writes off the pipeline's threads.
//
// Lookups (Get) run on the pipeline's worker threads, each on a handle from
// a pool (memcached_pool), and never fail: a server error, a timeout or a
// damaged or forged value (one whose MAC under the credentials' mac_key is
// wrong) is a miss, counted, so the item comes from storage; a refused value
// is deleted. Writes (Put) are queued and sent by one writer thread on its
// own handle; when the queue holds more than `write_queue_bytes` a write is
// dropped, counted.
//
// Which server failed is found by a health thread, not guessed from the
// failed operation: an operation that fails wakes it, it asks every server
// alone (a lookup of a key nobody writes, on a handle of its own, within
// the same timeouts) and records which answer; it asks the silent ones
// again every `retry_after` until they answer. A server going silent is
// logged once (then at most once a minute), and so is its return.
//
// Thread-safety: every public method may be called from any thread; the
// counters are atomics, `mu_` guards the write queue, `servers_mu_` the
// servers' states and the health thread's wake-up.
#ifndef GALLEY_SERVER_REMOTE_REMOTE_TIER_H_
#define GALLEY_SERVER_REMOTE_REMOTE_TIER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "galley/cache/blob.h"
#include "galley/dataset/content_fingerprint.h"
#include "galley/logging/log_throttle.h"
#include "galley/mutex.h"
#include "galley/remote/remote_cache.h"
#include "galley/remote/remote_credentials.h"
#include "galley/remote/remote_value.h"
#include "galley/snapshots/snapshots.h"
#include "galley/status.h"

struct memcached_st;
struct memcached_pool_st;

namespace galley {

// Frees what libmemcached made: a handle, or a pool of them.
struct MemcachedDeleter {
  void operator()(memcached_st* handle) const;
  void operator()(memcached_pool_st* pool) const;
};

struct RemoteTierOptions {
  std::vector<std::string> servers;  // "HOST:PORT", HOST a name, IPv4 or [IPv6]
  RemoteCredentials credentials;
  std::string credentials_file;  // for messages only
  std::chrono::milliseconds connect_timeout{200};
  std::chrono::milliseconds io_timeout{200};     // each wait for a server's answer
  std::chrono::seconds retry_after{2};           // a failed server is left out this long
  uint64_t max_value_bytes = uint64_t{1} << 20;  // memcached's default item limit (-I)
  uint64_t write_queue_bytes = uint64_t{64} << 20;
  uint32_t connections = 4;  // pooled lookup handles: one per pipeline thread
  RemoteValueLimits limits;
};

// What Probe measured of one server.
struct RemoteServerProbe {
  std::string address;
  bool reachable = false;
  std::string error;            // when not reachable
  double bytes_per_s = 0;       // reading the probe value back
  uint64_t capacity_bytes = 0;  // the server's memory limit (limit_maxbytes)
};

struct RemoteProbe {
  std::vector<RemoteServerProbe> servers;
  double bytes_per_s = 0;       // the reachable servers' rates added up
  uint64_t capacity_bytes = 0;  // their capacities added up
};

class RemoteTier final : public RemoteCache {
 public:
  // InvalidArgument for a malformed server address, options libmemcached
  // refuses, or credentials without a mac_key; Internal when libcrypto
  // cannot sign values. Connects to nothing yet.
  static Result<std::unique_ptr<RemoteTier>> Create(const RemoteTierOptions& options);
  ~RemoteTier() override;  // stops the threads; writes still queued are dropped
  RemoteTier(const RemoteTier&) = delete;
  RemoteTier& operator=(const RemoteTier&) = delete;

  // Talks to each server alone: writes a `probe_bytes` value, reads it back
  // a few times (the rate), deletes it, and asks for the server's memory
  // limit. PermissionDenied, naming the server and the credentials file,
  // when a server refuses the credentials; a server that does not answer is
  // reported unreachable. Run at start, before any lookup.
  Result<RemoteProbe> Probe(uint64_t probe_bytes = uint64_t{256} << 10);

  // RemoteCache. Get asks for both forms in one round trip (mget).
  RemoteLookup Get(const ContentFingerprint& dataset, ItemId item) override EXCLUDES(servers_mu_);
  void Put(const ContentFingerprint& dataset, ItemId item, RemoteForm form,
           cache::BlobPtr blob) override EXCLUDES(mu_);
  bool Fits(uint64_t payload_bytes) const override {
    return kRemoteHeaderBytes + payload_bytes <= options_.max_value_bytes;
  }
  void set_write_form(RemoteForm form) override { write_form_.store(form); }
  RemoteForm write_form() const override { return write_form_.load(); }
  RemoteTierSnapshot Snapshot() const override EXCLUDES(mu_, servers_mu_);

 private:
  struct PendingWrite {
    std::string key;
    RemoteForm form = RemoteForm::kEncoded;
    cache::BlobPtr blob;  // null: delete the value under `key`
  };
  struct ServerState {
    std::string address;  // as configured
    std::string host;
    uint16_t port = 0;
    bool reachable = true;
    uint64_t failures = 0;
    std::string last_error;
    std::unique_ptr<LogThrottle> log;
  };

  explicit RemoteTier(const RemoteTierOptions& options);
  // What `write` counts against write_queue_bytes.
  static uint64_t QueuedBytes(const PendingWrite& write);
  // Queues `write` for the writer thread, or drops it (counted) when the
  // queue is full.
  void Enqueue(PendingWrite write) EXCLUDES(mu_);
  void WriterLoop() EXCLUDES(mu_);
  void HealthLoop() EXCLUDES(servers_mu_);
  // "" when server `host`:`port` answers a lookup alone, else why not.
  std::string Ask(const std::string& host, uint16_t port) const;
  // Records that an operation failed with `rc`; wakes the health thread.
  void NoteFailure(memcached_st* handle, int rc) EXCLUDES(servers_mu_);

  const RemoteTierOptions options_;
  // Configured once; the pool's handles and the writer's are its clones.
  // Declared first, so it goes last.
  std::unique_ptr<memcached_st, MemcachedDeleter> master_;
  std::unique_ptr<memcached_pool_st, MemcachedDeleter> pool_;
  std::unique_ptr<memcached_st, MemcachedDeleter> writer_handle_;  // the writer thread's own
  std::atomic<RemoteForm> write_form_{RemoteForm::kEncoded};

  std::atomic<uint64_t> lookups_{0}, encoded_hits_{0}, decoded_hits_{0}, misses_{0}, errors_{0},
      corrupt_{0}, bytes_read_{0}, lookup_ns_{0};
  std::atomic<uint64_t> writes_{0}, bytes_written_{0}, write_errors_{0}, writes_dropped_{0},
      writes_oversized_{0};

  mutable Mutex mu_;
  CondVar cv_;  // signalled when a write is queued or stop_ is set
  std::deque<PendingWrite> queue_ GUARDED_BY(mu_);
  uint64_t queued_bytes_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;

  mutable Mutex servers_mu_;
  CondVar health_cv_;  // signalled when a check is wanted or health_stop_ is set
  std::vector<ServerState> servers_ GUARDED_BY(servers_mu_);  // in configured order
  bool check_wanted_ GUARDED_BY(servers_mu_) = false;
  bool health_stop_ GUARDED_BY(servers_mu_) = false;
  // Damaged values: at most 5 logged a minute; writes a server refused: one.
  LogThrottle corrupt_log_{5, std::chrono::minutes(1)};
  LogThrottle write_log_{1, std::chrono::minutes(1)};

  std::thread writer_;
  std::thread health_;
};

}  // namespace galley

#endif  // GALLEY_SERVER_REMOTE_REMOTE_TIER_H_
