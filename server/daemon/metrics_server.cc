#include "galley/daemon/metrics_server.h"

#include <spdlog/spdlog.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <list>

#include "galley/dataset/descriptor_exhaustion.h"

namespace galley {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// One scrape: read the request head, answer, close. Its two steps share one
// deadline each (not per byte), so a peer that trickles or stops reading
// holds its own connection only, and only that long.
class Scrape : public std::enable_shared_from_this<Scrape> {
 public:
  Scrape(tcp::socket socket, const MetricsServer::BodyFn* body)
      : stream_(std::move(socket)), body_(body) {
    parser_.header_limit(8 * 1024);
  }

  void Start() {
    stream_.expires_after(kStepDeadline);
    http::async_read(
        stream_, buffer_, parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnRequest(ec); });
  }

  // Ends the scrape now (its pending step completes with an error).
  void Abort() {
    beast::error_code ignored;
    stream_.socket().close(ignored);
  }

 private:
  static constexpr std::chrono::seconds kStepDeadline{2};

  void OnRequest(beast::error_code ec) {
    if (ec) return;  // the peer went away, stalled, or sent no HTTP
    const auto& request = parser_.get();
    response_.version(request.version());
    response_.keep_alive(false);
    if (request.method() == http::verb::get && request.target() == "/metrics") {
      response_.result(http::status::ok);
      response_.set(http::field::content_type, "text/plain; version=0.0.4");
      try {
        response_.body() = (*body_)();
      } catch (const std::exception& e) {
        // A bug in rendering must not take the daemon down with it.
        response_.result(http::status::internal_server_error);
        response_.body() = std::string("metrics unavailable: ") + e.what() + "\n";
      }
    } else {
      response_.result(http::status::not_found);
      response_.set(http::field::content_type, "text/plain");
      response_.body() = "galleyd serves /metrics\n";
    }
    response_.prepare_payload();
    stream_.expires_after(kStepDeadline);
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code, std::size_t) {
                        beast::error_code ignored;
                        self->stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
                      });
  }

  beast::tcp_stream stream_;
  const MetricsServer::BodyFn* body_;
  beast::flat_buffer buffer_;
  http::request_parser<http::empty_body> parser_;
  http::response<http::string_body> response_;
};

}  // namespace

// Everything below runs on the server's one thread (the io_context's), so
// nothing here needs a lock.
struct MetricsServer::Impl {
  // Connections served at once; past it the oldest is closed.
  static constexpr size_t kMaxScrapes = 64;

  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::steady_timer retry{io};
  // Scrapes under way, oldest first (weak: a finished one frees itself).
  std::list<std::weak_ptr<Scrape>> scrapes;
  const BodyFn* body = nullptr;

  void Accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (!acceptor.is_open()) return;
      if (!ec) {
        Serve(std::move(socket));
        Accept();
        return;
      }
      // No descriptor free (or another failure that would repeat at once):
      // the connection waits in the queue; try again shortly, not in a spin.
      if (IsOutOfDescriptors(ec.value())) CountOutOfDescriptors();
      retry.expires_after(std::chrono::milliseconds(100));
      retry.async_wait([this](beast::error_code) { Accept(); });
    });
  }

  void Serve(tcp::socket socket) {
    scrapes.remove_if([](const std::weak_ptr<Scrape>& s) { return s.expired(); });
    // At the bound, the oldest connection makes room: peers that hold
    // connections open cannot lock a scraper out.
    while (scrapes.size() >= kMaxScrapes) {
      if (auto oldest = scrapes.front().lock()) oldest->Abort();
      scrapes.pop_front();
    }
    auto scrape = std::make_shared<Scrape>(std::move(socket), body);
    scrapes.push_back(scrape);
    scrape->Start();
  }
};

MetricsServer::MetricsServer(std::string host, uint16_t port, BodyFn body)
    : host_(std::move(host)), port_(port), body_(std::move(body)), impl_(std::make_unique<Impl>()) {
  impl_->body = &body_;
}

MetricsServer::~MetricsServer() { Stop(); }

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
  impl_->Accept();
  thread_ = std::thread([this] {
    // Thread boundary: nothing may escape into std::terminate.
    while (!stop_.load()) {
      try {
        impl_->io.run();
        break;  // stopped
      } catch (const std::exception& e) {
        spdlog::error("metrics endpoint: {} (still serving)", e.what());
      } catch (...) {
        spdlog::error("metrics endpoint: unknown exception (still serving)");
      }
    }
  });
  spdlog::info("metrics on http://{}:{}/metrics", address.is_v6() ? "[" + host_ + "]" : host_,
               port_);
  return Status::Ok();
}

void MetricsServer::Stop() {
  if (stop_.exchange(true)) return;
  impl_->io.stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace galley
