#include "job_channel.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "wire/messages.h"

namespace galley::internal {
namespace {

using Clock = std::chrono::steady_clock;
// The longest a waiting Next() sleeps before it rescans the slots and checks
// the connection. A published slot, a closed job or a dead daemon wake it
// at once (the wake-up socket or the connection becomes readable); the
// slice bounds only what a wake-up the kernel failed to queue (no memory)
// can cost.
constexpr auto kLivenessSlice = std::chrono::milliseconds(100);

Status Closed() { return Status::Cancelled("the job is closed"); }

}  // namespace

JobChannel::JobChannel(wire::Connection* connection, JobInfo info, wire::MappedRegion region,
                       wire::WakeupReceiver wakeup, wire::SegmentGeometry geometry,
                       std::chrono::milliseconds request_timeout)
    : connection_(connection),
      info_(std::move(info)),
      region_(std::move(region)),
      wakeup_(std::move(wakeup)),
      geometry_(geometry),
      request_timeout_(request_timeout) {}

void JobChannel::AwaitActivity(std::chrono::milliseconds timeout) const {
  pollfd fds[2] = {{wakeup_.fd(), POLLIN, 0}, {connection_->fd(), POLLIN, 0}};
  (void)::poll(fds, 2, static_cast<int>(timeout.count()));
}

Status JobChannel::CheckConnection() {
  if (!connection_->Readable()) return Status::Ok();
  auto frame = connection_->ReadFrame(Clock::now());
  if (!frame.ok()) {
    if (frame.status().code() == StatusCode::kUnavailable) {
      return Status::Unavailable("galleyd closed the connection (the daemon stopped or crashed)");
    }
    return frame.status();
  }
  if (frame->header.type == wire::MessageType::kError) {
    auto body = wire::ParseObject(frame->payload);
    return body.ok() ? wire::StatusFromErrorJson(*body) : body.status();
  }
  return Status::ProtocolError("unexpected " +
                               std::string(wire::MessageTypeName(frame->header.type)) +
                               " message from galleyd");
}

std::optional<Status> JobChannel::Ended() const {
  auto* head = header();
  if (head->closed.load(std::memory_order_acquire) == 0) return std::nullopt;
  Status why(
      static_cast<StatusCode>(head->close_code),
      std::string(head->close_reason, strnlen(head->close_reason, sizeof(head->close_reason))));
  return why.ok() ? Status::Cancelled("galleyd ended the job") : why;
}

Result<std::optional<uint32_t>> JobChannel::FindNextReady() {
  // A scan may see a later slot Ready after it passed over an earlier one
  // published just before; that later slot's acquire makes the earlier
  // publication visible, so a second pass tells a race from disorder.
  for (int pass = 0; pass < 2; ++pass) {
    bool other_ready = false;
    for (uint32_t i = 0; i < geometry_.slot_count; ++i) {
      auto* s = slot(i);
      if (s->state.load(std::memory_order_acquire) !=
          static_cast<uint32_t>(wire::SlotState::kReady)) {
        continue;
      }
      if (s->sequence == next_sequence_) return std::optional<uint32_t>(i);
      other_ready = true;
    }
    if (!other_ready) return std::optional<uint32_t>();
  }
  return Status::ProtocolError("galleyd published a slot out of order");
}

Result<uint32_t> JobChannel::WaitNext(std::chrono::milliseconds timeout) {
  MutexLock lock(&consume_mu_);
  if (closed_.load(std::memory_order_acquire)) return Closed();
  if (end_of_stream_) return Status::EndOfStream("the job has delivered all its epochs");
  if (!terminal_.ok()) return terminal_;
  const auto deadline = Clock::now() + timeout;
  if (!announced_ready_) {
    // The daemon starts preparing a job's batches when its consumer first
    // waits, so jobs opened together also start together.
    announced_ready_ = true;
    if (Status s = connection_->SendFrame(wire::MessageType::kConsumerReady, 0, ""); !s.ok()) {
      terminal_ =
          Status::Unavailable("galleyd closed the connection (the daemon stopped or crashed)");
      return terminal_;
    }
  }
  // The time the consumer waits for a batch that is not ready yet is
  // reported to the daemon through the segment header (galleyctl jobs,
  // metrics).
  struct WaitRecorder {
    wire::SegmentHeader* head = nullptr;
    Clock::time_point start;
    ~WaitRecorder() {
      if (start == Clock::time_point{}) return;
      head->consumer_wait_ns.fetch_add(
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count(),
          std::memory_order_relaxed);
      head->consumer_waits.fetch_add(1, std::memory_order_relaxed);
    }
  } recorder{header()};
  while (true) {
    if (leased_.load(std::memory_order_acquire) >= geometry_.slot_count) {
      // Nothing can arrive until the caller lets a batch go: say so now
      // instead of timing out.
      return Status::ResourceExhausted(
          "all " + std::to_string(geometry_.slot_count) +
          " batch slots of this job are held by the caller (prefetch=" +
          std::to_string(geometry_.slot_count - 1) +
          " plus the batch in hand); a batch's slot is returned when its tensors are freed, so "
          "copy batches you keep (tensor.clone()) or raise prefetch");
    }
    // A batch already published is taken without a system call. Failing
    // that: drain, scan again, then wait. The daemon stores a slot's state
    // before it sends the wake-up, so a slot the second scan misses sends
    // its wake-up after the drain, and the wait returns for it.
    bool daemon_end_open = true;
    auto found = FindNextReady();
    if (found.ok() && !found->has_value()) {
      daemon_end_open = wakeup_.Drain();
      found = FindNextReady();
    }
    if (!found.ok()) {
      terminal_ = found.status();
      return terminal_;
    }
    if (found->has_value()) {
      const uint32_t index = **found;
      ++next_sequence_;
      auto* s = slot(index);
      s->state.store(static_cast<uint32_t>(wire::SlotState::kLeased), std::memory_order_release);
      leased_.fetch_add(1, std::memory_order_acq_rel);
      if (s->generation < generation_) {
        ReleaseSlot(index);  // prepared before a SeekEpoch: not wanted
        continue;
      }
      // The slot's ids, labels and tensor hold the batch capacity: a count
      // past it would have a batch read beyond them.
      const uint32_t count = s->sample_count;
      if (count > geometry_.batch_capacity) {
        ReleaseSlot(index);
        terminal_ =
            Status::ProtocolError("galleyd published a batch of " + std::to_string(count) +
                                  " samples in a slot that holds " +
                                  std::to_string(geometry_.batch_capacity) + "; refusing it");
        return terminal_;
      }
      if (s->flags & wire::kEndOfStream) end_of_stream_ = true;
      return index;
    }
    if (auto why = Ended()) {
      terminal_ = *why;
      return terminal_;
    }
    if (closed_.load(std::memory_order_acquire)) return Closed();
    if (Status alive = CheckConnection(); !alive.ok()) {
      // galleyd writes the reason into the ring before it closes the
      // connection: a job it ended between the two checks reports that
      // reason, not the disconnect.
      auto why = Ended();
      terminal_ = why ? *why : alive;
      return terminal_;
    }
    if (!daemon_end_open) {
      // No wake-up can come any more: the daemon is gone, whether or not
      // its connection has hung up yet.
      terminal_ =
          Status::Unavailable("galleyd closed the connection (the daemon stopped or crashed)");
      return terminal_;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      return Status::DeadlineExceeded("no batch from galleyd within the timeout");
    }
    if (recorder.start == Clock::time_point{}) recorder.start = now;
    const auto slice = std::min<Clock::duration>(kLivenessSlice, deadline - now);
    AwaitActivity(std::max(std::chrono::milliseconds(1),
                           std::chrono::ceil<std::chrono::milliseconds>(slice)));
  }
}

void JobChannel::ReleaseSlot(uint32_t index) {
  slot(index)->state.store(static_cast<uint32_t>(wire::SlotState::kFree),
                           std::memory_order_release);
  leased_.fetch_sub(1, std::memory_order_acq_rel);
  // A failure means the daemon is gone; nothing is waiting for the slot then.
  (void)connection_->SendFrame(wire::MessageType::kSlotReleased, 0, "");
}

Result<nlohmann::json> JobChannel::Request(wire::MessageType type, const nlohmann::json& body,
                                           wire::MessageType reply_type) {
  const uint32_t id = next_request_id_++;
  GALLEY_ASSIGN_OR_RETURN(auto text, wire::EncodeJson(body));
  GALLEY_RETURN_IF_ERROR(connection_->SendFrame(type, id, text));
  const auto deadline = Clock::now() + request_timeout_;
  while (true) {
    GALLEY_ASSIGN_OR_RETURN(auto frame, connection_->ReadFrame(deadline));
    GALLEY_ASSIGN_OR_RETURN(auto reply, wire::ParseObject(frame.payload));
    if (frame.header.type == wire::MessageType::kError) return wire::StatusFromErrorJson(reply);
    if (frame.header.type == reply_type && frame.header.request_id == id) return reply;
    return Status::ProtocolError("unexpected reply " +
                                 std::string(wire::MessageTypeName(frame.header.type)));
  }
}

Status JobChannel::Seek(uint64_t epoch, const std::vector<uint64_t>* items) {
  MutexLock lock(&consume_mu_);
  if (closed_.load(std::memory_order_acquire)) return Closed();
  if (!terminal_.ok()) return terminal_;
  nlohmann::json body = {{"epoch", epoch}};
  if (items != nullptr) body["items"] = *items;
  GALLEY_ASSIGN_OR_RETURN(
      auto reply, Request(wire::MessageType::kSeekEpoch, body, wire::MessageType::kEpochSought));
  auto gen = reply.find("generation");
  if (gen == reply.end() || !gen->is_number_unsigned()) {
    return Status::ProtocolError("EpochSought without a generation");
  }
  generation_ = gen->get<uint64_t>();
  end_of_stream_ = false;
  return Status::Ok();
}

Result<nlohmann::json> JobChannel::Stats() {
  MutexLock lock(&consume_mu_);
  if (closed_.load(std::memory_order_acquire)) return Closed();
  if (!terminal_.ok()) return terminal_;
  return Request(wire::MessageType::kStatsRequest, nlohmann::json::object(),
                 wire::MessageType::kStats);
}

Status JobChannel::RefreshCredentials(const ObjectStoreAccess& access) {
  if (closed_.load(std::memory_order_acquire)) return Closed();
  GALLEY_ASSIGN_OR_RETURN(auto text,
                          wire::EncodeJson({{"s3", wire::ObjectStoreAccessToJson(access)}}));
  return connection_->SendFrame(wire::MessageType::kRefreshCredentials, 0, text);
}

void JobChannel::Close() {
  if (closed_.exchange(true, std::memory_order_acq_rel)) return;
  (void)connection_->SendFrame(wire::MessageType::kCloseJob, 0, "");
  // Wakes a WaitNext polling the connection.
  connection_->Shutdown();
}

}  // namespace galley::internal
