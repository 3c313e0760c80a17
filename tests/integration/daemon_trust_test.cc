// Which daemon a client talks to: a process of another user listening where
// the client connects is refused before the client sends a byte, on the very
// connection it would have used; a real galleyd run by a service user is
// served only where that user is the configured service user; the folder of
// the user's own socket must be theirs and closed, or the client does not
// connect at all.
//
// The other user is uid 65534 (nobody), so this needs root; CI runs as root.
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "galley/client.h"
#include "galley/unique_fd.h"
#include "tests/integration/galleyd_process.h"

namespace galley {
namespace {

namespace fs = std::filesystem;
using testing::GalleydProcess;
using testing::TempDir;

constexpr uid_t kOther = 65534;  // nobody
constexpr gid_t kOtherGroup = 65534;
// What ends a Squatter's watch: a connection that brings this one byte (a
// frame starts with 'G', so no client's first byte is this).
constexpr char kFinish = 'Z';

// A process of another user listening at a socket path, standing for a
// daemon someone else put where a client connects. It answers nothing and
// records how many bytes each connection brought (up to a frame header,
// then it hangs up), until Finish.
class Squatter {
 public:
  // `make_folder`: the squatter creates the socket's folder itself, mode
  // 0755, as another user can in a shared /tmp.
  Squatter(const fs::path& socket, bool make_folder) : socket_(socket) {
    int ready[2], report[2];
    if (::pipe(ready) != 0 || ::pipe(report) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      ::close(report[0]);
      Serve(make_folder, ready[1], report[1]);
    }
    ::close(ready[1]);
    ::close(report[1]);
    ready_ = UniqueFd(ready[0]);
    report_ = UniqueFd(report[0]);
    char byte = 0;
    listening_ = ::read(ready_.get(), &byte, 1) == 1;
  }

  ~Squatter() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  bool listening() const { return listening_; }

  // Bytes each connection brought before this call, in order. Connections
  // are accepted in the order they were made, so this one comes last.
  std::vector<size_t> Finish() {
    std::vector<size_t> received;
    {
      UniqueFd finish(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
      sockaddr_un addr = Address(socket_);
      if (::connect(finish.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
          ::send(finish.get(), &kFinish, 1, MSG_NOSIGNAL) != 1) {
        return {999999};
      }
    }
    size_t count = 0;
    while (::read(report_.get(), &count, sizeof(count)) == sizeof(count)) received.push_back(count);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return received;
  }

 private:
  static sockaddr_un Address(const fs::path& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    return addr;
  }

  // In the child: become the other user, listen, record, report.
  [[noreturn]] void Serve(bool make_folder, int ready, int report) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(kOtherGroup, kOtherGroup, kOtherGroup) != 0 ||
        ::setresuid(kOther, kOther, kOther) != 0) {
      ::_exit(1);
    }
    if (make_folder && ::mkdir(socket_.parent_path().c_str(), 0755) != 0) ::_exit(2);
    const int listener = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr = Address(socket_);
    if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::chmod(socket_.c_str(), 0666) != 0 || ::listen(listener, 16) != 0) {
      ::_exit(3);
    }
    (void)!::write(ready, "r", 1);
    for (;;) {
      const int connection = ::accept(listener, nullptr, nullptr);
      if (connection < 0) ::_exit(4);
      char bytes[16];
      size_t got = 0;
      while (got < sizeof(bytes)) {
        // Bounds a hang only: every client here sends or hangs up at once.
        pollfd readable{connection, POLLIN, 0};
        if (::poll(&readable, 1, 30000) != 1) break;
        const ssize_t n = ::read(connection, bytes + got, sizeof(bytes) - got);
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
      ::close(connection);
      if (got == 1 && bytes[0] == kFinish) ::_exit(0);
      (void)!::write(report, &got, sizeof(got));
    }
  }

  fs::path socket_;
  pid_t pid_ = -1;
  UniqueFd ready_, report_;
  bool listening_ = false;
};

// A scratch folder another user may create entries in.
fs::path OpenTo(const TempDir& dir) {
  ::chmod(dir.path().c_str(), 0777);
  return dir.path();
}

TEST(DaemonTrustTest, AListenerOfAnotherUserIsRefusedBeforeTheClientSendsAByte) {
  ASSERT_EQ(::getuid(), 0u) << "needs root to act as a second user";
  TempDir dir;
  const fs::path socket = OpenTo(dir) / "galleyd.sock";
  Squatter squatter(socket, /*make_folder=*/false);
  ASSERT_TRUE(squatter.listening());

  ClientOptions options;
  options.socket_path = socket.string();
  options.service_uid = std::nullopt;
  auto refused = Client::Connect(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  const std::string message = refused.status().message();
  EXPECT_NE(message.find("galleyd at " + socket.string() + " runs as uid 65534"), std::string::npos)
      << message;
  EXPECT_NE(message.find("sent it nothing"), std::string::npos) << message;
  EXPECT_NE(message.find("GALLEY_SERVICE_USER"), std::string::npos) << message;

  // The same listener named as the service's user is talked to: the check,
  // not a failure to connect, is what kept the first client silent.
  options.service_uid = kOther;
  options.request_timeout = std::chrono::seconds(30);
  auto trusted = Client::Connect(options);
  EXPECT_EQ(trusted.status().code(), StatusCode::kUnavailable) << trusted.status().ToString();

  EXPECT_EQ(squatter.Finish(), (std::vector<size_t>{0, 16}));
}

TEST(DaemonTrustTest, ASquattedFolderOfTheUsersOwnSocketIsRefusedWithoutConnecting) {
  ASSERT_EQ(::getuid(), 0u) << "needs root to act as a second user";
  TempDir dir;
  const fs::path runtime = OpenTo(dir);
  const char* saved = std::getenv("XDG_RUNTIME_DIR");
  const std::optional<std::string> previous =
      saved != nullptr ? std::optional<std::string>(saved) : std::nullopt;
  ::setenv("XDG_RUNTIME_DIR", runtime.c_str(), 1);
  const std::string socket = UserSocketPath();
  ASSERT_EQ(socket, (runtime / "galley" / "galleyd.sock").string());
  Squatter squatter(socket, /*make_folder=*/true);
  ASSERT_TRUE(squatter.listening());

  ClientOptions options;
  options.socket_path = socket;
  auto refused = Client::Connect(options);
  if (previous) {
    ::setenv("XDG_RUNTIME_DIR", previous->c_str(), 1);
  } else {
    ::unsetenv("XDG_RUNTIME_DIR");
  }
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  const std::string message = refused.status().message();
  EXPECT_NE(message.find((runtime / "galley").string() + " belongs to uid 65534"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("XDG_RUNTIME_DIR"), std::string::npos) << message;
  EXPECT_TRUE(squatter.Finish().empty());  // not even a connection
}

TEST(DaemonTrustTest, TheUsersSocketFolderMustBeADirectoryOfTheirsAndClosed) {
  ASSERT_EQ(::getuid(), 0u) << "needs root to give a folder to a second user";
  TempDir dir;
  const fs::path folder = dir.path() / "galley";
  const std::string socket = (folder / "galleyd.sock").string();
  EXPECT_TRUE(CheckUserSocketFolder(socket).ok());  // nothing there yet

  ASSERT_EQ(::mkdir(folder.c_str(), 0700), 0);
  EXPECT_TRUE(CheckUserSocketFolder(socket).ok());

  ASSERT_EQ(::chmod(folder.c_str(), 0750), 0);
  Status open = CheckUserSocketFolder(socket);
  EXPECT_EQ(open.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(open.message().find("mode 0750, wider than 0700"), std::string::npos) << open.message();

  ASSERT_EQ(::chmod(folder.c_str(), 0700), 0);
  ASSERT_EQ(::chown(folder.c_str(), kOther, kOtherGroup), 0);
  Status theirs = CheckUserSocketFolder(socket);
  EXPECT_EQ(theirs.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(theirs.message().find("belongs to uid 65534 (nobody), not to you (uid 0)"),
            std::string::npos)
      << theirs.message();

  const fs::path elsewhere = dir.path() / "elsewhere";
  ASSERT_EQ(::mkdir(elsewhere.c_str(), 0700), 0);
  const fs::path link = dir.path() / "link";
  fs::create_directory_symlink(elsewhere, link);
  Status linked = CheckUserSocketFolder((link / "galleyd.sock").string());
  EXPECT_EQ(linked.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(linked.message().find("is not a directory (a symlink?)"), std::string::npos)
      << linked.message();
}

TEST(DaemonTrustTest, AGalleydOfAServiceUserIsServedOnlyWhereThatUserIsTheServices) {
  ASSERT_EQ(::getuid(), 0u) << "needs root to run galleyd as a second user";
  TempDir dir;
  const fs::path socket = OpenTo(dir) / "galleyd.sock";
  GalleydProcess::Launch launch;
  launch.uid = kOther;
  launch.gid = kOtherGroup;
  GalleydProcess daemon(
      socket,
      {"--cache-bytes", "0", "--socket-mode", "0666", "--allowed-root", dir.path().string()},
      launch);
  ASSERT_TRUE(daemon.started());

  ClientOptions options;
  options.socket_path = socket.string();
  options.service_uid = std::nullopt;
  auto refused = Client::Connect(options);
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("runs as uid 65534 (nobody) (pid " +
                                            std::to_string(daemon.pid()) + ")"),
            std::string::npos)
      << refused.status().message();

  options.service_uid = kOther;
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ(client->daemon().uid, kOther);
  EXPECT_EQ(client->daemon().pid, daemon.pid());
  auto status = client->Query("status");
  ASSERT_TRUE(status.ok()) << status.status().ToString();
}

TEST(DaemonTrustTest, TheServiceUserComesFromTheEnvironmentByNameOrUid) {
  const char* saved = std::getenv("GALLEY_SERVICE_USER");
  const std::optional<std::string> previous =
      saved != nullptr ? std::optional<std::string>(saved) : std::nullopt;
  ::setenv("GALLEY_SERVICE_USER", "nobody", 1);
  EXPECT_EQ(ServiceUid(), std::optional<uid_t>(65534));
  ::setenv("GALLEY_SERVICE_USER", "4321", 1);
  EXPECT_EQ(ServiceUid(), std::optional<uid_t>(4321));
  ::setenv("GALLEY_SERVICE_USER", "no-such-user-on-this-node", 1);
  EXPECT_EQ(ServiceUid(), std::nullopt);
  if (previous) {
    ::setenv("GALLEY_SERVICE_USER", previous->c_str(), 1);
  } else {
    ::unsetenv("GALLEY_SERVICE_USER");
  }
}

}  // namespace
}  // namespace galley
