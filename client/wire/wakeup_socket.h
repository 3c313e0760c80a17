// The wake-up socket: how galleyd tells a job's client to look at the
// slots of its ring again (a slot was published, or the job ended).
//
// A connected pair of AF_UNIX SOCK_SEQPACKET sockets. galleyd keeps one end
// (WakeupSender) and passes the other to the client with JobOpened
// (WakeupReceiver). A wake-up is a one-byte message and carries no count: it
// means "rescan the slot states", which are the truth.
//
// Nothing the client does to its end can reach galleyd's end: they are two
// open file descriptions, so the client's O_NONBLOCK, buffer sizes or
// signal-driven I/O stay on its side; galleyd sends with MSG_DONTWAIT |
// MSG_NOSIGNAL, flags of each call, so a send never blocks and never raises
// SIGPIPE; its end is shut for reading, so nothing the client sends (bytes
// or descriptors) is queued in galleyd; and its send buffer is the kernel's
// smallest, so a client that never reads costs a few kilobytes. A send that
// finds the queue full is dropped, which loses nothing: the client then has
// unread wake-ups and will rescan every slot.
//
// Thread-safety: WakeupSender::Send may be called from several threads at
// once. A WakeupReceiver is used by one thread at a time.
#ifndef GALLEY_WIRE_WAKEUP_SOCKET_H_
#define GALLEY_WIRE_WAKEUP_SOCKET_H_

#include <utility>

#include "galley/status.h"
#include "galley/unique_fd.h"

namespace galley::wire {

class WakeupSender {
 public:
  // Creates a connected pair: the sender, and the client's end to pass in
  // JobOpened.
  static Result<std::pair<WakeupSender, UniqueFd>> Create();

  // Queues one wake-up if there is room. Never blocks, whatever the client
  // does to its end; a wake-up that finds the queue full or the client gone
  // is dropped.
  void Send() const;

 private:
  explicit WakeupSender(UniqueFd end) : end_(std::move(end)) {}

  UniqueFd end_;
};

class WakeupReceiver {
 public:
  // Takes `fd` as the client's end of a wake-up socket, after checking that
  // it is one (an AF_UNIX SOCK_SEQPACKET socket): a daemon that passes
  // anything else, such as an eventfd in blocking mode, is refused with
  // ProtocolError.
  static Result<WakeupReceiver> Adopt(UniqueFd fd);

  // Consumes the wake-ups queued, without blocking (MSG_DONTWAIT, whatever
  // the descriptor's mode). Returns false once galleyd has closed its end:
  // no wake-up will come any more.
  bool Drain() const;

  // For poll(2): readable when a wake-up is queued or galleyd's end closed.
  int fd() const { return end_.get(); }

 private:
  explicit WakeupReceiver(UniqueFd end) : end_(std::move(end)) {}

  UniqueFd end_;
};

}  // namespace galley::wire

#endif  // GALLEY_WIRE_WAKEUP_SOCKET_H_
