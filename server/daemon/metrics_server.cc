#include "server/daemon/metrics_server.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstring>
#include <thread>

namespace galley {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct MetricsServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
};

MetricsServer::MetricsServer(std::string host, uint16_t port, BodyFn body)
    : host_(std::move(host)),
      port_(port),
      body_(std::move(body)),
      impl_(std::make_unique<Impl>()) {}

MetricsServer::~MetricsServer() { Stop(); }

namespace {

// Waits, without consuming anything, until the peer has sent a whole HTTP
// request head (up to a blank line, within 8 KiB) or `deadline` passes.
bool RequestHeadArrives(int fd, std::chrono::steady_clock::time_point deadline) {
  char peek[8192];
  ssize_t seen = -1;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) return false;
    const ssize_t n = ::recv(fd, peek, sizeof(peek), MSG_PEEK);
    if (n <= 0) return false;
    if (::memmem(peek, static_cast<size_t>(n), "\r\n\r\n", 4) != nullptr) return true;
    if (n == static_cast<ssize_t>(sizeof(peek))) return false;  // no head in 8 KiB
    // Data is waiting but incomplete, so poll would return at once: pause.
    if (n == seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    seen = n;
  }
}

}  // namespace

Status MetricsServer::Start() {
  beast::error_code ec;
  const auto address = asio::ip::make_address(host_, ec);
  if (ec) return Status::InvalidArgument("metrics_address: '" + host_ + "': " + ec.message());
  const tcp::endpoint endpoint(address, port_);
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Unavailable("metrics endpoint " + host_ + " port " + std::to_string(port_) +
                               ": " + ec.message());
  }
  port_ = impl_->acceptor.local_endpoint().port();
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      beast::error_code accept_ec;
      tcp::socket socket(impl_->io);
      impl_->acceptor.accept(socket, accept_ec);
      if (accept_ec || stop_.load()) continue;
      // A scraper that stalls cannot hold the endpoint for long: the whole
      // request head must arrive within 2 s (not 2 s per byte), and a
      // reply it does not read times out the same way.
      struct timeval timeout {
        2, 0
      };
      ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
      ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
      if (!RequestHeadArrives(socket.native_handle(),
                              std::chrono::steady_clock::now() + std::chrono::seconds(2))) {
        continue;
      }
      beast::flat_buffer buffer;
      http::request<http::string_body> request;
      http::read(socket, buffer, request, accept_ec);
      if (accept_ec) continue;
      http::response<http::string_body> response;
      response.version(request.version());
      response.keep_alive(false);
      if (request.method() == http::verb::get && request.target() == "/metrics") {
        response.result(http::status::ok);
        response.set(http::field::content_type, "text/plain; version=0.0.4");
        try {
          response.body() = body_();
        } catch (const std::exception& e) {
          // A bug in rendering must not take the daemon down with it.
          response.result(http::status::internal_server_error);
          response.body() = std::string("metrics unavailable: ") + e.what() + "\n";
        }
      } else {
        response.result(http::status::not_found);
        response.set(http::field::content_type, "text/plain");
        response.body() = "galleyd serves /metrics\n";
      }
      response.prepare_payload();
      http::write(socket, response, accept_ec);
      socket.shutdown(tcp::socket::shutdown_both, accept_ec);
    }
  });
  spdlog::info("metrics on http://{}:{}/metrics", address.is_v6() ? "[" + host_ + "]" : host_,
               port_);
  return Status::Ok();
}

void MetricsServer::Stop() {
  if (stop_.exchange(true)) return;
  if (!thread_.joinable()) return;
  // Unblock accept() with a connection of our own: to the bound address, or
  // to loopback when bound to every interface.
  beast::error_code ec;
  auto address = impl_->acceptor.local_endpoint(ec).address();
  if (address.is_unspecified()) {
    address = address.is_v6() ? asio::ip::address(asio::ip::address_v6::loopback())
                              : asio::ip::address(asio::ip::address_v4::loopback());
  }
  tcp::socket poke(impl_->io);
  poke.connect(tcp::endpoint(address, port_), ec);
  thread_.join();
}

}  // namespace galley
