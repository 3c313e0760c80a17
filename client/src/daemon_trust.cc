#include "daemon_trust.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "galley/errno_text.h"
#include "galley/uid_text.h"

namespace galley {
namespace {

constexpr const char* kServiceUserVariable = "GALLEY_SERVICE_USER";

// The folder holding `path` ("/" for a path directly under the root).
std::string FolderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// A user name or a numeric uid, as the node knows it.
std::optional<uid_t> UidOfUser(const std::string& user) {
  uid_t uid = 0;
  const char* end = user.data() + user.size();
  if (auto [at, error] = std::from_chars(user.data(), end, uid);
      error == std::errc() && at == end) {
    return uid;
  }
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16 * 1024);
  if (::getpwnam_r(user.c_str(), &entry, buffer.data(), buffer.size(), &found) == 0 &&
      found != nullptr) {
    return found->pw_uid;
  }
  return std::nullopt;
}

std::string OctalMode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// The node service's user as a refusal message states it.
std::string DescribeServiceUser(const std::optional<uid_t>& service_uid) {
  if (service_uid) return UidText(*service_uid);
  const char* named = std::getenv(kServiceUserVariable);
  if (named != nullptr && *named != '\0') {
    return std::string("none: ") + kServiceUserVariable + "=" + named + " names no user";
  }
  return "none";
}

}  // namespace

std::optional<uid_t> ServiceUid() {
  if (const char* named = std::getenv(kServiceUserVariable); named != nullptr && *named != '\0') {
    return UidOfUser(named);
  }
  const std::string folder = FolderOf(SystemSocketPath());
  struct stat service_folder {};
  struct stat parent {};
  if (::lstat(folder.c_str(), &service_folder) != 0 || !S_ISDIR(service_folder.st_mode)) {
    return std::nullopt;
  }
  // Where another user could have made the folder, its owner says nothing.
  if (::lstat(FolderOf(folder).c_str(), &parent) != 0 || !S_ISDIR(parent.st_mode) ||
      parent.st_uid != 0 || (parent.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return std::nullopt;
  }
  return service_folder.st_uid;
}

Status CheckUserSocketFolder(const std::string& socket_path) {
  const std::string folder = FolderOf(socket_path);
  struct stat info {};
  if (::lstat(folder.c_str(), &info) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return Status::Ok();
    return Status::PermissionDenied(folder + " cannot be checked (" + ErrnoText(errno) +
                                    "); galley will not use the socket " + socket_path +
                                    ". Set XDG_RUNTIME_DIR or TMPDIR to a folder of your own.");
  }
  if (!S_ISDIR(info.st_mode)) {
    return Status::PermissionDenied(folder +
                                    " is not a directory (a symlink?); galley will not use a "
                                    "daemon's socket there. Remove it, or set XDG_RUNTIME_DIR "
                                    "to a folder of your own.");
  }
  const uid_t me = ::getuid();
  if (info.st_uid != me) {
    return Status::PermissionDenied(
        folder + " belongs to " + UidText(info.st_uid) + ", not to you (uid " + std::to_string(me) +
        "): its owner decides what answers at " + socket_path +
        ", so galley neither talks to a daemon there nor starts yours there. Have it removed "
        "(by its owner or an admin), or set XDG_RUNTIME_DIR or TMPDIR to a folder of your own.");
  }
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return Status::PermissionDenied(folder + " has mode " + OctalMode(info.st_mode) +
                                    ", wider than 0700; another user could put a socket of "
                                    "their own there, so galley will not use it. `chmod 700 " +
                                    folder + "`, or remove it.");
  }
  return Status::Ok();
}

namespace internal {

Result<DaemonProcess> CheckDaemonPeer(const wire::Connection& connection,
                                      const ClientOptions& options) {
  GALLEY_ASSIGN_OR_RETURN(const wire::PeerCredentials peer, connection.Peer());
  const uid_t me = ::getuid();
  if (peer.uid == me || peer.uid == 0 ||
      (options.service_uid.has_value() && peer.uid == *options.service_uid)) {
    return DaemonProcess{peer.pid, peer.uid};
  }
  return Status::PermissionDenied(
      "galleyd at " + options.socket_path + " runs as " + UidText(peer.uid) + " (pid " +
      std::to_string(peer.pid) + "): not as you (uid " + std::to_string(me) +
      "), root or the node service's user (" + DescribeServiceUser(options.service_uid) +
      "), so galley sent it nothing. If another user put it there, use a socket of your own "
      "(socket=, GALLEY_SOCKET, or XDG_RUNTIME_DIR for your own daemon); if it is the node's "
      "service, have " +
      FolderOf(SystemSocketPath()) + " belong to its user or set " + kServiceUserVariable +
      " (docs/autostart.md).");
}

}  // namespace internal
}  // namespace galley
