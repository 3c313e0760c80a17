#include "server/daemon/remote_tier.h"

#include <libmemcached/memcached.h>
#include <libmemcachedutil-1.0/util.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

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
      {MEMCACHED_BEHAVIOR_KETAMA, 1},
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

std::string ServerName(const memcached_instance_st* server) {
  return std::string(memcached_server_name(server)) + ":" +
         std::to_string(memcached_server_port(server));
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

bool ParseServerAddress(const std::string& text, std::string* host, uint16_t* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  std::string name = text.substr(0, colon);
  const bool bracketed = name.front() == '[';
  if (bracketed != (name.back() == ']')) return false;
  if (!bracketed && name.find(':') != std::string::npos) return false;  // IPv6 needs [...]
  if (bracketed && name.size() < 3) return false;
  for (const char c : name) {
    if (c <= ' ' || c == '/' || c == 0x7f) return false;
  }
  unsigned value = 0;
  const char* begin = text.data() + colon + 1;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (begin == end || ec != std::errc() || ptr != end || value == 0 || value > 65535) return false;
  *host = std::move(name);
  *port = static_cast<uint16_t>(value);
  return true;
}

RemoteTier::RemoteTier(const RemoteTierOptions& options) : options_(options) {}

Result<std::unique_ptr<RemoteTier>> RemoteTier::Create(const RemoteTierOptions& options) {
  if (options.servers.empty()) return Status::InvalidArgument("the remote tier has no servers");
  std::unique_ptr<RemoteTier> tier(new RemoteTier(options));
  tier->master_ = memcached_create(nullptr);
  if (tier->master_ == nullptr) return Status::ResourceExhausted("memcached_create failed");
  GALLEY_RETURN_IF_ERROR(Configure(tier->master_, options));
  for (const std::string& server : options.servers) {
    std::string host;
    uint16_t port = 0;
    if (!ParseServerAddress(server, &host, &port)) {
      return Status::InvalidArgument("remote cache server '" + server + "' is not HOST:PORT");
    }
    const memcached_return_t rc = memcached_server_add(tier->master_, host.c_str(), port);
    if (memcached_failed(rc)) {
      return Status::InvalidArgument("remote cache server '" + server +
                                     "': " + memcached_strerror(tier->master_, rc));
    }
    ServerState& state = tier->servers_[host + ":" + std::to_string(port)];
    state.log = std::make_unique<LogThrottle>(1, std::chrono::minutes(1));
  }
  tier->pool_ = memcached_pool_create(tier->master_, 1, std::max<uint32_t>(1, options.connections));
  tier->writer_handle_ = memcached_clone(nullptr, tier->master_);
  if (tier->pool_ == nullptr || tier->writer_handle_ == nullptr) {
    return Status::ResourceExhausted("cannot create the remote tier's connection pool");
  }
  RemoteTier* raw = tier.get();
  tier->writer_ = std::thread([raw] { raw->WriterLoop(); });
  return tier;
}

RemoteTier::~RemoteTier() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (writer_.joinable()) writer_.join();
  if (writer_handle_ != nullptr) memcached_free(writer_handle_);
  if (pool_ != nullptr) memcached_pool_destroy(pool_);
  if (master_ != nullptr) memcached_free(master_);
}

Result<RemoteProbe> RemoteTier::Probe(uint64_t probe_bytes) {
  RemoteProbe probe;
  std::string value(probe_bytes, '\0');
  std::mt19937_64 random(static_cast<uint64_t>(::getpid()) ^ 0x9e3779b97f4a7c15ULL);
  for (char& c : value) c = static_cast<char>(random());
  char hostname[256] = {};
  ::gethostname(hostname, sizeof(hostname) - 1);
  const std::string key = std::string("galley1:probe:") + hostname + ":" +
                          std::to_string(::getpid());
  for (const std::string& address : options_.servers) {
    RemoteServerProbe& server = probe.servers.emplace_back();
    server.address = address;
    std::string host;
    uint16_t port = 0;
    ParseServerAddress(address, &host, &port);
    memcached_st* handle = memcached_create(nullptr);
    if (handle == nullptr) return Status::ResourceExhausted("memcached_create failed");
    GALLEY_RETURN_IF_ERROR(Configure(handle, options_));
    memcached_server_add(handle, host.c_str(), port);
    memcached_return_t rc =
        memcached_set(handle, key.data(), key.size(), value.data(), value.size(), 60, 0);
    if (rc == MEMCACHED_AUTH_FAILURE || rc == MEMCACHED_AUTH_PROBLEM) {
      const std::string detail = memcached_last_error_message(handle);
      memcached_free(handle);
      return Status::PermissionDenied(
          "remote cache server " + address + " refused user '" + options_.credentials.username +
          "' of " + options_.credentials_file + " (" +
          (rc == MEMCACHED_AUTH_FAILURE ? "SASL authentication failed" : "SASL problem: " + detail) +
          "); check the username and password there and the server's SASL database");
    }
    if (memcached_failed(rc)) {
      server.error = memcached_last_error_message(handle);
      memcached_free(handle);
      continue;
    }
    constexpr int kReads = 4;
    const auto start = Clock::now();
    uint64_t read = 0;
    for (int i = 0; i < kReads && memcached_success(rc); ++i) {
      size_t length = 0;
      uint32_t flags = 0;
      char* got = memcached_get(handle, key.data(), key.size(), &length, &flags, &rc);
      if (got != nullptr) read += length;
      std::free(got);
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    memcached_delete(handle, key.data(), key.size(), 0);
    if (memcached_failed(rc)) {
      server.error = memcached_last_error_message(handle);
      memcached_free(handle);
      continue;
    }
    server.reachable = true;
    server.bytes_per_s = seconds > 0 ? static_cast<double>(read) / seconds : 0;
    memcached_stat_st* stats = memcached_stat(handle, nullptr, &rc);
    if (stats != nullptr && memcached_success(rc)) server.capacity_bytes = stats->limit_maxbytes;
    if (stats != nullptr) memcached_stat_free(nullptr, stats);
    memcached_free(handle);
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
  PooledHandle handle(pool_);
  if (handle.get() == nullptr) {
    errors_++;
    misses_++;
    lookup_ns_ += NsSince(start);
    return found;
  }
  const char* key_data[2] = {keys[0].data(), keys[1].data()};
  const size_t key_lengths[2] = {keys[0].size(), keys[1].size()};
  bool failed = false;
  memcached_return_t rc = memcached_mget(handle.get(), key_data, key_lengths, 2);
  if (memcached_failed(rc)) {
    // SOME_ERRORS: a server failed, the other may still answer.
    failed = true;
    NoteFailure(handle.get(), rc);
  }
  if (rc == MEMCACHED_SUCCESS || rc == MEMCACHED_SOME_ERRORS) {
    memcached_result_st result_storage;
    memcached_result_st* result = memcached_result_create(handle.get(), &result_storage);
    while (memcached_fetch_result(handle.get(), result, &rc) != nullptr) {
      const std::string_view key(memcached_result_key_value(result),
                                 memcached_result_key_length(result));
      const std::string_view value(memcached_result_value(result), memcached_result_length(result));
      bytes_read_ += value.size();
      const RemoteForm form = key == keys[0] ? RemoteForm::kDecoded : RemoteForm::kEncoded;
      if (key != keys[0] && key != keys[1]) continue;
      auto blob = DecodeRemoteValue(key, form, value, options_.limits);
      if (!blob.ok()) {
        corrupt_++;
        uint64_t dropped = 0;
        if (corrupt_log_.Allow(LogThrottle::Clock::now(), &dropped)) {
          spdlog::warn("remote cache: {}; the item is read from storage{}",
                       blob.status().message(),
                       dropped > 0 ? fmt::format(" ({} more not logged)", dropped) : "");
        }
        continue;
      }
      (form == RemoteForm::kDecoded ? found.decoded : found.encoded) = std::move(blob).value();
      if (unreachable_servers_.load() > 0) NoteSuccess(handle.get(), key);
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
  const uint64_t bytes = kRemoteHeaderBytes + blob->bytes.size();
  if (bytes > options_.max_value_bytes) {
    writes_oversized_++;
    return;
  }
  {
    MutexLock lock(&mu_);
    if (queued_bytes_ + bytes > options_.write_queue_bytes) {
      writes_dropped_++;
      return;
    }
    queued_bytes_ += bytes;
    queue_.push_back({RemoteKey(dataset, item, form), form, std::move(blob)});
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
    const std::string value = EncodeRemoteValue(write.key, write.form, *write.blob);
    const memcached_return_t rc = memcached_set(writer_handle_, write.key.data(), write.key.size(),
                                                value.data(), value.size(), 0, 0);
    {
      MutexLock lock(&mu_);
      queued_bytes_ -= value.size();
    }
    if (rc == MEMCACHED_SUCCESS) {
      writes_++;
      bytes_written_ += value.size();
      if (unreachable_servers_.load() > 0) NoteSuccess(writer_handle_, write.key);
    } else if (rc == MEMCACHED_E2BIG) {
      writes_oversized_++;  // the server's item limit is below remote_cache_max_value_bytes
    } else {
      write_errors_++;
      if (memcached_fatal(rc)) NoteFailure(writer_handle_, rc);
    }
  }
}

void RemoteTier::NoteFailure(memcached_st* handle, int code) {
  const auto rc = static_cast<memcached_return_t>(code);
  const memcached_instance_st* server = memcached_server_get_last_disconnect(handle);
  const std::string error = memcached_last_error_message(handle);
  std::string name = server != nullptr ? ServerName(server) : "";
  MutexLock lock(&servers_mu_);
  auto it = servers_.find(name);
  if (it == servers_.end()) {
    // No server to blame (none left in the ring): every unreachable one
    // was reported already.
    if (rc == MEMCACHED_NO_SERVERS) return;
    uint64_t dropped = 0;
    if (unattributed_log_.Allow(LogThrottle::Clock::now(), &dropped)) {
      spdlog::warn("remote cache: {}; items come from storage meanwhile", error);
    }
    return;
  }
  ServerState& state = it->second;
  state.last_error = error;
  if (!state.reachable) return;
  state.reachable = false;
  state.failures++;
  unreachable_servers_++;
  uint64_t dropped = 0;
  if (state.log->Allow(LogThrottle::Clock::now(), &dropped)) {
    spdlog::warn(
        "remote cache server {} failed ({}); its share of the items comes from storage, and it is "
        "tried again every {} s",
        name, error, options_.retry_after.count());
  }
}

void RemoteTier::NoteSuccess(memcached_st* handle, std::string_view key) {
  memcached_return_t rc;
  const memcached_instance_st* server = memcached_server_by_key(handle, key.data(), key.size(), &rc);
  if (server == nullptr) return;
  const std::string name = ServerName(server);
  MutexLock lock(&servers_mu_);
  auto it = servers_.find(name);
  if (it == servers_.end() || it->second.reachable) return;
  it->second.reachable = true;
  unreachable_servers_--;
  spdlog::info("remote cache server {} answers again; its items are shared again", name);
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
  for (const std::string& address : options_.servers) {
    std::string host;
    uint16_t port = 0;
    ParseServerAddress(address, &host, &port);
    auto it = servers_.find(host + ":" + std::to_string(port));
    if (it == servers_.end()) continue;
    s.servers.push_back(
        {address, it->second.reachable, it->second.failures, it->second.last_error});
  }
  return s;
}

}  // namespace galley
