#include "tests/integration/galleyd_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <thread>

#include "wire/connection.h"

#ifndef GALLEYD_PATH
#error "GALLEYD_PATH must name the galleyd binary"
#endif

namespace galley::testing {

uint16_t FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

int ConnectLoopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval hang_guard{60, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &hang_guard, sizeof(hang_guard));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

uint64_t ProcStatusKilobytes(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1));
  }
  return 0;
}

std::string HttpGet(uint16_t port, const std::string& path) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return "";
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
  (void)!::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, n);
  ::close(fd);
  return response;
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "galley-test.XXXXXX").string();
  path_ = ::mkdtemp(pattern.data());
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<std::filesystem::path> WriteJpegFolder(const std::filesystem::path& root, int classes,
                                                   int per_class, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> side(40, 120);
  std::vector<std::filesystem::path> paths;
  for (int c = 0; c < classes; ++c) {
    const auto dir = root / ("class" + std::to_string(c));
    std::filesystem::create_directories(dir);
    for (int i = 0; i < per_class; ++i) {
      cv::Mat image(side(rng), side(rng), CV_8UC3);
      cv::randu(image, cv::Scalar::all(0), cv::Scalar::all(255));
      cv::GaussianBlur(image, image, cv::Size(5, 5), 0);
      char name[32];
      std::snprintf(name, sizeof(name), "%03d.jpg", i);
      cv::imwrite((dir / name).string(), image);
      paths.push_back(dir / name);
    }
  }
  return paths;
}

namespace {

// In the child after fork: stdout/stderr to files where given, the ids
// where given (uid 0: the test's own), then exec.
[[noreturn]] void ExecGalleyd(std::vector<std::string> args, const std::vector<std::string>& env,
                              const std::string& out_path, const std::string& err_path,
                              uid_t uid = 0, gid_t gid = 0) {
  if (uid != 0 && (::setgroups(0, nullptr) != 0 || ::setresgid(gid, gid, gid) != 0 ||
                   ::setresuid(uid, uid, uid) != 0)) {
    ::_exit(126);
  }
  for (const std::string& variable : env) ::putenv(const_cast<char*>(variable.c_str()));
  for (const auto& [path, fd] : {std::pair{out_path, STDOUT_FILENO}, {err_path, STDERR_FILENO}}) {
    if (path.empty()) continue;
    const int file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (file >= 0) ::dup2(file, fd);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

std::string ReadWhole(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

int RunGalleydToExit(std::vector<std::string> args) {
  return RunGalleydForOutput(std::move(args)).code;
}

GalleydOutput RunGalleydForOutput(std::vector<std::string> args) {
  args.insert(args.begin(), GALLEYD_PATH);
  TempDir scratch;
  const auto out_path = scratch.path() / "stdout", err_path = scratch.path() / "stderr";
  const pid_t pid = ::fork();
  if (pid == 0) ExecGalleyd(args, {}, out_path.string(), err_path.string());
  GalleydOutput output;
  const auto finish = [&](int code) {
    output.code = code;
    output.out = ReadWhole(out_path);
    output.err = ReadWhole(err_path);
    return output;
  };
  int status = 0;
  // Two minutes bound a hang, not the time a start takes: a daemon that
  // measures the node and commits its cache before it finds the socket taken
  // needs seconds on a busy machine.
  for (int i = 0; i < 2400; ++i) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return finish(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return finish(-1);
}

GalleydProcess::GalleydProcess(const std::filesystem::path& socket,
                               std::vector<std::string> extra_args)
    : GalleydProcess(socket, std::move(extra_args), Launch{}) {}

const std::vector<std::pair<std::string, std::string>> GalleydProcess::kQuickStartArgs = {
    {"--decode-per-core-per-s", "400"},
    {"--augment-per-core-per-s", "4000"},
    {"--memory-bytes-per-s", "5e9"},
    {"--cache-prefault", "false"},
};

std::vector<std::string> TestDaemonFlags(const std::filesystem::path& socket,
                                         const std::vector<std::string>& extra_args, bool quiet,
                                         bool probe_and_prefault) {
  std::vector<std::string> flags = {"--socket", socket.string()};
  if (quiet) flags.insert(flags.end(), {"--log-level", "warn"});
  const auto given = [&](const std::string& flag) {
    return std::find(extra_args.begin(), extra_args.end(), flag) != extra_args.end();
  };
  std::vector<std::pair<std::string, std::string>> defaults = {
      {"--tar-index-dir", (socket.parent_path() / "tar-index").string()}};
  if (!probe_and_prefault) {
    defaults.insert(defaults.end(), GalleydProcess::kQuickStartArgs.begin(),
                    GalleydProcess::kQuickStartArgs.end());
  }
  for (const auto& [flag, value] : defaults) {
    if (!given(flag)) flags.insert(flags.end(), {flag, value});
  }
  flags.insert(flags.end(), extra_args.begin(), extra_args.end());
  return flags;
}

GalleydProcess::GalleydProcess(const std::filesystem::path& socket,
                               std::vector<std::string> extra_args, const Launch& launch)
    : socket_(socket.string()) {
  std::vector<std::string> args = {GALLEYD_PATH};
  for (std::string& flag :
       TestDaemonFlags(socket, extra_args, launch.quiet, launch.probe_and_prefault)) {
    args.push_back(std::move(flag));
  }
  pid_ = ::fork();
  if (pid_ == 0) ExecGalleyd(args, launch.env, "", launch.log.string(), launch.uid, launch.gid);
  // The deadline only bounds a hang: a start under a sanitizer on a loaded
  // machine takes seconds, and the loop ends as soon as galleyd accepts.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto probe = wire::Connection::ConnectUnix(socket_); probe.ok()) {
      started_ = true;
      // The probe is over when galleyd has closed it: a test that counts
      // galleyd's descriptors or connections starts from a settled count.
      ::shutdown(probe->get(), SHUT_WR);
      char reply[256];
      pollfd readable{probe->get(), POLLIN, 0};
      while (::poll(&readable, 1, 60'000) == 1 &&
             ::recv(probe->get(), reply, sizeof(reply), 0) > 0) {
      }
      return;
    }
    int status;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int GalleydProcess::Stop(int signal) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, signal);
  int status = 0;
  for (int i = 0; i < 200; ++i) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return -SIGKILL;
}

GalleydProcess::~GalleydProcess() { Stop(SIGTERM); }

}  // namespace galley::testing
