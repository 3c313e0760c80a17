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
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "galley/status.h"
#include "wire/protocol.h"
#include "wire/unique_fd.h"

namespace galley::wire {

struct Frame {
  FrameHeader header;
  std::string payload;  // JSON text, possibly empty
  UniqueFd passed_fd;   // set when the frame carried a descriptor
};

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

using Deadline = std::chrono::steady_clock::time_point;

class Connection {
 public:
  explicit Connection(UniqueFd socket) : socket_(std::move(socket)) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Connects to the daemon's socket at `path`.
  static Result<UniqueFd> ConnectUnix(const std::string& path);

  // Sends one frame; `fd_to_pass` (if >= 0) travels with it as SCM_RIGHTS.
  Status SendFrame(MessageType type, uint32_t request_id, std::string_view payload,
                   int fd_to_pass = -1);

  // Reads one whole frame, waiting at most until `deadline` for it to start.
  // Unavailable when the peer closed the socket, DeadlineExceeded on timeout,
  // ProtocolError on a malformed header.
  Result<Frame> ReadFrame(std::optional<Deadline> deadline = std::nullopt);

  // True if the peer has hung up or sent something (a read would not block).
  bool Readable() const;

  Result<PeerCredentials> Peer() const;
  int fd() const { return socket_.get(); }
  // Stops both directions; a thread blocked in ReadFrame returns Unavailable.
  void Shutdown();

 private:
  Status ReadExact(void* out, size_t size, std::optional<Deadline> deadline, bool first,
                   UniqueFd* passed_fd);

  UniqueFd socket_;
  std::mutex send_mu_;  // keeps concurrent frames from interleaving
};

}  // namespace galley::wire

#endif  // GALLEY_WIRE_CONNECTION_H_
