// BatchRing: the daemon's side of one job's shared-memory ring of batch slots.
//
// Creates the segment (Boost.Interprocess shared memory with an unguessable
// name, mode 0600, handed to the job's owner), maps it, and removes the name
// at once: the only ways in are the daemon's mapping and the descriptor
// passed to the client, so a crash leaves nothing in /dev/shm.
//
// Thread-safety: one scheduler thread claims and publishes slots; Close()
// may be called from any thread. Slot contents are written by pipeline
// threads between Claim and Publish, each to its own sample position.
#ifndef GALLEY_SERVER_DAEMON_BATCH_RING_H_
#define GALLEY_SERVER_DAEMON_BATCH_RING_H_

#include <sys/types.h>

#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <chrono>
#include <optional>
#include <string>

#include "galley/status.h"
#include "wire/segment_layout.h"
#include "wire/unique_fd.h"

namespace galley {

struct TensorShape {
  uint32_t channels = 3, height = 0, width = 0;
  wire::ElementType dtype = wire::ElementType::kUInt8;
  wire::TensorLayout layout = wire::TensorLayout::kNCHW;
};

class BatchRing {
 public:
  static Result<std::unique_ptr<BatchRing>> Create(const wire::SegmentGeometry& geometry,
                                                   const TensorShape& shape, uid_t owner);
  ~BatchRing();

  // A duplicate of the segment's descriptor, to pass to the client.
  Result<wire::UniqueFd> DuplicateFd() const;

  const wire::SegmentGeometry& geometry() const { return geometry_; }
  wire::SlotHeader* slot(uint32_t index) const {
    return wire::SlotAt(region_.get_address(), geometry_, index);
  }

  // Takes a free slot for filling, or nullopt if the client holds them all.
  std::optional<uint32_t> Claim();
  // Gives a claimed slot back unfilled.
  void Unclaim(uint32_t slot);
  // Publishes a filled slot as the next in sequence and wakes the client.
  void Publish(uint32_t slot);
  uint32_t FreeSlots() const;
  // Published slots the client has not taken yet: what its consumer has buffered.
  uint32_t ReadySlots() const;
  // What the client reports of its consumer's waits for batches (the
  // segment is writable by the client, so for statistics only).
  std::chrono::nanoseconds ConsumerWait() const;
  uint64_t ConsumerWaits() const;

  // Tells the client the job is over (code and reason) and wakes it.
  void Close(const Status& reason);

  // Removes galley segments left in /dev/shm by a daemon that died between
  // creating and unlinking one. Returns how many were removed.
  static int RemoveStaleSegments();

 private:
  BatchRing(wire::SegmentGeometry geometry, boost::interprocess::shared_memory_object shm,
            boost::interprocess::mapped_region region)
      : geometry_(geometry), shm_(std::move(shm)), region_(std::move(region)) {}

  const wire::SegmentGeometry geometry_;
  boost::interprocess::shared_memory_object shm_;  // owns the descriptor
  boost::interprocess::mapped_region region_;
  uint64_t next_sequence_ = 0;  // scheduler thread only
};

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_BATCH_RING_H_
