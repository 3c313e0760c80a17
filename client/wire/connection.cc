#include "wire/connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "galley/errno_text.h"

namespace galley::wire {
namespace {

std::string Errno(const char* what) { return std::string(what) + ": " + ErrnoText(errno); }

int RemainingMs(std::optional<Deadline> deadline) {
  if (!deadline) return -1;
  if (*deadline == Deadline::max()) return -1;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      *deadline - std::chrono::steady_clock::now());
  if (left.count() > std::numeric_limits<int>::max()) return std::numeric_limits<int>::max();
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

}  // namespace

Result<UniqueFd> Connection::ConnectUnix(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument("socket path too long: " + path);
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Status::Internal(Errno("socket"));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Status::Unavailable("cannot reach galleyd at " + path + " (" + ErrnoText(errno) +
                               "); is the daemon running?");
  }
  return fd;
}

bool Connection::TrySendFrame(MessageType type, uint32_t request_id, std::string_view payload) {
  if (payload.size() > MaxPayloadBytes(type)) return false;
  FrameHeader header;
  header.type = type;
  header.payload_length = static_cast<uint32_t>(payload.size());
  header.request_id = request_id;
  const auto head = EncodeFrameHeader(header);
  std::string whole(reinterpret_cast<const char*>(head.data()), head.size());
  whole.append(payload);
  if (!send_mu_.TryLock()) return false;
  const ssize_t n = ::send(socket_.get(), whole.data(), whole.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  send_mu_.Unlock();
  return n == static_cast<ssize_t>(whole.size());
}

Status Connection::SendFrame(MessageType type, uint32_t request_id, std::string_view payload,
                             int fd_to_pass, int second_fd) {
  if (payload.size() > MaxPayloadBytes(type)) {
    return Status::InvalidArgument("message too large to send: a " +
                                   std::string(MessageTypeName(type)) + " of " +
                                   std::to_string(payload.size()) + " bytes, the limit is " +
                                   std::to_string(MaxPayloadBytes(type)));
  }
  FrameHeader header;
  header.type = type;
  header.payload_length = static_cast<uint32_t>(payload.size());
  header.request_id = request_id;
  const auto head = EncodeFrameHeader(header);

  MutexLock lock(&send_mu_);
  iovec iov[2] = {{const_cast<std::byte*>(head.data()), head.size()},
                  {const_cast<char*>(payload.data()), payload.size()}};
  size_t total = head.size() + payload.size();
  size_t sent = 0;
  const int fds[2] = {fd_to_pass, second_fd};
  const int fd_count = fd_to_pass < 0 ? 0 : second_fd < 0 ? 1 : 2;
  bool fd_sent = fd_count == 0;
  while (sent < total) {
    msghdr msg{};
    iovec parts[2];
    int count = 0;
    // Rebuild the iovec past what has been sent.
    size_t skip = sent;
    for (auto& part : iov) {
      if (skip >= part.iov_len) {
        skip -= part.iov_len;
        continue;
      }
      parts[count].iov_base = static_cast<char*>(part.iov_base) + skip;
      parts[count].iov_len = part.iov_len - skip;
      skip = 0;
      ++count;
    }
    msg.msg_iov = parts;
    msg.msg_iovlen = count;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 2)] = {};
    if (!fd_sent) {
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fd_count);
      cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fd_count);
      std::memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * fd_count);
    }
    const ssize_t n = ::sendmsg(socket_.get(), &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EPIPE || errno == ECONNRESET) {
        return Status::Unavailable("peer closed the connection");
      }
      return Status::Internal(Errno("sendmsg"));
    }
    fd_sent = true;
    sent += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status Connection::ReadExact(void* out, size_t size, std::optional<Deadline> start_deadline,
                             Deadline finish_deadline, bool frame_start, Frame* frame) {
  auto* dst = static_cast<char*>(out);
  size_t got = 0;
  const bool first = frame_start;
  while (got < size) {
    // Only the start of a frame waits for the caller's deadline; once a
    // frame has begun, all of it must arrive by `finish_deadline`.
    const int wait_ms =
        first && got == 0 ? RemainingMs(start_deadline) : RemainingMs(finish_deadline);
    pollfd pfd{socket_.get(), POLLIN, 0};
    const int ready = ::poll(&pfd, 1, wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return Status::Internal(Errno("poll"));
    }
    if (ready == 0) {
      return first && got == 0 ? Status::DeadlineExceeded("no message before the deadline")
                               : Status::ProtocolError("peer stalled in the middle of a frame");
    }
    iovec iov{dst + got, size - got};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = ::recvmsg(socket_.get(), &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == ECONNRESET) return Status::Unavailable("peer reset the connection");
      return Status::Internal(Errno("recvmsg"));
    }
    for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg != nullptr; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
      if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
        UniqueFd owned(fd);  // closed here unless the frame keeps it
        if (!frame->passed_fd.valid()) {
          frame->passed_fd = std::move(owned);
        } else if (!frame->second_fd.valid()) {
          frame->second_fd = std::move(owned);
        }
      }
    }
    if (n == 0) {
      return got == 0 && first ? Status::Unavailable("peer closed the connection")
                               : Status::ProtocolError("peer closed the connection mid-frame");
    }
    got += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Result<Frame> Connection::ReadFrame(std::optional<Deadline> deadline) {
  Frame frame;
  std::array<std::byte, kFrameHeaderBytes> head{};
  // The finish deadline is set when the first byte has arrived (ReadExact
  // waits for it first); measuring from here is at most one poll early.
  GALLEY_RETURN_IF_ERROR(ReadExact(head.data(), 1, deadline, Deadline::max(), true, &frame));
  const Deadline finish = std::chrono::steady_clock::now() + kFrameCompletionTimeout;
  GALLEY_RETURN_IF_ERROR(
      ReadExact(head.data() + 1, head.size() - 1, std::nullopt, finish, false, &frame));
  GALLEY_ASSIGN_OR_RETURN(frame.header, DecodeFrameHeader(head));
  if (budget_ != nullptr && frame.header.payload_length > FrameBudget::kFreeBytes) {
    frame.budget_lease = budget_->TryTake(frame.header.payload_length);
    if (frame.budget_lease == nullptr) {
      return Status::ResourceExhausted(
          "a frame of " + std::to_string(frame.header.payload_length) +
          " bytes would take the bytes held in large frames past the limit of " +
          std::to_string(budget_->limit()) + "; retry later or send a smaller request");
    }
  }
  // The payload is read in chunks into a buffer reserved whole: reserved
  // pages cost nothing until bytes arrive and are written there, so a peer
  // that announces a large frame and trickles it holds only what it has
  // sent; and one large allocation is a mapping of its own that goes back
  // to the system when freed, where a buffer grown by doubling would leave
  // its smaller steps in the heap.
  constexpr size_t kChunk = 64 * 1024;
  if (frame.header.payload_length > kChunk) frame.payload.reserve(frame.header.payload_length);
  size_t have = 0;
  while (have < frame.header.payload_length) {
    const size_t step = std::min<size_t>(kChunk, frame.header.payload_length - have);
    frame.payload.resize(have + step);
    GALLEY_RETURN_IF_ERROR(
        ReadExact(frame.payload.data() + have, step, std::nullopt, finish, false, &frame));
    have += step;
  }
  return frame;
}

bool Connection::Readable() const {
  pollfd pfd{socket_.get(), POLLIN, 0};
  return ::poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

Result<PeerCredentials> Connection::Peer() const {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(socket_.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return Status::Internal(Errno("SO_PEERCRED"));
  }
  PeerCredentials peer{cred.pid, cred.uid, cred.gid, {}};
  // The supplementary groups as they were at connect (Linux 4.13+). Without
  // them only the primary group counts: access is narrower, never wider.
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 4; ++attempt) {
    len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(socket_.get(), SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      peer.groups = std::move(groups);
      break;
    }
    if (errno != ERANGE) break;
    groups.resize(len / sizeof(gid_t) + 1);
  }
  return peer;
}

void Connection::Shutdown() { ::shutdown(socket_.get(), SHUT_RDWR); }

}  // namespace galley::wire
