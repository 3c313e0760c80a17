#include "server/daemon/metrics_server.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstring>
#include <sstream>
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

namespace {

class PromWriter {
 public:
  void Metric(const std::string& name, const std::string& type, const std::string& help) {
    out_ << "# HELP galley_" << name << ' ' << help << "\n# TYPE galley_" << name << ' ' << type
         << '\n';
  }
  void Sample(const std::string& name, const nlohmann::json& value,
              const std::string& labels = "") {
    if (!value.is_number()) return;
    out_ << "galley_" << name;
    if (!labels.empty()) out_ << '{' << labels << '}';
    out_ << ' ' << value.dump() << '\n';
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

// Field `key` of `object`, or null when either is missing: a document of an
// unexpected shape yields fewer samples, never an exception.
const nlohmann::json& Field(const nlohmann::json& object, const char* key) {
  static const nlohmann::json kNull;
  if (!object.is_object()) return kNull;
  auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

std::string Text(const nlohmann::json& object, const char* key) {
  const auto& value = Field(object, key);
  return value.is_string() ? value.get<std::string>() : value.is_number() ? value.dump() : "";
}

std::string Label(const std::string& key, const std::string& value) {
  std::string escaped;
  for (char c : value) {
    if (c == '\\' || c == '"') escaped += '\\';
    if (c == '\n') {
      escaped += "\\n";
      continue;
    }
    escaped += c;
  }
  return key + "=\"" + escaped + "\"";
}

}  // namespace

std::string RenderPrometheus(const nlohmann::json& status, const nlohmann::json& jobs,
                             const nlohmann::json& cache) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  PromWriter w;
  w.Metric("up_seconds", "gauge", "Seconds since galleyd started.");
  w.Sample("up_seconds", Field(status, "uptime_seconds"));
  w.Metric("jobs", "gauge", "Open jobs.");
  w.Sample("jobs", Field(status, "jobs"));
  w.Metric("shm_bytes", "gauge", "Shared memory held by job rings.");
  w.Sample("shm_bytes", Field(status, "shm_bytes"));
  w.Metric("protocol_errors_total", "counter", "Connections closed for breaking the protocol.");
  w.Sample("protocol_errors_total", Field(status, "protocol_errors"));

  const auto pipeline = Field(status, "pipeline");
  const std::pair<const char*, const char*> pipeline_counters[] = {
      {"file_reads", "Files read from storage."},
      {"bytes_read", "Bytes read from storage."},
      {"decodes", "Images decoded."},
      {"augments", "Samples transformed into a job's batch."},
      {"failures", "Samples that failed to read, decode or transform."},
      {"read_seconds", "Time spent reading files."},
      {"decode_seconds", "Time spent decoding."},
      {"augment_seconds", "Time spent transforming."}};
  for (const auto& [key, help] : pipeline_counters) {
    w.Metric(std::string("pipeline_") + key + "_total", "counter", help);
    w.Sample(std::string("pipeline_") + key + "_total", Field(pipeline, key));
  }

  w.Metric("sampler_requests_total", "counter", "Item deliveries to jobs, per dataset and policy.");
  w.Metric("sampler_loads_total", "counter", "Distinct item preparations, per dataset and policy.");
  w.Metric("sampler_loads_per_request", "gauge", "Loads divided by requests (1 = no sharing).");
  for (const auto& group : Field(status, "samplers")) {
    const std::string labels =
        Label("dataset", Text(group, "dataset")) + "," + Label("policy", Text(group, "policy"));
    w.Sample("sampler_requests_total", Field(group, "requests"), labels);
    w.Sample("sampler_loads_total", Field(group, "loads"), labels);
    w.Sample("sampler_loads_per_request", Field(group, "loads_per_request"), labels);
  }

  w.Metric("job_samples_total", "counter", "Samples delivered to the job.");
  w.Metric("job_batches_total", "counter", "Batches delivered to the job.");
  w.Metric("job_skipped_total", "counter", "Samples the job lost to bad files.");
  w.Metric("job_samples_per_second", "gauge", "The job's mean delivery rate since it opened.");
  w.Metric("job_ring_full_seconds_total", "counter",
           "Time the job's ring was full (the consumer was slower than galleyd).");
  w.Metric("job_consumer_wait_seconds_total", "counter",
           "Time the job's consumer waited for a batch (galleyd was slower than the consumer).");
  w.Metric("job_peer_hold_seconds_total", "counter",
           "Time the job was held back so that a slower peer could share a wave.");
  for (const auto& job : Field(jobs, "jobs")) {
    const std::string labels =
        Label("job", Text(job, "job_id")) + "," + Label("name", Text(job, "name"));
    w.Sample("job_samples_total", Field(job, "samples"), labels);
    w.Sample("job_batches_total", Field(job, "batches"), labels);
    w.Sample("job_skipped_total", Field(job, "skipped"), labels);
    w.Sample("job_samples_per_second", Field(job, "samples_per_second"), labels);
    w.Sample("job_ring_full_seconds_total", Field(job, "ring_full_seconds"), labels);
    w.Sample("job_consumer_wait_seconds_total", Field(job, "consumer_wait_seconds"), labels);
    w.Sample("job_peer_hold_seconds_total", Field(job, "peer_hold_seconds"), labels);
  }

  w.Metric("cache_hits_total", "counter", "Cache hits per tier.");
  w.Metric("cache_misses_total", "counter", "Cache misses per tier.");
  w.Metric("cache_bytes", "gauge", "Bytes held per tier.");
  w.Metric("cache_budget_bytes", "gauge", "Budget per tier.");
  const nlohmann::json& tiers = Field(cache, "tiers");
  for (const auto& [tier, stats] : tiers.is_object() ? tiers.items() : kEmpty.items()) {
    const std::string labels = Label("tier", tier);
    w.Sample("cache_hits_total", Field(stats, "hits"), labels);
    w.Sample("cache_misses_total", Field(stats, "misses"), labels);
    w.Sample("cache_bytes", Field(stats, "bytes"), labels);
    w.Sample("cache_budget_bytes", Field(stats, "budget_bytes"), labels);
  }
  return w.str();
}

}  // namespace galley
