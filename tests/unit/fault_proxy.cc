#include "tests/unit/fault_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "tests/unit/rclone_s3_server.h"

namespace galley::testing {

namespace {

bool SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(sent));
  }
  return true;
}

// Reads from `fd` into `buffer` until it holds "\r\n\r\n"; the head (with
// its blank line) is cut from the front of `buffer`. "" on EOF or error.
std::string ReadHead(int fd, std::string* buffer) {
  while (true) {
    const size_t end = buffer->find("\r\n\r\n");
    if (end != std::string::npos) {
      std::string head = buffer->substr(0, end + 4);
      buffer->erase(0, end + 4);
      return head;
    }
    char chunk[4096];
    const ssize_t got = ::recv(fd, chunk, sizeof(chunk), 0);
    if (got <= 0) return "";
    buffer->append(chunk, static_cast<size_t>(got));
  }
}

size_t ContentLength(const std::string& head) {
  std::string lower = head;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t at = lower.find("\r\ncontent-length:");
  if (at == std::string::npos) return 0;
  return std::strtoull(lower.c_str() + at + 17, nullptr, 10);
}

// The upstream's whole reply to `head`, or "" when it could not be had.
std::string Exchange(uint16_t upstream_port, const std::string& head) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(upstream_port);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return "";
  if (!SendAll(fd.get(), head)) return "";
  std::string buffer;
  std::string reply = ReadHead(fd.get(), &buffer);
  if (reply.empty()) return "";
  const size_t body = head.compare(0, 5, "HEAD ") == 0 ? 0 : ContentLength(reply);
  while (buffer.size() < body) {
    char chunk[65536];
    const ssize_t got = ::recv(fd.get(), chunk, sizeof(chunk), 0);
    if (got <= 0) return "";
    buffer.append(chunk, static_cast<size_t>(got));
  }
  return reply + buffer.substr(0, body);
}

}  // namespace

RefusingPort::RefusingPort() { fd_ = BindLoopback(&port_); }

std::string FaultProxy::HttpReply(int status, std::string_view reason,
                                  const std::vector<std::string>& headers, std::string_view body) {
  std::string reply = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) + "\r\n";
  for (const std::string& header : headers) reply += header + "\r\n";
  reply += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  reply += body;
  return reply;
}

FaultProxy::FaultProxy(uint16_t upstream_port) : upstream_port_(upstream_port) {
  listener_ = BindLoopback(&port_);
  EXPECT_TRUE(listener_.valid() && ::listen(listener_.get(), 1024) == 0);
  int pipe_fds[2];
  EXPECT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  wake_read_.Reset(pipe_fds[0]);
  wake_write_.Reset(pipe_fds[1]);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FaultProxy::~FaultProxy() {
  std::vector<std::thread> connections;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    for (int client : clients_) ::shutdown(client, SHUT_RDWR);
  }
  const char byte = 0;
  (void)!::write(wake_write_.get(), &byte, 1);
  acceptor_.join();
  {
    MutexLock lock(&mu_);
    connections.swap(connections_);
  }
  for (std::thread& connection : connections) connection.join();
}

void FaultProxy::Push(Fault fault) {
  MutexLock lock(&mu_);
  faults_.push_back(std::move(fault));
}

void FaultProxy::SetFallback(Fault fault) {
  MutexLock lock(&mu_);
  fallback_ = std::move(fault);
}

std::vector<std::string> FaultProxy::RequestHeads() const {
  MutexLock lock(&mu_);
  return heads_;
}

FaultProxy::Fault FaultProxy::NextFault() {
  MutexLock lock(&mu_);
  if (faults_.empty()) return fallback_;
  Fault fault = std::move(faults_.front());
  faults_.pop_front();
  return fault;
}

void FaultProxy::AcceptLoop() {
  while (true) {
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents != 0) return;
    const int client = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    MutexLock lock(&mu_);
    if (stopping_) {
      ::close(client);
      return;
    }
    clients_.push_back(client);
    connections_.emplace_back([this, client] { Serve(client); });
  }
}

void FaultProxy::Serve(int client) {
  std::string buffer;
  while (true) {
    const std::string head = ReadHead(client, &buffer);
    if (head.empty()) break;
    {
      MutexLock lock(&mu_);
      heads_.push_back(head);
    }
    const Fault fault = NextFault();
    if (fault.kind == Fault::Kind::kReply) {
      if (!SendAll(client, fault.reply)) break;
      continue;
    }
    if (fault.kind == Fault::Kind::kReplyThenClose) {
      SendAll(client, fault.reply);
      break;
    }
    if (fault.kind == Fault::Kind::kStall) {
      // Until the client gives up (or the proxy stops).
      char sink[4096];
      while (::recv(client, sink, sizeof(sink), 0) > 0) {
      }
      break;
    }
    const std::string reply = Exchange(upstream_port_, head);
    if (reply.empty()) break;
    if (fault.kind == Fault::Kind::kForwardThenReset) {
      SendAll(client, std::string_view(reply).substr(0, fault.reset_after));
      // A zero linger turns close into a reset (RST), as a crashed or
      // restarted server's would be.
      linger reset{1, 0};
      ::setsockopt(client, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
      break;
    }
    if (!SendAll(client, reply)) break;
  }
  MutexLock lock(&mu_);
  std::erase(clients_, client);
  ::close(client);
}

}  // namespace galley::testing
