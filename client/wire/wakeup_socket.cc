#include "wire/wakeup_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <string>

#include "galley/errno_text.h"

namespace galley::wire {
namespace {

// The most wake-ups one Drain() takes: a daemon's queue holds a handful,
// so this only bounds the loop against a peer that sends without pause
// (what is left makes the next poll return at once).
constexpr int kMaxDrainedPerCall = 64;

Status Refuse(const std::string& why) {
  return Status::ProtocolError(
      "galleyd's JobOpened carried a wake-up descriptor that is not a wake-up socket (" + why +
      "); the client and daemon must be of the same protocol version");
}

}  // namespace

Result<std::pair<WakeupSender, UniqueFd>> WakeupSender::Create() {
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) != 0) {
    return Status::ResourceExhausted("cannot create a job's wake-up socket pair: " +
                                     ErrnoText(errno));
  }
  UniqueFd daemon_end(ends[0]), client_end(ends[1]);
  // Write-only for galleyd: what the client sends is refused (EPIPE on its
  // side) instead of queueing bytes or descriptors at galleyd's end.
  if (::shutdown(daemon_end.get(), SHUT_RD) != 0) {
    return Status::Internal("shutdown of a wake-up socket: " + ErrnoText(errno));
  }
  // The kernel raises this to its minimum (a few messages): enough, since
  // one unread wake-up already makes the client rescan every slot.
  const int smallest = 1;
  (void)::setsockopt(daemon_end.get(), SOL_SOCKET, SO_SNDBUF, &smallest, sizeof(smallest));
  return std::pair<WakeupSender, UniqueFd>(WakeupSender(std::move(daemon_end)),
                                           std::move(client_end));
}

void WakeupSender::Send() const {
  const char wake = 1;
  // EAGAIN: the client has unread wake-ups; EPIPE/ECONNRESET: it closed
  // its end. Either way there is nobody this wake-up would help.
  (void)::send(end_.get(), &wake, sizeof(wake), MSG_DONTWAIT | MSG_NOSIGNAL);
}

Result<WakeupReceiver> WakeupReceiver::Adopt(UniqueFd fd) {
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0) return Refuse("fstat failed");
  if (!S_ISSOCK(st.st_mode)) return Refuse("not a socket");
  int value = 0;
  socklen_t length = sizeof(value);
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_DOMAIN, &value, &length) != 0 || value != AF_UNIX) {
    return Refuse("not a Unix domain socket");
  }
  length = sizeof(value);
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_TYPE, &value, &length) != 0 ||
      value != SOCK_SEQPACKET) {
    return Refuse("not a SOCK_SEQPACKET socket");
  }
  return WakeupReceiver(std::move(fd));
}

bool WakeupReceiver::Drain() const {
  char buffer[16];
  for (int i = 0; i < kMaxDrainedPerCall; ++i) {
    const ssize_t n = ::recv(end_.get(), buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n > 0) continue;
    if (n == 0) return false;  // galleyd closed its end
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
  return true;
}

}  // namespace galley::wire
