// Connection: one end of a control-plane Unix stream socket, speaking frames.
//
// Owns its socket. SendFrame may be called from several threads at once (an
// internal mutex keeps frames whole); ReadFrame must be called by one thread
// at a time. A received descriptor (SCM_RIGHTS) is handed out with its frame;
// descriptors a peer sends without being asked are closed.
#ifndef GALLEY_WIRE_CONNECTION_H_
#define GALLEY_WIRE_CONNECTION_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "galley/mutex.h"
#include "galley/status.h"
#include "galley/unique_fd.h"
#include "wire/frame_budget.h"
#include "wire/protocol.h"

namespace galley::wire {

struct Frame {
  FrameHeader header;
  std::string payload;  // JSON text, possibly empty
  UniqueFd passed_fd;   // the first descriptor the frame carried, if any
  UniqueFd second_fd;   // the second one (JobOpened passes the ring and its wake-up socket)
  // The payload's charge against the connection's FrameBudget, if any.
  std::unique_ptr<FrameBudget::Lease> budget_lease;
};

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary (SO_PEERGROUPS)
};

using Deadline = std::chrono::steady_clock::time_point;

// How long a frame may take to arrive once its first byte has.
inline constexpr std::chrono::seconds kFrameCompletionTimeout{10};

class Connection {
 public:
  explicit Connection(UniqueFd socket) : socket_(std::move(socket)) {}
  // Frames read from now on are charged against `budget` (which must
  // outlive the connection); see FrameBudget.
  void SetFrameBudget(FrameBudget* budget) { budget_ = budget; }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Connects to the daemon's socket at `path`.
  static Result<UniqueFd> ConnectUnix(const std::string& path);

  // Sends one frame; `fd_to_pass` and `second_fd` (each if >= 0) travel
  // with it as SCM_RIGHTS, in that order.
  Status SendFrame(MessageType type, uint32_t request_id, std::string_view payload,
                   int fd_to_pass = -1, int second_fd = -1);
  // Best effort, never blocks: sends the frame only if the socket takes it
  // whole at once and no other thread is sending. For last words on shutdown.
  bool TrySendFrame(MessageType type, uint32_t request_id, std::string_view payload);

  // Reads one whole frame, waiting at most until `deadline` for it to start;
  // once it has started, the whole frame must arrive within
  // kFrameCompletionTimeout (a deadline for the frame, not per byte).
  // Unavailable when the peer closed the socket, DeadlineExceeded on timeout,
  // ProtocolError on a malformed header or a frame that did not complete.
  Result<Frame> ReadFrame(std::optional<Deadline> deadline = std::nullopt);

  // True if the peer has hung up or sent something (a read would not block).
  bool Readable() const;

  Result<PeerCredentials> Peer() const;
  int fd() const { return socket_.get(); }
  // Stops both directions; a thread blocked in ReadFrame returns Unavailable.
  void Shutdown();

 private:
  // Reads `size` bytes; `start_deadline` bounds the wait for the first byte
  // (a clean end of stream before it is Unavailable), `finish_deadline` the
  // rest. Descriptors that arrive are kept in `frame` (at most two).
  Status ReadExact(void* out, size_t size, std::optional<Deadline> start_deadline,
                   Deadline finish_deadline, bool frame_start, Frame* frame);

  UniqueFd socket_;
  FrameBudget* budget_ = nullptr;
  Mutex send_mu_;  // keeps concurrent frames from interleaving
};

}  // namespace galley::wire

#endif  // GALLEY_WIRE_CONNECTION_H_
