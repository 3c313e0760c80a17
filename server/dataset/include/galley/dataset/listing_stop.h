// ListingStop: whether a listing (a folder walked, a manifest read, shards
// indexed, a listing checked against the storage) should give up before it
// ends, because galleyd is stopping or because the client that asked for it
// has gone.
//
// A listing runs on the thread of the connection that asked for it and can
// take long (a million files; a hostile manifest), so it asks Requested()
// between files, lines and shards and returns Why() when told to stop:
// SIGTERM then ends galleyd within moments whatever its listings are doing,
// and a client that leaves frees the thread and the memory its listing held.
//
// Thread-safety: Requested() and Why() may be called from any thread (a
// shard set is indexed by several); the flag and descriptor it watches must
// outlive it.
#ifndef GALLEY_SERVER_DATASET_LISTING_STOP_H_
#define GALLEY_SERVER_DATASET_LISTING_STOP_H_

#include <atomic>
#include <cstdint>

#include "galley/status.h"

namespace galley {

class ListingStop {
 public:
  // `stopping`: set when galleyd stops (null: never). `peer_fd`: the
  // connection of the client waiting for the listing (-1: none); the listing
  // stops once the peer has closed it.
  ListingStop(const std::atomic<bool>* stopping, int peer_fd)
      : stopping_(stopping), peer_fd_(peer_fd) {}
  ListingStop(const ListingStop&) = delete;
  ListingStop& operator=(const ListingStop&) = delete;

  // Whether to stop now. Reads galleyd's flag on every call and asks the
  // peer's socket (one poll) once every kPollEvery calls, so that it costs
  // next to nothing per line of a manifest.
  bool Requested();
  // Requested(), asking the peer's socket on every call: for a caller about
  // to send a request to object storage (a LIST page, a HEAD), where one
  // poll is nothing beside the round trip it may save.
  bool RequestedNow();
  // Why the listing stopped: Cancelled, naming the reason.
  Status Why() const;

  static constexpr uint32_t kPollEvery = 1024;

 private:
  // Polls the peer's socket; notes and returns whether it has gone.
  bool PeerGone();

  const std::atomic<bool>* const stopping_;
  const int peer_fd_;
  std::atomic<uint32_t> calls_{0};
  std::atomic<bool> peer_gone_{false};
};

// Whether `stop` (may be null: never) asks the listing to give up.
inline bool StopRequested(ListingStop* stop) { return stop != nullptr && stop->Requested(); }
inline bool StopRequestedNow(ListingStop* stop) { return stop != nullptr && stop->RequestedNow(); }

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_LISTING_STOP_H_
