// JobChannel: the client side of one job: its connection, its mapped ring,
// and the cursor over published slots.
//
// Shared (shared_ptr) by the Job and every Batch leased from it, so the
// mapping outlives the last batch. WaitNext/Request are called by the job's
// consuming thread (guarded by consume_mu_); ReleaseSlot and
// RefreshCredentials may be called from any thread.
#ifndef GALLEY_CLIENT_JOB_CHANNEL_H_
#define GALLEY_CLIENT_JOB_CHANNEL_H_

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>

#include "galley/client.h"
#include "galley/mutex.h"
#include "wire/connection.h"
#include "wire/mapped_region.h"
#include "wire/segment_layout.h"
#include "wire/wakeup_socket.h"

namespace galley::internal {

class JobChannel {
 public:
  // `wakeup` is the socket the daemon signals after it publishes a slot or
  // ends the job; the channel owns it.
  JobChannel(wire::Connection* connection, JobInfo info, wire::MappedRegion region,
             wire::WakeupReceiver wakeup, wire::SegmentGeometry geometry,
             std::chrono::milliseconds request_timeout);

  const JobInfo& info() const { return info_; }
  const wire::SegmentGeometry& geometry() const { return geometry_; }
  wire::SlotHeader* slot(uint32_t index) const {
    return wire::SlotAt(region_.base(), geometry_, index);
  }
  wire::SegmentHeader* header() const { return wire::HeaderAt(region_.base()); }

  // Leases the next published slot of the current generation.
  Result<uint32_t> WaitNext(std::chrono::milliseconds timeout) EXCLUDES(consume_mu_);
  // Marks the slot free and tells the daemon. Safe from any thread.
  void ReleaseSlot(uint32_t index);
  // `items`, when given, is the epoch's list (JobSpec::epoch_items).
  Status Seek(uint64_t epoch, const std::vector<uint64_t>* items) EXCLUDES(consume_mu_);
  Result<nlohmann::json> Stats() EXCLUDES(consume_mu_);
  // Sends the job's re-resolved S3 access (RefreshCredentials, no reply).
  // Any thread: it neither waits for the consumer nor reads the connection.
  Status RefreshCredentials(const ObjectStoreAccess& access);
  // Ends the job; any thread, any number of times. A WaitNext in progress
  // returns Cancelled, as do the calls that follow.
  void Close();

 private:
  // Sends a request and waits for its reply (or an Error).
  Result<nlohmann::json> Request(wire::MessageType type, const nlohmann::json& body,
                                 wire::MessageType reply_type) REQUIRES(consume_mu_);
  // Reads a frame the daemon sent without being asked (an Error when it ends
  // the job) or notices that it hung up.
  Status CheckConnection();
  // The slot published with sequence `next_sequence_`, if it is Ready;
  // ProtocolError if other slots are Ready but not that one.
  Result<std::optional<uint32_t>> FindNextReady() REQUIRES(consume_mu_);
  // Why galleyd ended the job, once it has: the reason it wrote in the ring.
  std::optional<Status> Ended() const;
  // Waits at most `timeout` for a wake-up, a frame or a hang-up on the
  // connection; never reads.
  void AwaitActivity(std::chrono::milliseconds timeout) const;

  std::unique_ptr<wire::Connection> connection_;
  const JobInfo info_;
  const wire::MappedRegion region_;
  const wire::WakeupReceiver wakeup_;
  const wire::SegmentGeometry geometry_;
  const std::chrono::milliseconds request_timeout_;

  // Slots the caller holds (leased, not yet released); any thread.
  std::atomic<uint32_t> leased_{0};
  std::atomic<bool> closed_{false};  // Close ran; any thread
  Mutex consume_mu_;
  uint64_t next_sequence_ GUARDED_BY(consume_mu_) = 0;
  uint64_t generation_ GUARDED_BY(consume_mu_) = 0;
  uint32_t next_request_id_ GUARDED_BY(consume_mu_) = 1;
  bool end_of_stream_ GUARDED_BY(consume_mu_) = false;
  bool announced_ready_ GUARDED_BY(consume_mu_) = false;  // ConsumerReady sent
  Status terminal_ GUARDED_BY(consume_mu_);               // why the job ended, if it did
};

}  // namespace galley::internal

#endif  // GALLEY_CLIENT_JOB_CHANNEL_H_
