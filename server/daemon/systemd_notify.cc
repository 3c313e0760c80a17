#include "galley/daemon/systemd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "galley/errno_text.h"
#include "galley/unique_fd.h"

namespace galley {

Status NotifyServiceManager(const std::string& state) {
  const char* target = std::getenv("NOTIFY_SOCKET");
  if (target == nullptr || target[0] == '\0') return Status::Ok();
  const std::string path(target);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // '@' stands for the leading NUL of a Linux abstract socket name.
  if ((path[0] != '/' && path[0] != '@') || path.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument("NOTIFY_SOCKET '" + path +
                                   "' is not an absolute path or an @abstract name");
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (path[0] == '@') addr.sun_path[0] = '\0';
  const socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() +
                                                  (path[0] == '@' ? 0 : 1));
  UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Status::Internal(std::string("socket: ") + ErrnoText(errno));
  const ssize_t sent = ::sendto(fd.get(), state.data(), state.size(), MSG_NOSIGNAL,
                                reinterpret_cast<const sockaddr*>(&addr), length);
  if (sent != static_cast<ssize_t>(state.size())) {
    return Status::Unavailable("notify " + path + ": " + ErrnoText(errno));
  }
  return Status::Ok();
}

std::string ReadyMessage(const std::string& status) { return "READY=1\nSTATUS=" + status; }

std::string ReloadingMessage() {
  // systemd matches a reload to its READY=1 by this timestamp (sd_notify(3),
  // RELOADING=1).
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const unsigned long long usec = static_cast<unsigned long long>(now.tv_sec) * 1000000ULL +
                                  static_cast<unsigned long long>(now.tv_nsec) / 1000ULL;
  return "RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec);
}

std::string StoppingMessage() { return "STOPPING=1"; }

}  // namespace galley
