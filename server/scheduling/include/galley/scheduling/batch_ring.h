// BatchRing: the daemon's side of one job's shared-memory ring of batch slots.
//
// Creates the segment as an anonymous memfd (nothing in /dev/shm to leak),
// reserves its memory (posix_fallocate: a full tmpfs is an error here, not a
// SIGBUS later), clears and maps its pages before the job's first batch
// (MADV_POPULATE_WRITE, so no page fault lands in the pipeline's writes of
// samples), seals its size (F_SEAL_SHRINK | F_SEAL_GROW, so a client
// holding the descriptor cannot truncate the daemon's mapping; F_SEAL_SEAL,
// so it cannot add seals of its own) and maps it. Publication is signalled
// through a wake-up socket (wire/wakeup_socket.h) whose sending end never
// leaves the daemon, never through anything in the segment: the client can
// write every byte of the segment, so the daemon keeps no synchronisation
// object there and reads back only slot states, which it treats as
// untrusted hints. No descriptor the client receives has state the daemon
// depends on (docs/protocol.md, section 2.3).
//
// The ring owns the slots' layout: the samples' tensors are written in
// place by the pipeline, everything else a slot says of its batch (the
// SlotHeader, the item ids, labels and field records) by Publish.
//
// Thread-safety: one scheduler thread claims and publishes slots; Close()
// may be called from any thread. Slot contents are written by pipeline
// threads between Claim and Publish, each to its own sample position. The
// client's descriptors are handed out and dropped by the job's connection
// thread, before the job's first batch.
#ifndef GALLEY_SERVER_SCHEDULING_BATCH_RING_H_
#define GALLEY_SERVER_SCHEDULING_BATCH_RING_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "galley/ids.h"
#include "galley/status.h"
#include "galley/unique_fd.h"
#include "wire/segment_layout.h"
#include "wire/wakeup_socket.h"

namespace galley {

// A job's samples, as its segment's header records them.
using TensorShape = wire::SampleShape;

// What a published slot says of its batch besides the samples: the
// SlotHeader's fields and the slot's item ids, labels and field records.
struct BatchDescription {
  uint32_t flags = 0;  // wire::SlotFlags
  uint64_t generation = 0;
  uint64_t epoch = 0;
  uint64_t batch_index = 0;
  std::span<const ItemId> items;    // one per sample, in position order
  std::span<const int64_t> labels;  // one per item
  // With a field area: one field record per item (wire/field_record.h).
  std::span<const std::span<const uint8_t>> fields;
  uint32_t skipped = 0;          // samples a substitute stands in for
  std::string_view first_error;  // the first of their failures, cut to fit
};

class BatchRing {
 public:
  static Result<std::unique_ptr<BatchRing>> Create(const wire::SegmentGeometry& geometry,
                                                   const TensorShape& shape, uid_t owner);
  ~BatchRing();

  // The descriptors to pass to the client in JobOpened: the sealed segment
  // and the client's end of the wake-up socket. Owned by the ring until
  // DropClientDescriptors(); -1 after it.
  int segment_fd() const { return segment_fd_.get(); }
  int client_wakeup_fd() const { return client_wakeup_end_.get(); }
  // Closes the ring's copies of the client's descriptors once JobOpened has
  // carried them: the daemon needs neither (it keeps its mapping and its
  // own end of the wake-up socket), so a job holds one descriptor, not three.
  void DropClientDescriptors();

  const wire::SegmentGeometry& geometry() const { return geometry_; }
  wire::SlotHeader* slot(uint32_t index) const { return wire::SlotAt(base_, geometry_, index); }

  // Takes a free slot for filling, or nullopt if the client holds them all.
  std::optional<uint32_t> Claim();
  // Gives a claimed slot back unfilled.
  void Unclaim(uint32_t slot);
  // Writes `batch` into a slot whose samples are filled and publishes it as
  // the next in sequence, then wakes the client. Holds at most the ring's
  // batch capacity of items: any beyond are left out.
  void Publish(uint32_t slot, const BatchDescription& batch);
  uint32_t FreeSlots() const;
  // Published slots the client has not taken yet: what its consumer has buffered.
  uint32_t ReadySlots() const;
  // Those of them published for `generation` (SlotHeader::generation).
  uint32_t ReadySlotsOf(uint64_t generation) const;
  // What the client reports of its consumer's waits for batches (the
  // segment is writable by the client, so for statistics only).
  std::chrono::nanoseconds ConsumerWait() const;
  uint64_t ConsumerWaits() const;

  // Tells the client the job is over (code and reason) and wakes it.
  void Close(const Status& reason);

  // Removes galley segments left in /dev/shm by older daemons, which named
  // their segments there. Returns how many were removed.
  static int RemoveStaleSegments();

 private:
  BatchRing(wire::SegmentGeometry geometry, UniqueFd segment_fd, wire::WakeupSender wakeup,
            UniqueFd client_wakeup_end, void* base)
      : geometry_(geometry),
        segment_fd_(std::move(segment_fd)),
        wakeup_(std::move(wakeup)),
        client_wakeup_end_(std::move(client_wakeup_end)),
        base_(base) {}

  const wire::SegmentGeometry geometry_;
  UniqueFd segment_fd_;              // sealed memfd, until handed out
  const wire::WakeupSender wakeup_;  // galleyd's end, never passed on
  UniqueFd client_wakeup_end_;       // the client's end, until handed out
  void* const base_;                 // our mapping, segment_bytes long; unmapped in the destructor
  std::atomic<bool> closed_{false};  // Close ran (the segment's flag is not trusted)
  uint64_t next_sequence_ = 0;       // scheduler thread only
};

}  // namespace galley

#endif  // GALLEY_SERVER_SCHEDULING_BATCH_RING_H_
