#include "galley/dataset/listing_stop.h"

#include <poll.h>

namespace galley {

bool ListingStop::Requested() {
  if (stopping_ != nullptr && stopping_->load(std::memory_order_relaxed)) return true;
  if (peer_gone_.load(std::memory_order_relaxed)) return true;
  if (peer_fd_ < 0 || calls_.fetch_add(1, std::memory_order_relaxed) % kPollEvery != 0) {
    return false;
  }
  return PeerGone();
}

bool ListingStop::RequestedNow() {
  if (stopping_ != nullptr && stopping_->load(std::memory_order_relaxed)) return true;
  if (peer_gone_.load(std::memory_order_relaxed)) return true;
  return peer_fd_ >= 0 && PeerGone();
}

bool ListingStop::PeerGone() {
  // The peer sends nothing while it waits for its reply, so any of these
  // means it closed the connection (or it broke).
  struct pollfd watched = {peer_fd_, POLLRDHUP, 0};
  if (::poll(&watched, 1, 0) == 1 && (watched.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
    peer_gone_ = true;
  }
  return peer_gone_.load(std::memory_order_relaxed);
}

Status ListingStop::Why() const {
  if (stopping_ != nullptr && stopping_->load()) {
    return Status::Cancelled("listing stopped: galleyd is shutting down");
  }
  return Status::Cancelled("listing stopped: the client that asked for it has gone");
}

}  // namespace galley
