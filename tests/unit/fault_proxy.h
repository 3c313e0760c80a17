// FaultProxy: an HTTP proxy in front of an S3 server (rclone serve s3, in
// tests/unit/objectstore_*_test.cc) that answers the requests it is told to
// with faults (a 503, a reset connection, a canned reply, silence) and
// passes the others through; and RefusingPort, where nothing listens.
//
// Thread-safety: FaultProxy's methods may be called from any thread.
#ifndef GALLEY_TESTS_UNIT_FAULT_PROXY_H_
#define GALLEY_TESTS_UNIT_FAULT_PROXY_H_

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "galley/mutex.h"
#include "galley/unique_fd.h"

namespace galley::testing {

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
      kReplyThenClose,    // answer `reply` (raw HTTP, any bytes), then close
    };
    Kind kind = Kind::kForward;
    std::string reply;
    size_t reset_after = 0;
  };
  static Fault Forward() { return {}; }
  static Fault Reply(std::string reply) { return {Fault::Kind::kReply, std::move(reply), 0}; }
  static Fault ResetAfter(size_t bytes) { return {Fault::Kind::kForwardThenReset, "", bytes}; }
  static Fault Stall() { return {Fault::Kind::kStall, "", 0}; }
  static Fault ReplyThenClose(std::string reply) {
    return {Fault::Kind::kReplyThenClose, std::move(reply), 0};
  }
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

#endif  // GALLEY_TESTS_UNIT_FAULT_PROXY_H_
