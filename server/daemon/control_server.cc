#include "galley/daemon/control_server.h"

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "galley/daemon/dataset_listing.h"
#include "galley/daemon/shard_datasets.h"
#include "galley/daemon/socket_access.h"
#include "galley/dataset/descriptor_exhaustion.h"
#include "galley/errno_text.h"
#include "galley/image/decoder.h"
#include "galley/sampler/sampling_policy.h"
#include "galley/snapshots/snapshot_json.h"
#include "galley/version.h"
#include "wire/messages.h"

namespace galley {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr auto kHandshakeTimeout = std::chrono::seconds(5);
constexpr uint32_t kExtraConnections = 16;  // queries and handshakes beyond max_jobs

void SendError(wire::Connection& connection, uint32_t request_id, const Status& status) {
  (void)connection.SendFrame(wire::MessageType::kError, request_id,
                             wire::DumpJson(wire::ErrorToJson(status)));
}

Status SendJson(wire::Connection& connection, wire::MessageType type, uint32_t request_id,
                const json& body, int fd = -1, int second_fd = -1) {
  return connection.SendFrame(type, request_id, wire::DumpJson(body), fd, second_fd);
}

std::string Errno(const std::string& what) { return what + ": " + ErrnoText(errno); }

// A connection that has sent nothing for this long (after its handshake,
// without a job) is closed: idle peers must not hold connection slots.
constexpr auto kIdleQueryTimeout = std::chrono::seconds(60);

// Token bucket pacing one connection's messages. A peer over its rate is
// not refused but slowed: its connection thread sleeps before handling the
// next message, so a flood costs the flooder its own throughput and the
// shared scheduler sees at most `rate` wake-ups a second from it.
class MessagePacer {
 public:
  MessagePacer(double rate_per_s, double burst)
      : rate_(rate_per_s), burst_(burst), tokens_(burst) {}
  // Takes one token, sleeping (in slices, while `stopping` is false) until
  // one is available. False when the peer hung up meanwhile: what it queued
  // before closing is not worth serving, and its job must end now rather
  // than once a flood's backlog is paced through.
  bool Take(const std::atomic<bool>& stopping, int fd) {
    while (true) {
      const auto now = Clock::now();
      tokens_ =
          std::min(burst_, tokens_ + rate_ * std::chrono::duration<double>(now - last_).count());
      last_ = now;
      if (tokens_ >= 1.0 || stopping.load()) break;
      const int wait_ms = static_cast<int>(std::min(50.0, 1000.0 * (1.0 - tokens_) / rate_));
      pollfd hangup{fd, POLLRDHUP, 0};
      if (::poll(&hangup, 1, std::max(wait_ms, 1)) > 0 &&
          (hangup.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
        return false;
      }
    }
    tokens_ -= 1.0;
    return true;
  }

 private:
  const double rate_, burst_;
  double tokens_;
  Clock::time_point last_ = Clock::now();
};

// Generous for real clients (a release per batch; stats and seeks a few
// times per epoch), far below what a flood can send.
constexpr double kReleaseRate = 10000, kReleaseBurst = 20000;
constexpr double kRequestRate = 20, kRequestBurst = 50;

// Which dataset paths a user may see in replies: an admin every one, anyone
// else those they may read.
class DatasetVisibility {
 public:
  DatasetVisibility(const wire::PeerCredentials& peer, bool admin)
      : admin_(admin), checker_(Credentials{peer.uid, peer.gid, peer.groups}) {}

  bool MaySee(const std::string& path) {
    if (admin_) return true;
    struct stat info {};
    return ::stat(path.c_str(), &info) == 0 && checker_.CheckFile(path, info).ok();
  }

  // The groups on datasets the user may see.
  std::vector<SamplerGroupSnapshot> Visible(std::vector<SamplerGroupSnapshot> groups) {
    std::erase_if(groups, [this](const SamplerGroupSnapshot& g) { return !MaySee(g.dataset); });
    return groups;
  }

 private:
  const bool admin_;
  AccessChecker checker_;
};

// What JobOpened tells the client of its job.
JobInfo JobInfoOf(const ServedJob& job) {
  const JobPlan& plan = *job.plan;
  JobInfo info;
  info.job_id = job.id;
  info.dataset_size = plan.dataset->size();
  info.subset_size = plan.subset.size();
  info.epoch_size = plan.epoch_size;
  info.batches_per_epoch = plan.BatchesPerEpoch();
  info.classes = plan.dataset->classes();
  info.dtype = plan.pipeline->dtype() == image::DType::kUInt8 ? DType::kUInt8 : DType::kFloat32;
  info.layout = plan.pipeline->layout() == image::Layout::kNCHW ? Layout::kNCHW : Layout::kNHWC;
  const int64_t h = plan.pipeline->output_height(), w = plan.pipeline->output_width();
  info.sample_shape =
      info.layout == Layout::kNCHW ? std::vector<int64_t>{3, h, w} : std::vector<int64_t>{h, w, 3};
  info.slots = job.ring->geometry().slot_count;
  info.segment_bytes = job.ring->geometry().segment_bytes;
  info.content_key = plan.dataset->resume_key().content.Hex();
  info.mtimes_key = plan.dataset->resume_key().mtimes.Hex();
  info.dataset_bytes = plan.dataset->total_bytes();
  if (const auto& collations = plan.dataset->field_collations(); !collations.empty()) {
    for (const uint32_t f : plan.field_map) info.field_collations.push_back(collations[f]);
  }
  if (!plan.spec.fields.empty()) info.image_key = plan.dataset->image_column();
  if (const ShardSource* shards = plan.dataset->shard_source()) {
    info.left_out = shards->stats().skipped_samples;
    info.left_out_samples = shards->stats().left_out;
  }
  return info;
}

// Answers the job's OpenJob with JobOpened and the ring's descriptors,
// which galleyd then closes: the client holds the only copies.
Status SendJobOpened(wire::Connection& connection, uint32_t open_id, ServedJob& job) {
  Status sent = SendJson(connection, wire::MessageType::kJobOpened, open_id,
                         wire::JobInfoToJson(JobInfoOf(job)), job.ring->segment_fd(),
                         job.ring->client_wakeup_fd());
  job.ring->DropClientDescriptors();
  return sent;
}

// A SeekEpoch request: the epoch the job restarts at and, for a listed
// job, the epoch's list (JobSpec::epoch_items).
struct SeekRequest {
  uint64_t epoch = 0;
  std::optional<std::vector<uint64_t>> items;
};

Result<SeekRequest> ParseSeekEpoch(const json& body) {
  auto epoch = body.find("epoch");
  if (epoch == body.end() || !epoch->is_number_unsigned()) {
    return Status::InvalidArgument("SeekEpoch needs 'epoch'");
  }
  SeekRequest seek{.epoch = epoch->get<uint64_t>()};
  if (auto list = body.find("items"); list != body.end()) {
    const bool valid =
        list->is_array() && std::all_of(list->begin(), list->end(),
                                        [](const json& v) { return v.is_number_unsigned(); });
    if (!valid) return Status::InvalidArgument("SeekEpoch's 'items' must be a list of item ids");
    seek.items.emplace();
    seek.items->reserve(list->size());
    for (const json& v : *list) seek.items->push_back(v.get<uint64_t>());
  }
  return seek;
}

// galleyd's own credentials: what /metrics shows is an admin's view.
wire::PeerCredentials Myself() {
  return wire::PeerCredentials{::getpid(), ::geteuid(), ::getegid(), {}};
}

}  // namespace

ControlServerOptions ControlServerOptions::From(const DaemonOptions& options) {
  ControlServerOptions o;
  o.socket_path = options.socket_path;
  o.socket_group = options.socket_group;
  o.socket_mode = options.socket_mode;
  o.owner_only = options.owner_only;
  return o;
}

ControlServer::ControlServer(const ControlServerOptions& options, JobManager* jobs,
                             DatasetRegistry* datasets, const Scheduler* scheduler,
                             ItemPipeline* pipeline, const CachePlanner* cache_planner)
    : options_(options),
      jobs_(jobs),
      datasets_(datasets),
      scheduler_(scheduler),
      pipeline_(pipeline),
      cache_planner_(cache_planner) {}

ControlServer::~ControlServer() { Stop(Status::Cancelled("galleyd is shutting down")); }

Status ControlServer::Start() {
  const std::filesystem::path path(options_.socket_path);
  sockaddr_un addr{};
  if (path.string().size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument("socket path too long: " + path.string());
  }
  std::error_code ec;
  if (path.has_parent_path()) {
    const bool created = std::filesystem::create_directories(path.parent_path(), ec);
    if (ec)
      return Status::PermissionDenied("cannot create " + path.parent_path().string() + ": " +
                                      ec.message());
    // Clients use a personal daemon's socket only in a folder of mode 0700
    // (galley::CheckUserSocketFolder): one made here is made so.
    if (created && options_.owner_only) {
      std::filesystem::permissions(path.parent_path(), std::filesystem::perms::owner_all, ec);
    }
  }
  if (std::filesystem::exists(path, ec)) {
    // A live daemon answers; a stale file from a crashed one does not.
    if (wire::Connection::ConnectUnix(path.string()).ok()) {
      return Status::ResourceExhausted("another galleyd is already serving on " + path.string());
    }
    std::filesystem::remove(path, ec);
  }
  listen_fd_.Reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listen_fd_.valid()) return Status::Internal(Errno("socket"));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.string().size() + 1);
  if (::bind(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Status::PermissionDenied(Errno("bind " + path.string()));
  }
  // Who may connect: the socket file's group and mode (socket_group,
  // socket_mode). Each job's memory is readable only by its owner.
  if (Status s = SetSocketAccess(path.string(), options_.socket_group, options_.socket_mode);
      !s.ok()) {
    std::filesystem::remove(path, ec);
    return s;
  }
  if (::listen(listen_fd_.get(), 128) != 0) return Status::Internal(Errno("listen"));
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Status::Internal(Errno("pipe"));
  wake_read_.Reset(pipe_fds[0]);
  wake_write_.Reset(pipe_fds[1]);
  accept_thread_ = std::thread([this] {
    // Thread boundary: nothing may escape into std::terminate.
    while (!stopping_.load()) {
      try {
        AcceptLoop();
      } catch (const std::exception& e) {
        spdlog::error("control socket: {} (still accepting)", e.what());
      } catch (...) {
        spdlog::error("control socket: unknown exception (still accepting)");
      }
    }
  });
  spdlog::info("galleyd listening on {}", path.string());
  return Status::Ok();
}

void ControlServer::Stop(const Status& reason) {
  if (stopping_.exchange(true)) return;
  if (wake_write_.valid()) {
    const char byte = 1;
    (void)!::write(wake_write_.get(), &byte, 1);
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  jobs_->CloseAll(reason);
  {
    MutexLock lock(&mu_);
    for (auto& session : sessions_) {
      // Tell the client why before the connection drops, but never wait for
      // a peer that leaves its replies unread: shutdown stays bounded.
      (void)session.connection->TrySendFrame(wire::MessageType::kError, 0,
                                             wire::DumpJson(wire::ErrorToJson(reason)));
      session.connection->Shutdown();
    }
  }
  // Threads finish on their own once their connection is shut down.
  std::list<Session> sessions;
  {
    MutexLock lock(&mu_);
    sessions.swap(sessions_);
  }
  for (auto& session : sessions) {
    if (session.thread.joinable()) session.thread.join();
  }
  std::error_code ec;
  if (listen_fd_.valid()) std::filesystem::remove(options_.socket_path, ec);
}

void ControlServer::ReapFinishedSessions() {
  std::list<Session> finished;
  {
    MutexLock lock(&mu_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      auto next = std::next(it);
      if (it->done.load()) finished.splice(finished.end(), sessions_, it);
      it = next;
    }
  }
  for (auto& session : finished) {
    if (session.thread.joinable()) session.thread.join();
  }
}

void ControlServer::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd fds[2] = {{listen_fd_.get(), POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
    if (::poll(fds, 2, 1000) < 0 && errno != EINTR) {
      spdlog::error("poll on the control socket failed: {}", ErrnoText(errno));
      continue;
    }
    ReapFinishedSessions();
    if (fds[1].revents != 0 || stopping_.load()) break;
    if ((fds[0].revents & POLLIN) == 0) continue;
    UniqueFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (const int error = errno; IsOutOfDescriptors(error)) {
        // The connection stays queued and the socket readable: wait for a
        // descriptor to be freed (or for Stop) instead of spinning.
        CountOutOfDescriptors();
        uint64_t dropped = 0;
        if (exhaustion_log_.Allow(LogThrottle::Clock::now(), &dropped)) {
          spdlog::error(
              "cannot accept a connection: galleyd is out of file descriptors ({}); raise its "
              "limit (LimitNOFILE) or lower max_open_shards_total",
              ErrnoText(error));
        }
        pollfd wake{wake_read_.get(), POLLIN, 0};
        (void)::poll(&wake, 1, 100);
      }
      continue;
    }
    auto connection = std::make_unique<wire::Connection>(std::move(fd));
    connection->SetFrameBudget(&frame_budget_);
    auto peer = connection->Peer();
    if (!peer.ok()) continue;
    const uint32_t max_sessions = jobs_->limits().max_jobs + kExtraConnections;
    if (Status admitted = jobs_->AdmitConnection(peer->uid); !admitted.ok()) {
      (void)connection->TrySendFrame(wire::MessageType::kError, 0,
                                     wire::DumpJson(wire::ErrorToJson(admitted)));
      continue;
    }
    MutexLock lock(&mu_);
    if (sessions_.size() >= max_sessions) {
      jobs_->ReleaseConnection(peer->uid);
      (void)connection->TrySendFrame(
          wire::MessageType::kError, 0,
          wire::DumpJson(wire::ErrorToJson(Status::ResourceExhausted(
              "galleyd has too many connections (limit max_jobs + " +
              std::to_string(kExtraConnections) + " = " + std::to_string(max_sessions) + ")"))));
      continue;
    }
    Session& session = sessions_.emplace_back();
    session.uid = peer->uid;
    session.connection = std::move(connection);
    session.thread = std::thread([this, &session] {
      // Thread boundary: whatever a peer provokes ends this connection only.
      try {
        Serve(&session);
      } catch (const std::exception& e) {
        spdlog::error("closing a connection after an internal error: {}", e.what());
      } catch (...) {
        spdlog::error("closing a connection after an unknown internal error");
      }
      session.connection->Shutdown();
      Uncount(&session);
      session.done = true;
    });
  }
}

void ControlServer::Serve(Session* session) {
  wire::Connection& connection = *session->connection;
  auto finish = [&](const Status& status) {
    if (!status.ok() && status.code() != StatusCode::kUnavailable) {
      if (status.code() == StatusCode::kProtocolError) protocol_errors_++;
      spdlog::warn("closing a connection: {}", status.ToString());
      Uncount(session);
      SendError(connection, 0, status);
    }
    connection.Shutdown();
    session->done = true;
  };
  auto peer = connection.Peer();
  if (!peer.ok()) return finish(peer.status());
  if (options_.owner_only && peer->uid != ::geteuid()) {
    return finish(Status::PermissionDenied(
        "this galleyd is a personal daemon of uid " + std::to_string(::geteuid()) +
        " and serves no other user (you are uid " + std::to_string(peer->uid) +
        "); start your own, or use the node's service"));
  }

  auto hello = connection.ReadFrame(Clock::now() + kHandshakeTimeout);
  if (!hello.ok()) return finish(hello.status());
  if (hello->header.type != wire::MessageType::kHello) {
    return finish(Status::ProtocolError("expected Hello, got " +
                                        std::string(wire::MessageTypeName(hello->header.type))));
  }
  auto hello_body = wire::ParseObject(hello->payload);
  if (!hello_body.ok()) return finish(Status::ProtocolError(hello_body.status().message()));
  if (Status s = SendJson(connection, wire::MessageType::kWelcome, hello->header.request_id,
                          {{"protocol_version", wire::kProtocolVersion},
                           {"server_version", kVersion},
                           {"pid", static_cast<int64_t>(::getpid())}});
      !s.ok()) {
    return finish(s);
  }

  MessagePacer queries(kRequestRate, kRequestBurst);
  while (!stopping_.load()) {
    auto frame = connection.ReadFrame(Clock::now() + kIdleQueryTimeout);
    if (!frame.ok()) return finish(frame.status());
    if (frame->header.type == wire::MessageType::kQuery &&
        !queries.Take(stopping_, connection.fd())) {
      return finish(Status::Ok());  // the peer hung up
    }
    const uint32_t request_id = frame->header.request_id;
    switch (frame->header.type) {
      case wire::MessageType::kOpenJob:
        return finish(ServeJob(session, std::move(frame).value(), *peer));
      case wire::MessageType::kQuery: {
        auto body = wire::ParseObject(frame->payload);
        if (!body.ok()) return finish(Status::ProtocolError(body.status().message()));
        auto reply = Request(*body, *peer, connection.fd());
        if (!reply.ok()) {
          SendError(connection, request_id, reply.status());
          continue;
        }
        if (Status s = SendJson(connection, wire::MessageType::kQueryReply, request_id, *reply);
            !s.ok()) {
          return finish(s);
        }
        continue;
      }
      default:
        return finish(Status::ProtocolError("unexpected " +
                                            std::string(wire::MessageTypeName(frame->header.type)) +
                                            " on a connection without a job"));
    }
  }
  finish(Status::Ok());
}

void ControlServer::Uncount(Session* session) {
  if (session->counted.exchange(false)) jobs_->ReleaseConnection(session->uid);
}

Status ControlServer::ServeJob(Session* session, wire::Frame open_frame,
                               const wire::PeerCredentials& peer) {
  wire::Connection& connection = *session->connection;
  const uint32_t open_id = open_frame.header.request_id;
  auto opened = OpenJob(connection, std::move(open_frame), peer);
  if (!opened.ok()) {
    spdlog::info("refused a job from pid {}: {}", peer.pid, opened.status().ToString());
    Uncount(session);
    SendError(connection, open_id, opened.status());
    return Status::Ok();  // answered; the connection closes quietly
  }
  const std::shared_ptr<ServedJob> job = *opened;
  if (const Status sent = SendJobOpened(connection, open_id, *job); !sent.ok()) {
    jobs_->Close(job->id, sent);
    return Status::Ok();
  }
  const JobPlan& plan = *job->plan;
  spdlog::info("job {} ({}) opened by uid {} pid {}: {} items/epoch, batch {}, policy {}", job->id,
               plan.spec.name, peer.uid, peer.pid, plan.epoch_size, plan.spec.batch_size,
               plan.policy);
  const Status ending = ServeJobRequests(connection, *job);
  jobs_->Close(job->id, ending);
  return ending.code() == StatusCode::kProtocolError ? ending : Status::Ok();
}

Result<std::shared_ptr<ServedJob>> ControlServer::OpenJob(wire::Connection& connection,
                                                          wire::Frame open_frame,
                                                          const wire::PeerCredentials& peer) {
  const bool large = open_frame.payload.size() > wire::FrameBudget::kFreeBytes;
  auto spec = ParseOpenJob(open_frame.payload);
  // The request's text and document are not needed for the job's life: a
  // large one (a long list of ids), accepted or refused, goes back to the
  // budget and to the system (glibc keeps freed heap otherwise) before the
  // reply. Moved out, not assigned over: assigning an empty string keeps
  // the old buffer.
  { const wire::Frame released = std::move(open_frame); }
  if (large) ::malloc_trim(0);
  if (!spec.ok()) return spec.status();
  // How a cancel reaches the client: the reason, then the connection
  // closes, which ends this thread's read loop.
  auto cancel = [&connection](const Status& why) {
    (void)connection.TrySendFrame(wire::MessageType::kError, 0,
                                  wire::DumpJson(wire::ErrorToJson(why)));
    connection.Shutdown();
  };
  // A listing the open needs stops when galleyd stops or the client leaves.
  ListingStop stop(&stopping_, connection.fd());
  return jobs_->Open(*spec, peer, cancel, &stop);
}

Status ControlServer::ServeJobRequests(wire::Connection& connection, ServedJob& job) {
  MessagePacer releases(kReleaseRate, kReleaseBurst), requests(kRequestRate, kRequestBurst);
  while (true) {
    auto frame = connection.ReadFrame();
    if (frame.ok() &&
        !(frame->header.type == wire::MessageType::kSlotReleased ? releases : requests)
             .Take(stopping_, connection.fd())) {
      return Status::Cancelled("the client disconnected");
    }
    if (!frame.ok()) {
      return frame.status().code() == StatusCode::kUnavailable
                 ? Status::Cancelled("the client disconnected")
                 : frame.status();
    }
    const uint32_t request_id = frame->header.request_id;
    auto req = wire::ParseObject(frame->payload);
    if (!req.ok()) return Status::ProtocolError(req.status().message());
    switch (frame->header.type) {
      case wire::MessageType::kSlotReleased:
        jobs_->SlotReleased(job.id);
        break;
      case wire::MessageType::kConsumerReady:
        jobs_->ConsumerReady(job.id);
        break;
      case wire::MessageType::kSeekEpoch:
        AnswerSeekEpoch(connection, request_id, job, *req);
        break;
      case wire::MessageType::kStatsRequest:
        AnswerStats(connection, request_id, job);
        break;
      case wire::MessageType::kCloseJob:
        return Status::Cancelled("the job was closed");
      case wire::MessageType::kRefreshCredentials:
        RefreshCredentials(job, *req);
        break;
      default:
        return Status::ProtocolError("unexpected " +
                                     std::string(wire::MessageTypeName(frame->header.type)) +
                                     " on a job connection");
    }
  }
}

void ControlServer::RefreshCredentials(ServedJob& job, const json& body) {
  const JobSpec& spec = job.plan->spec;
  Status refused = Status::Ok();
  auto field = body.find("s3");
  Result<ObjectStoreAccess> access = Status::InvalidArgument("RefreshCredentials needs 's3'");
  if (field != body.end()) access = wire::ObjectStoreAccessFromJson(*field, "s3");
  if (!access.ok()) {
    refused = access.status();
  } else if (!spec.s3) {
    refused = Status::InvalidArgument("the job reads no object storage");
  } else if (access->endpoint_url != spec.s3->endpoint_url || access->region != spec.s3->region ||
             access->path_style != spec.s3->path_style) {
    refused = Status::InvalidArgument(
        "a refresh replaces the credentials only; the endpoint, region and addressing are "
        "the job's (open a new job to read from another)");
  } else {
    // The same check as a job's open: every shard HEADed with them, each
    // the listed version. Only then may the set's reads carry them.
    bool changed = false;
    refused = job.plan->dataset->VerifyObjects(ObjectAccessFor(*access), &changed);
    if (refused.ok() && changed) {
      refused = Status::DataLoss(
          "the dataset's objects changed since it was listed; the job keeps its credentials, "
          "and the next job lists the set again");
    }
  }
  if (refused.ok()) {
    job.counters.credential_refreshes.fetch_add(1, std::memory_order_relaxed);
    spdlog::info("job {}: S3 credentials refreshed", job.id);
  } else {
    job.counters.credential_refreshes_refused.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("job {}: refreshed S3 credentials refused, the job keeps its own: {}", job.id,
                 refused.ToString());
  }
}

void ControlServer::AnswerSeekEpoch(wire::Connection& connection, uint32_t request_id,
                                    const ServedJob& job, const json& body) {
  auto seek = ParseSeekEpoch(body);
  if (!seek.ok()) {
    SendError(connection, request_id, seek.status());
    return;
  }
  auto generation = jobs_->Seek(job.id, seek->epoch, seek->items ? &*seek->items : nullptr);
  if (!generation.ok()) {
    SendError(connection, request_id, generation.status());
    return;
  }
  (void)SendJson(connection, wire::MessageType::kEpochSought, request_id,
                 {{"epoch", seek->epoch}, {"generation", *generation}});
}

void ControlServer::AnswerStats(wire::Connection& connection, uint32_t request_id,
                                const ServedJob& job) const {
  // The job's own sampler groups only: others name other users' data.
  JobStatsSnapshot stats{job.Snapshot(), scheduler_->Snapshot(), pipeline_->Snapshot()};
  std::erase_if(stats.samplers, [&](const SamplerGroupSnapshot& group) {
    return group.dataset != job.plan->dataset->root().string();
  });
  (void)SendJson(connection, wire::MessageType::kStats, request_id, stats);
}

Result<JobSpec> ControlServer::ParseOpenJob(std::string_view payload) {
  if (payload.size() <= wire::FrameBudget::kFreeBytes) {
    GALLEY_ASSIGN_OR_RETURN(const json body, wire::ParseObject(payload));
    return wire::JobSpecFromJson(body);
  }
  // Measured here, by a scan that allocates nothing (a body that would
  // cost too much is refused without being parsed), then parsed on the
  // parser's thread.
  GALLEY_RETURN_IF_ERROR(wire::MeasureJson(payload).status());
  return request_parser_.ParseJobSpec(payload);
}

MetricsSnapshot ControlServer::Metrics() const {
  return {StatusFor(Myself(), true), JobsFor(Myself(), true).jobs, Cache()};
}

uint64_t ControlServer::open_jobs() const { return jobs_->counters().jobs; }

Result<json> ControlServer::Request(const json& body, const wire::PeerCredentials& peer,
                                    int peer_fd) {
  auto what = body.find("what");
  if (what == body.end() || !what->is_string()) {
    return Status::InvalidArgument("a request needs 'what'");
  }
  const std::string name = what->get<std::string>();
  if (name == "cancel") {
    auto id = body.find("job");
    if (id == body.end() || !id->is_number_unsigned()) {
      return Status::InvalidArgument("cancel needs 'job', a job id");
    }
    GALLEY_RETURN_IF_ERROR(jobs_->Cancel(id->get<uint64_t>(), peer));
    return json{{"cancelled", id->get<uint64_t>()}};
  }
  if (name == "drain") {
    GALLEY_RETURN_IF_ERROR(jobs_->Drain(peer));
    return json{{"draining", true}, {"jobs", jobs_->counters().jobs}};
  }
  if (name == "forget") {
    auto dataset = body.find("dataset");
    if (dataset == body.end() || !dataset->is_string()) {
      return Status::InvalidArgument("forget needs 'dataset', a dataset path");
    }
    std::optional<AccessChecker> checker;
    DatasetRegistry::Forgetter by;
    if (!jobs_->IsAdmin(peer)) {
      by.checker = &checker.emplace(Credentials{peer.uid, peer.gid, peer.groups});
      by.uid = peer.uid;
      for (const auto& job : jobs_->Jobs(peer.uid, /*all=*/false)) {
        by.reading.push_back(job->plan->dataset->root());
      }
    }
    GALLEY_RETURN_IF_ERROR(datasets_->Forget(dataset->get<std::string>(), by));
    return json{{"forgotten", dataset->get<std::string>()}};
  }
  if (name == "listing") {
    uint64_t begin = 0, count = 0;
    GALLEY_ASSIGN_OR_RETURN(JobSpec spec, wire::ListingRequestFromJson(body, &begin, &count));
    // Checked as a job over the whole dataset is: the peer learns the names
    // of items it may read, and nothing else.
    const Credentials who{peer.uid, peer.gid, peer.groups};
    ListingStop stop(&stopping_, peer_fd);
    GALLEY_ASSIGN_OR_RETURN(
        auto opened,
        datasets_->Open(
            spec, who, [](const Dataset& dataset) { return dataset.Select({}); }, &stop));
    return ListingPage(*opened.dataset, begin, count);
  }
  return QueryAs(name, peer, jobs_->IsAdmin(peer));
}

Result<json> ControlServer::QueryAs(const std::string& what, const wire::PeerCredentials& peer,
                                    bool admin) const {
  if (what == "status") return json(StatusFor(peer, admin));
  if (what == "datasets") return json(DatasetsFor(peer, admin));
  if (what == "jobs") return json(JobsFor(peer, admin));
  // Node-wide figures with no paths in them: anyone may see them.
  if (what == "cache") {
    const std::optional<CacheSnapshot> cache = Cache();
    return cache ? json(*cache) : CachingOffJson();
  }
  if (what == "plan") {
    return cache_planner_ != nullptr ? json(cache_planner_->Snapshot()) : CachingOffJson();
  }
  return Status::InvalidArgument("unknown request '" + what +
                                 "' (status, datasets, jobs, cache, plan, listing, cancel, drain, "
                                 "forget)");
}

DaemonStatusSnapshot ControlServer::StatusFor(const wire::PeerCredentials& peer, bool admin) const {
  const JobManagerCounters counters = jobs_->counters();
  const JobLimits limits = jobs_->limits();
  DaemonStatusSnapshot s;
  s.version = kVersion;
  s.protocol_version = wire::kProtocolVersion;
  s.uid = static_cast<int64_t>(::geteuid());
  s.owner_only = options_.owner_only;
  s.admin = admin;
  s.pid = static_cast<int64_t>(::getpid());
  s.socket = options_.socket_path;
  s.uptime_seconds = std::chrono::duration<double>(Clock::now() - started_).count();
  s.jobs = counters.jobs;
  s.your_jobs = jobs_->Jobs(peer.uid, admin).size();
  s.jobs_opened = counters.jobs_opened;
  s.jobs_refused = counters.jobs_refused;
  s.draining = counters.draining;
  s.protocol_errors = protocol_errors_.load();
  s.batches = scheduler_->Totals();
  s.datasets = datasets_->size();
  s.shm_bytes = counters.shm_bytes;
  s.limits = {limits.max_jobs,          limits.max_shm_per_job, limits.max_shm_total,
              limits.max_jobs_per_uid,  limits.max_shm_per_uid, limits.max_connections_per_uid,
              limits.max_memory_per_uid};
  s.your_memory_bytes = jobs_->MemoryHeld(peer.uid);
  const DescriptorUsage usage = CurrentDescriptorUsage();
  const ShardDescriptorCounts shards = datasets_->ShardDescriptors();
  s.descriptors = {usage.open,
                   usage.limit,
                   shards.open,
                   shards.capacity,
                   shards.evicted,
                   shards.released,
                   DescriptorExhaustions()};
  s.pipeline = pipeline_->Snapshot();
  s.samplers = DatasetVisibility(peer, admin).Visible(scheduler_->Snapshot());
  s.object_store = datasets_->ObjectStoreCounts();
  return s;
}

DatasetsSnapshot ControlServer::DatasetsFor(const wire::PeerCredentials& peer, bool admin) const {
  DatasetVisibility visibility(peer, admin);
  DatasetsSnapshot s;
  s.datasets = datasets_->Snapshot();
  std::erase_if(s.datasets, [&](const DatasetSnapshot& d) { return !visibility.MaySee(d.root); });
  s.indexing = SnapshotIndexing();
  std::erase_if(s.indexing, [&](const IndexingSnapshot& i) { return !visibility.MaySee(i.path); });
  s.samplers = visibility.Visible(scheduler_->Snapshot());
  return s;
}

JobsSnapshot ControlServer::JobsFor(const wire::PeerCredentials& peer, bool admin) const {
  JobsSnapshot s;
  for (const auto& job : jobs_->Jobs(peer.uid, admin)) s.jobs.push_back(job->Snapshot());
  return s;
}

std::optional<CacheSnapshot> ControlServer::Cache() const {
  if (cache_planner_ == nullptr) return std::nullopt;
  CacheSnapshot cache = cache_planner_->SnapshotCache();
  cache.pipeline = pipeline_->Snapshot();
  return cache;
}

}  // namespace galley
