// MetricsServer: galleyd's Prometheus endpoint.
//
// Serves GET /metrics on <host>:<port> (loopback unless the admin names
// another address: metrics_address) with Boost.Beast on one thread that
// serves every connection at once (asynchronous reads and writes), so a
// client that connects and stalls delays no other scrape. Each connection
// must send its request head within 2 s and read the reply within 2 s
// more (deadlines for the whole step, not per byte); at most 64 are served
// at once, and a 65th closes the oldest. The body comes from a callback so
// the server knows nothing of the daemon's internals (galleyd renders it
// with RenderPrometheus, prometheus_text.h).
// Start/Stop from one thread; the callback runs on the server's thread.
#ifndef GALLEY_SERVER_DAEMON_METRICS_SERVER_H_
#define GALLEY_SERVER_DAEMON_METRICS_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "galley/status.h"

namespace galley {

class MetricsServer {
 public:
  using BodyFn = std::function<std::string()>;
  // `host` is an IPv4 or IPv6 address literal ("127.0.0.1", "::", ...).
  MetricsServer(std::string host, uint16_t port, BodyFn body);
  ~MetricsServer();

  Status Start();
  void Stop();
  uint16_t port() const { return port_; }

 private:
  struct Impl;
  std::string host_;
  uint16_t port_;
  BodyFn body_;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
};

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_METRICS_SERVER_H_
