#include "galley/remote/remote_tier.h"

#include <libmemcached/memcached.h>
#include <libmemcachedutil-1.0/util.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <random>

namespace galley {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t NsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

// Every handle's settings: the binary protocol (SASL needs it), ketama
// consistent hashing, bounded waits, and ejection of a failed server from
// the ring until `retry_after` has passed.
Status Configure(memcached_st* handle, const RemoteTierOptions& options) {
  const std::pair<memcached_behavior_t, uint64_t> behaviors[] = {
      {MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1},
      {MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1},  // libketama's layout: MD5, 160 points a server
      {MEMCACHED_BEHAVIOR_TCP_NODELAY, 1},
      {MEMCACHED_BEHAVIOR_NO_BLOCK, 1},
      {MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, static_cast<uint64_t>(options.connect_timeout.count())},
      {MEMCACHED_BEHAVIOR_POLL_TIMEOUT, static_cast<uint64_t>(options.io_timeout.count())},
      {MEMCACHED_BEHAVIOR_SND_TIMEOUT,
       static_cast<uint64_t>(options.io_timeout.count()) * 1000},  // microseconds
      {MEMCACHED_BEHAVIOR_RCV_TIMEOUT, static_cast<uint64_t>(options.io_timeout.count()) * 1000},
      {MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS, 1},
      {MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT, 1},
      {MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, static_cast<uint64_t>(options.retry_after.count())},
      {MEMCACHED_BEHAVIOR_DEAD_TIMEOUT, static_cast<uint64_t>(options.retry_after.count())},
  };
  for (const auto& [behavior, value] : behaviors) {
    const memcached_return_t rc = memcached_behavior_set(handle, behavior, value);
    if (memcached_failed(rc)) {
      return Status::InvalidArgument(std::string("libmemcached refused setting ") +
                                     libmemcached_string_behavior(behavior) + ": " +
                                     memcached_strerror(handle, rc));
    }
  }
  const memcached_return_t rc = memcached_set_sasl_auth_data(
      handle, options.credentials.username.c_str(), options.credentials.password.c_str());
  if (memcached_failed(rc)) {
    return Status::InvalidArgument(std::string("libmemcached refused the SASL credentials: ") +
                                   memcached_strerror(handle, rc));
  }
  return Status::Ok();
}

using Handle = std::unique_ptr<memcached_st, MemcachedDeleter>;

// A value libmemcached allocated (malloc), freed when it goes.
using Fetched = std::unique_ptr<char, void (*)(void*)>;

// memcached_get of `key` on `handle`: the value, or null with *rc saying why.
Fetched GetValue(memcached_st* handle, std::string_view key, size_t* length,
                 memcached_return_t* rc) {
  uint32_t flags = 0;
  return Fetched(memcached_get(handle, key.data(), key.size(), length, &flags, rc), &std::free);
}

// A handle on `host`:`port` alone, configured as every other.
Result<Handle> SingleServerHandle(const RemoteTierOptions& options, const std::string& host,
                                  uint16_t port) {
  Handle handle(memcached_create(nullptr));
  if (handle == nullptr) return Status::ResourceExhausted("memcached_create failed");
  GALLEY_RETURN_IF_ERROR(Configure(handle.get(), options));
  const memcached_return_t rc = memcached_server_add(handle.get(), host.c_str(), port);
  if (memcached_failed(rc)) {
    return Status::InvalidArgument(std::string("memcached_server_add: ") +
                                   memcached_strerror(handle.get(), rc));
  }
  return handle;
}

// A handle taken from the pool, given back when it goes.
class PooledHandle {
 public:
  explicit PooledHandle(memcached_pool_st* pool) : pool_(pool) {
    timespec wait{1, 0};
    memcached_return_t rc;
    handle_ = memcached_pool_fetch(pool_, &wait, &rc);
  }
  ~PooledHandle() {
    if (handle_ != nullptr) memcached_pool_release(pool_, handle_);
  }
  PooledHandle(const PooledHandle&) = delete;
  PooledHandle& operator=(const PooledHandle&) = delete;
  memcached_st* get() const { return handle_; }

 private:
  memcached_pool_st* pool_;
  memcached_st* handle_ = nullptr;
};

bool IsEnd(memcached_return_t rc) {
  return rc == MEMCACHED_END || rc == MEMCACHED_NOTFOUND || rc == MEMCACHED_SUCCESS;
}

}  // namespace

void MemcachedDeleter::operator()(memcached_st* handle) const { memcached_free(handle); }

void MemcachedDeleter::operator()(memcached_pool_st* pool) const { memcached_pool_destroy(pool); }

RemoteTier::RemoteTier(const RemoteTierOptions& options) : options_(options) {}

Result<std::unique_ptr<RemoteTier>> RemoteTier::Create(const RemoteTierOptions& options) {
  if (options.servers.empty()) return Status::InvalidArgument("the remote tier has no servers");
  if (options.credentials.mac_key.size() < kMinMacKeyBytes) {
    return Status::InvalidArgument("the remote tier needs a mac_key of at least " +
                                   std::to_string(kMinMacKeyBytes) + " bytes in " +
                                   options.credentials_file);
  }
  // A libcrypto without HMAC-SHA256 would refuse every value: say so now.
  if (auto signed_value = EncodeRemoteValue(options.credentials.mac_key, "galley1:self-test",
                                            RemoteForm::kEncoded, cache::Blob());
      !signed_value.ok()) {
    return signed_value.status();
  }
  std::unique_ptr<RemoteTier> tier(new RemoteTier(options));
  tier->master_.reset(memcached_create(nullptr));
  if (tier->master_ == nullptr) return Status::ResourceExhausted("memcached_create failed");
  GALLEY_RETURN_IF_ERROR(Configure(tier->master_.get(), options));
  for (const std::string& server : options.servers) {
    std::string host;
    uint16_t port = 0;
    if (!ParseServerAddress(server, &host, &port)) {
      return Status::InvalidArgument("remote cache server '" + server + "' is not HOST:PORT");
    }
    const memcached_return_t rc = memcached_server_add(tier->master_.get(), host.c_str(), port);
    if (memcached_failed(rc)) {
      return Status::InvalidArgument("remote cache server '" + server +
                                     "': " + memcached_strerror(tier->master_.get(), rc));
    }
    MutexLock lock(&tier->servers_mu_);
    ServerState& state = tier->servers_.emplace_back();
    state.address = server;
    state.host = host;
    state.port = port;
    state.log = std::make_unique<LogThrottle>(1, std::chrono::minutes(1));
  }
  tier->pool_.reset(
      memcached_pool_create(tier->master_.get(), 1, std::max<uint32_t>(1, options.connections)));
  tier->writer_handle_.reset(memcached_clone(nullptr, tier->master_.get()));
  if (tier->pool_ == nullptr || tier->writer_handle_ == nullptr) {
    return Status::ResourceExhausted("cannot create the remote tier's connection pool");
  }
  RemoteTier* raw = tier.get();
  tier->writer_ = std::thread([raw] { raw->WriterLoop(); });
  tier->health_ = std::thread([raw] { raw->HealthLoop(); });
  return tier;
}

RemoteTier::~RemoteTier() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  {
    MutexLock lock(&servers_mu_);
    health_stop_ = true;
  }
  health_cv_.SignalAll();
  if (writer_.joinable()) writer_.join();
  if (health_.joinable()) health_.join();
}

Result<RemoteProbe> RemoteTier::Probe(uint64_t probe_bytes) {
  RemoteProbe probe;
  std::string value(probe_bytes, '\0');
  std::mt19937_64 random(static_cast<uint64_t>(::getpid()) ^ 0x9e3779b97f4a7c15ULL);
  for (char& c : value) c = static_cast<char>(random());
  char hostname[256] = {};
  ::gethostname(hostname, sizeof(hostname) - 1);
  const std::string key =
      std::string("galley1:probe:") + hostname + ":" + std::to_string(::getpid());
  for (const std::string& address : options_.servers) {
    RemoteServerProbe& server = probe.servers.emplace_back();
    server.address = address;
    std::string host;
    uint16_t port = 0;
    ParseServerAddress(address, &host, &port);
    GALLEY_ASSIGN_OR_RETURN(Handle handle, SingleServerHandle(options_, host, port));
    memcached_return_t rc =
        memcached_set(handle.get(), key.data(), key.size(), value.data(), value.size(), 60, 0);
    if (rc == MEMCACHED_AUTH_FAILURE || rc == MEMCACHED_AUTH_PROBLEM) {
      return Status::PermissionDenied(
          "remote cache server " + address + " refused user '" + options_.credentials.username +
          "' of " + options_.credentials_file + " (" +
          (rc == MEMCACHED_AUTH_FAILURE
               ? std::string("SASL authentication failed")
               : "SASL problem: " + std::string(memcached_last_error_message(handle.get()))) +
          "); check the username and password there and the server's SASL database");
    }
    constexpr int kReads = 4;
    const auto start = Clock::now();
    uint64_t read = 0;
    for (int i = 0; i < kReads && memcached_success(rc); ++i) {
      size_t length = 0;
      if (GetValue(handle.get(), key, &length, &rc) != nullptr) read += length;
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (memcached_failed(rc)) {
      server.error = memcached_last_error_message(handle.get());
      continue;
    }
    memcached_delete(handle.get(), key.data(), key.size(), 0);
    server.reachable = true;
    server.bytes_per_s = seconds > 0 ? static_cast<double>(read) / seconds : 0;
    memcached_stat_st* stats = memcached_stat(handle.get(), nullptr, &rc);
    if (stats != nullptr && memcached_success(rc)) server.capacity_bytes = stats->limit_maxbytes;
    if (stats != nullptr) memcached_stat_free(nullptr, stats);
    probe.bytes_per_s += server.bytes_per_s;
    probe.capacity_bytes += server.capacity_bytes;
  }
  return probe;
}

RemoteLookup RemoteTier::Get(const ContentFingerprint& dataset, ItemId item) {
  const auto start = Clock::now();
  lookups_++;
  RemoteLookup found;
  const std::string keys[2] = {RemoteKey(dataset, item, RemoteForm::kDecoded),
                               RemoteKey(dataset, item, RemoteForm::kEncoded)};
  PooledHandle handle(pool_.get());
  if (handle.get() == nullptr) {
    errors_++;
    misses_++;
    lookup_ns_ += NsSince(start);
    return found;
  }
  const char* key_data[2] = {keys[0].data(), keys[1].data()};
  const size_t key_lengths[2] = {keys[0].size(), keys[1].size()};
  // The servers the keys go to. The binary protocol's mget reports a server
  // it could not reach only when it was the last one asked, so the request
  // each of them is left owing tells instead.
  const memcached_instance_st* targets[2];
  memcached_return_t rc;
  for (int k = 0; k < 2; ++k) {
    targets[k] = memcached_server_by_key(handle.get(), key_data[k], key_lengths[k], &rc);
  }
  bool failed = false, sent = false;
  rc = memcached_mget(handle.get(), key_data, key_lengths, 2);
  for (const memcached_instance_st* target : targets) {
    const bool owing = target != nullptr && memcached_server_response_count(target) > 0;
    sent = sent || owing;
    failed = failed || !owing;
  }
  if (memcached_failed(rc)) failed = true;  // SOME_ERRORS: the other server may still answer
  if (failed) NoteFailure(handle.get(), rc);
  if (sent) {
    memcached_result_st result_storage{};
    memcached_result_st* result = memcached_result_create(handle.get(), &result_storage);
    while (memcached_fetch_result(handle.get(), result, &rc) != nullptr) {
      const std::string_view key(memcached_result_key_value(result),
                                 memcached_result_key_length(result));
      const std::string_view value(memcached_result_value(result), memcached_result_length(result));
      bytes_read_ += value.size();
      const RemoteForm form = key == keys[0] ? RemoteForm::kDecoded : RemoteForm::kEncoded;
      if (key != keys[0] && key != keys[1]) continue;
      auto blob =
          DecodeRemoteValue(options_.credentials.mac_key, key, form, value, options_.limits);
      if (!blob.ok()) {
        corrupt_++;
        uint64_t dropped = 0;
        if (corrupt_log_.Allow(LogThrottle::Clock::now(), &dropped)) {
          spdlog::warn("remote cache: {}; the item is read from storage{}", blob.status().message(),
                       dropped > 0 ? fmt::format(" ({} more not logged)", dropped) : "");
        }
        // Deleted, so that it is refused once rather than at every lookup
        // (a form that is not the write form is never overwritten).
        Enqueue(PendingWrite{std::string(key), form, nullptr});
        continue;
      }
      (form == RemoteForm::kDecoded ? found.decoded : found.encoded) = std::move(blob).value();
    }
    if (!IsEnd(rc)) {
      failed = true;
      NoteFailure(handle.get(), rc);
    }
    memcached_result_free(result);
  }
  if (found.decoded != nullptr) {
    found.encoded = nullptr;
    decoded_hits_++;
  } else if (found.encoded != nullptr) {
    encoded_hits_++;
  } else {
    misses_++;
  }
  if (failed) errors_++;
  lookup_ns_ += NsSince(start);
  return found;
}

void RemoteTier::Put(const ContentFingerprint& dataset, ItemId item, RemoteForm form,
                     cache::BlobPtr blob) {
  if (kRemoteHeaderBytes + blob->payload().size() > options_.max_value_bytes) {
    writes_oversized_++;
    return;
  }
  Enqueue(PendingWrite{RemoteKey(dataset, item, form), form, std::move(blob)});
}

uint64_t RemoteTier::QueuedBytes(const PendingWrite& write) {
  return write.blob != nullptr ? kRemoteHeaderBytes + write.blob->payload().size()
                               : write.key.size();
}

void RemoteTier::Enqueue(PendingWrite write) {
  const uint64_t bytes = QueuedBytes(write);
  {
    MutexLock lock(&mu_);
    if (queued_bytes_ + bytes > options_.write_queue_bytes) {
      writes_dropped_++;
      return;
    }
    queued_bytes_ += bytes;
    queue_.push_back(std::move(write));
  }
  cv_.Signal();
}

void RemoteTier::WriterLoop() {
  while (true) {
    PendingWrite write;
    {
      MutexLock lock(&mu_);
      while (!stop_ && queue_.empty()) cv_.Wait(&mu_);
      if (stop_) return;
      write = std::move(queue_.front());
      queue_.pop_front();
    }
    {
      MutexLock lock(&mu_);
      queued_bytes_ -= QueuedBytes(write);
    }
    if (write.blob == nullptr) {
      // A refused value; one that is already gone is as good.
      memcached_delete(writer_handle_.get(), write.key.data(), write.key.size(), 0);
      continue;
    }
    auto value =
        EncodeRemoteValue(options_.credentials.mac_key, write.key, write.form, *write.blob);
    if (!value.ok()) {
      write_errors_++;
      continue;
    }
    const memcached_return_t rc =
        memcached_set(writer_handle_.get(), write.key.data(), write.key.size(), value->data(),
                      value->size(), 0, 0);
    if (rc == MEMCACHED_SUCCESS) {
      writes_++;
      bytes_written_ += value->size();
    } else if (rc == MEMCACHED_E2BIG) {
      writes_oversized_++;  // the server's item limit is below remote_cache_max_value_bytes
    } else {
      write_errors_++;
      if (memcached_fatal(rc)) {
        NoteFailure(writer_handle_.get(), rc);
      } else {
        uint64_t dropped = 0;
        if (write_log_.Allow(LogThrottle::Clock::now(), &dropped)) {
          spdlog::warn("remote cache: storing {} failed: {}", write.key,
                       memcached_last_error_message(writer_handle_.get()));
        }
      }
    }
  }
}

void RemoteTier::NoteFailure(memcached_st* handle, int rc) {
  MutexLock lock(&servers_mu_);
  if (!check_wanted_) {
    spdlog::debug("remote cache: {} ({}); checking the servers",
                  memcached_strerror(handle, static_cast<memcached_return_t>(rc)),
                  memcached_last_error_message(handle));
  }
  check_wanted_ = true;
  health_cv_.Signal();
}

std::string RemoteTier::Ask(const std::string& host, uint16_t port) const {
  auto handle = SingleServerHandle(options_, host, port);
  if (!handle.ok()) return handle.status().message();
  static constexpr std::string_view kKey = "galley1:health";
  size_t length = 0;
  memcached_return_t rc;
  GetValue(handle->get(), kKey, &length, &rc);
  if (rc == MEMCACHED_SUCCESS || rc == MEMCACHED_NOTFOUND) return "";
  return memcached_last_error_message(handle->get());
}

void RemoteTier::HealthLoop() {
  while (true) {
    std::vector<std::pair<std::string, uint16_t>> targets;
    {
      MutexLock lock(&servers_mu_);
      const bool any_down = std::any_of(servers_.begin(), servers_.end(),
                                        [](const ServerState& s) { return !s.reachable; });
      // Silent servers are asked again every retry_after; the others when
      // an operation failed.
      while (!health_stop_ && !check_wanted_) {
        if (any_down) {
          health_cv_.WaitFor(&servers_mu_, options_.retry_after);
          break;
        }
        health_cv_.Wait(&servers_mu_);
      }
      if (health_stop_) return;
      check_wanted_ = false;
      targets.reserve(servers_.size());
      for (const ServerState& server : servers_) targets.emplace_back(server.host, server.port);
    }
    std::vector<std::string> problems;
    problems.reserve(targets.size());
    for (const auto& [host, port] : targets) problems.push_back(Ask(host, port));
    MutexLock lock(&servers_mu_);
    for (size_t i = 0; i < servers_.size(); ++i) {
      ServerState& server = servers_[i];
      const bool reachable = problems[i].empty();
      if (!reachable) server.last_error = problems[i];
      if (reachable == server.reachable) continue;
      server.reachable = reachable;
      uint64_t dropped = 0;
      if (!reachable) {
        server.failures++;
        if (server.log->Allow(LogThrottle::Clock::now(), &dropped)) {
          spdlog::warn(
              "remote cache server {} does not answer ({}); its share of the items comes from "
              "storage, and it is tried again every {} s{}",
              server.address, server.last_error, options_.retry_after.count(),
              dropped > 0 ? fmt::format(" ({} failures since the last one logged)", dropped) : "");
        }
      } else {
        spdlog::info("remote cache server {} answers again; its items are shared again",
                     server.address);
      }
    }
  }
}

RemoteTierSnapshot RemoteTier::Snapshot() const {
  RemoteTierSnapshot s;
  s.engine = "memcached";
  s.write_form = std::string(RemoteFormName(write_form()));
  s.lookups = lookups_.load();
  s.encoded_hits = encoded_hits_.load();
  s.decoded_hits = decoded_hits_.load();
  s.misses = misses_.load();
  s.errors = errors_.load();
  s.corrupt = corrupt_.load();
  s.bytes_read = bytes_read_.load();
  s.lookup_seconds = lookup_ns_.load() / 1e9;
  s.writes = writes_.load();
  s.bytes_written = bytes_written_.load();
  s.write_errors = write_errors_.load();
  s.writes_dropped = writes_dropped_.load();
  s.writes_oversized = writes_oversized_.load();
  {
    MutexLock lock(&mu_);
    s.write_queue_bytes = queued_bytes_;
  }
  MutexLock lock(&servers_mu_);
  s.servers.reserve(servers_.size());
  for (const ServerState& server : servers_) {
    s.servers.push_back({server.address, server.reachable, server.failures, server.last_error});
  }
  return s;
}

}  // namespace galley
