#include "job_channel.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

#include "wire/messages.h"

namespace galley::internal {
namespace {

using Clock = std::chrono::steady_clock;
// How often a waiting Next() checks that the daemon is still there: bounds
// how long a client hangs after the daemon dies.
constexpr auto kLivenessSlice = std::chrono::milliseconds(100);

}  // namespace

JobChannel::JobChannel(wire::Connection* connection, JobInfo info, wire::MappedRegion region,
                       UniqueFd ready_fd, wire::SegmentGeometry geometry,
                       std::chrono::milliseconds request_timeout)
    : connection_(connection),
      info_(std::move(info)),
      region_(std::move(region)),
      ready_fd_(std::move(ready_fd)),
      geometry_(geometry),
      request_timeout_(request_timeout) {}

bool JobChannel::TakeWakeup(std::chrono::milliseconds timeout) {
  uint64_t value = 0;
  // EFD_SEMAPHORE: each successful read takes exactly one wake-up.
  if (::read(ready_fd_.get(), &value, sizeof(value)) == sizeof(value)) return true;
  if (timeout.count() <= 0) return false;
  pollfd pfd{ready_fd_.get(), POLLIN, 0};
  if (::poll(&pfd, 1, static_cast<int>(timeout.count())) <= 0) return false;
  return ::read(ready_fd_.get(), &value, sizeof(value)) == sizeof(value);
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

Result<uint32_t> JobChannel::WaitNext(std::chrono::milliseconds timeout) {
  MutexLock lock(&consume_mu_);
  if (end_of_stream_) return Status::EndOfStream("the job has delivered all its epochs");
  if (!terminal_.ok()) return terminal_;
  const auto deadline = Clock::now() + timeout;
  auto* head = header();
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
    bool got = TakeWakeup(std::chrono::milliseconds(0));
    // The time the consumer waits for a batch is reported to the daemon
    // through the segment header (galleyctl jobs, metrics).
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
    } recorder{head, got ? Clock::time_point{} : Clock::now()};
    // Why galleyd ended the job, once it has: the reason in the ring.
    auto ended = [head]() -> std::optional<Status> {
      if (head->closed.load(std::memory_order_acquire) == 0) return std::nullopt;
      Status why(
          static_cast<StatusCode>(head->close_code),
          std::string(head->close_reason, strnlen(head->close_reason, sizeof(head->close_reason))));
      return why.ok() ? Status::Cancelled("galleyd ended the job") : why;
    };
    while (!got) {
      if (auto why = ended()) {
        terminal_ = *why;
        return terminal_;
      }
      if (Status alive = CheckConnection(); !alive.ok()) {
        // galleyd writes the reason into the ring before it closes the
        // connection: a job it ended between the two checks reports that
        // reason, not the disconnect.
        auto why = ended();
        terminal_ = why ? *why : alive;
        return terminal_;
      }
      const auto now = Clock::now();
      if (now >= deadline) {
        return Status::DeadlineExceeded("no batch from galleyd within the timeout");
      }
      const auto slice = std::min<Clock::duration>(kLivenessSlice, deadline - now);
      got = TakeWakeup(std::max(std::chrono::milliseconds(1),
                                std::chrono::ceil<std::chrono::milliseconds>(slice)));
    }
    // The daemon publishes slots in sequence order, so the one we want is ready.
    uint32_t found = geometry_.slot_count;
    for (uint32_t i = 0; i < geometry_.slot_count; ++i) {
      auto* s = slot(i);
      if (s->state.load(std::memory_order_acquire) ==
              static_cast<uint32_t>(wire::SlotState::kReady) &&
          s->sequence == next_sequence_) {
        found = i;
        break;
      }
    }
    if (found == geometry_.slot_count) {
      if (head->closed.load(std::memory_order_acquire) != 0) continue;  // woken by Close
      terminal_ = Status::ProtocolError("galleyd published a slot out of order");
      return terminal_;
    }
    ++next_sequence_;
    auto* s = slot(found);
    s->state.store(static_cast<uint32_t>(wire::SlotState::kLeased), std::memory_order_release);
    leased_.fetch_add(1, std::memory_order_acq_rel);
    if (s->generation < generation_) {
      ReleaseSlot(found);  // prepared before a SeekEpoch: not wanted
      continue;
    }
    if (s->flags & wire::kEndOfStream) end_of_stream_ = true;
    return found;
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

Status JobChannel::Seek(uint64_t epoch) {
  MutexLock lock(&consume_mu_);
  if (!terminal_.ok()) return terminal_;
  GALLEY_ASSIGN_OR_RETURN(auto reply, Request(wire::MessageType::kSeekEpoch, {{"epoch", epoch}},
                                              wire::MessageType::kEpochSought));
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
  if (!terminal_.ok()) return terminal_;
  return Request(wire::MessageType::kStatsRequest, nlohmann::json::object(),
                 wire::MessageType::kStats);
}

void JobChannel::Close() {
  (void)connection_->SendFrame(wire::MessageType::kCloseJob, 0, "");
  connection_->Shutdown();
}

}  // namespace galley::internal
