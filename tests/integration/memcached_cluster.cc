#include "tests/integration/memcached_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

namespace galley::testing {
namespace {

// A loopback port nothing listens on now.
uint16_t FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

bool Answers(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

MemcachedCluster::MemcachedCluster(const std::filesystem::path& dir, int servers,
                                   const std::string& user, const std::string& password,
                                   int memory_mb)
    : dir_(dir), memory_mb_(memory_mb) {
  std::filesystem::create_directories(dir_);
  const auto sasldb = dir_ / "sasldb2";
  {
    // What Cyrus SASL reads for the application "memcached".
    std::ofstream conf(dir_ / "memcached.conf");
    conf << "mech_list: plain\nsasldb_path: " << sasldb.string() << "\n";
  }
  const std::string command = "printf %s '" + password + "' | saslpasswd2 -a memcached -c -p -f '" +
                              sasldb.string() + "' '" + user + "'";
  if (std::system(command.c_str()) != 0) {
    error_ = "saslpasswd2 failed (is sasl2-bin installed? scripts/setup.sh installs it)";
    return;
  }
  for (int i = 0; i < servers; ++i) {
    ports_.push_back(FreePort());
    pids_.push_back(-1);
    if (!Start(i)) {
      error_ = "memcached on port " + std::to_string(ports_[i]) +
               " did not start (is memcached installed? scripts/setup.sh installs it)";
      return;
    }
  }
  started_ = true;
}

MemcachedCluster::~MemcachedCluster() {
  for (pid_t pid : pids_) {
    if (pid <= 0) continue;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
}

bool MemcachedCluster::Start(int i) {
  const std::string port = std::to_string(ports_[i]);
  const std::string memory = std::to_string(memory_mb_);
  const std::string conf = "SASL_CONF_PATH=" + dir_.string();
  std::string user;
  if (::geteuid() == 0) {
    // memcached refuses to run as root unless told which user to be.
    if (const passwd* entry = ::getpwuid(0); entry != nullptr) user = entry->pw_name;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::putenv(const_cast<char*>(conf.c_str()));
    std::vector<const char*> argv = {"memcached",  "-S", "-l", "127.0.0.1", "-p",
                                     port.c_str(), "-U", "0",  "-m",        memory.c_str()};
    if (!user.empty()) {
      argv.push_back("-u");
      argv.push_back(user.c_str());
    }
    argv.push_back(nullptr);
    const int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDOUT_FILENO);
    ::execvp("memcached", const_cast<char* const*>(argv.data()));
    ::_exit(127);
  }
  pids_[i] = pid;
  for (int attempt = 0; attempt < 200; ++attempt) {
    if (Answers(ports_[i])) return true;
    if (::waitpid(pid, nullptr, WNOHANG) == pid) {
      pids_[i] = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::string MemcachedCluster::address(int i) const {
  return "127.0.0.1:" + std::to_string(ports_[i]);
}

std::vector<std::string> MemcachedCluster::addresses() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < ports_.size(); ++i) out.push_back(address(static_cast<int>(i)));
  return out;
}

void MemcachedCluster::Kill(int i) {
  if (pids_[i] <= 0) return;
  ::kill(pids_[i], SIGKILL);
  ::waitpid(pids_[i], nullptr, 0);
  pids_[i] = -1;
}

void MemcachedCluster::Freeze(int i) {
  if (pids_[i] > 0) ::kill(pids_[i], SIGSTOP);
}

void MemcachedCluster::Thaw(int i) {
  if (pids_[i] > 0) ::kill(pids_[i], SIGCONT);
}

bool MemcachedCluster::Restart(int i) {
  Kill(i);
  return Start(i);
}

void WriteCredentialsFile(const std::filesystem::path& path, const std::string& user,
                          const std::string& password, const std::string& mac_key) {
  {
    std::ofstream out(path);
    out << "username = \"" << user << "\"\npassword = \"" << password << "\"\n";
    if (!mac_key.empty()) out << "mac_key = \"" << mac_key << "\"\n";
  }
  ::chmod(path.c_str(), 0600);
}

}  // namespace galley::testing
