#include "server/daemon/control_server.h"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "galley/version.h"
#include "server/daemon/shard_datasets.h"
#include "server/daemon/socket_access.h"
#include "server/image/decoder.h"
#include "server/sampler/sampling_policy.h"
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

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

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
  // one is available.
  void Take(const std::atomic<bool>& stopping) {
    while (true) {
      const auto now = Clock::now();
      tokens_ =
          std::min(burst_, tokens_ + rate_ * std::chrono::duration<double>(now - last_).count());
      last_ = now;
      if (tokens_ >= 1.0 || stopping.load()) break;
      const double wait_s = std::min(0.05, (1.0 - tokens_) / rate_);
      std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    }
    tokens_ -= 1.0;
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

}  // namespace

ControlServer::ControlServer(const DaemonOptions& options, Scheduler* scheduler,
                             ItemPipeline* pipeline, const CachePlanner* cache_planner)
    : options_(options),
      scheduler_(scheduler),
      pipeline_(pipeline),
      cache_planner_(cache_planner),
      settings_(options) {}

ControlServer::~ControlServer() { Stop(Status::Cancelled("galleyd is shutting down")); }

Status ControlServer::Start() {
  const std::filesystem::path path(options_.socket_path);
  sockaddr_un addr{};
  if (path.string().size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument("socket path too long: " + path.string());
  }
  std::error_code ec;
  if (path.has_parent_path()) {
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec)
      return Status::PermissionDenied("cannot create " + path.parent_path().string() + ": " +
                                      ec.message());
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
  {
    std::lock_guard lock(mu_);
    for (auto& [id, job] : jobs_) job->ring->Close(reason);
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
    std::lock_guard lock(mu_);
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
    std::lock_guard lock(mu_);
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
      spdlog::error("poll on the control socket failed: {}", std::strerror(errno));
      continue;
    }
    ReapFinishedSessions();
    if (fds[1].revents != 0 || stopping_.load()) break;
    if ((fds[0].revents & POLLIN) == 0) continue;
    wire::UniqueFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd.valid()) continue;
    auto connection = std::make_unique<wire::Connection>(std::move(fd));
    auto peer = connection->Peer();
    if (!peer.ok()) continue;
    std::lock_guard lock(mu_);
    if (sessions_.size() >= settings_.max_jobs + kExtraConnections) {
      (void)connection->TrySendFrame(
          wire::MessageType::kError, 0,
          wire::DumpJson(wire::ErrorToJson(Status::ResourceExhausted(
              "galleyd has too many connections (limit max_jobs + " +
              std::to_string(kExtraConnections) + " = " +
              std::to_string(settings_.max_jobs + kExtraConnections) + ")"))));
      continue;
    }
    UidUsage& usage = uid_usage_[peer->uid];
    if (usage.connections >= ConnectionsPerUid()) {
      (void)connection->TrySendFrame(
          wire::MessageType::kError, 0,
          wire::DumpJson(wire::ErrorToJson(Status::ResourceExhausted(
              "uid " + std::to_string(peer->uid) + " has " + std::to_string(usage.connections) +
              " connections open, the limit max_connections_per_uid (" +
              std::to_string(ConnectionsPerUid()) + ")"))));
      continue;
    }
    usage.connections++;
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
      {
        std::lock_guard lock(mu_);
        uid_usage_[session.uid].connections--;
      }
      session.done = true;
    });
  }
}

void ControlServer::Serve(Session* session) {
  wire::Connection& connection = *session->connection;
  auto finish = [&](const Status& status) {
    if (!status.ok() && status.code() != StatusCode::kUnavailable) {
      if (status.code() == StatusCode::kProtocolError) {
        std::lock_guard lock(mu_);
        protocol_errors_++;
      }
      spdlog::warn("closing a connection: {}", status.ToString());
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
    if (frame->header.type == wire::MessageType::kQuery) queries.Take(stopping_);
    const uint32_t request_id = frame->header.request_id;
    switch (frame->header.type) {
      case wire::MessageType::kOpenJob:
        return finish(ServeJob(connection, *frame, *peer));
      case wire::MessageType::kQuery: {
        auto body = wire::ParseObject(frame->payload);
        if (!body.ok()) return finish(Status::ProtocolError(body.status().message()));
        auto what = body->find("what");
        if (what == body->end() || !what->is_string()) {
          SendError(connection, request_id, Status::InvalidArgument("Query needs 'what'"));
          continue;
        }
        json reply = Query(what->get<std::string>());
        if (reply.contains("error")) {
          SendError(connection, request_id,
                    Status::InvalidArgument(reply["error"].get<std::string>()));
          continue;
        }
        if (Status s = SendJson(connection, wire::MessageType::kQueryReply, request_id, reply);
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

uint32_t ControlServer::JobsPerUid() const {
  return settings_.max_jobs_per_uid != 0 ? settings_.max_jobs_per_uid : settings_.max_jobs;
}
uint64_t ControlServer::ShmPerUid() const {
  return settings_.max_shm_per_uid != 0 ? settings_.max_shm_per_uid : settings_.max_shm_total;
}
uint32_t ControlServer::ConnectionsPerUid() const {
  return settings_.max_connections_per_uid != 0 ? settings_.max_connections_per_uid
                                                : JobsPerUid() + 8;
}

DaemonOptions ControlServer::Settings() const {
  std::lock_guard lock(mu_);
  return settings_;
}

Status ControlServer::Reload(const DaemonOptions& updated) {
  std::lock_guard lock(mu_);
  if (updated.allowed_roots != settings_.allowed_roots) {
    // Opened datasets were checked against the old roots: the next job on
    // each opens (and checks) it again. Running jobs keep theirs.
    datasets_.clear();
  }
  settings_ = updated;
  return Status::Ok();
}

Status ControlServer::Admit(const Admission& a) {
  std::lock_guard lock(mu_);
  UidUsage& usage = uid_usage_[a.uid];
  const std::string uid = "uid " + std::to_string(a.uid);
  if (admitted_jobs_ >= settings_.max_jobs) {
    return Status::ResourceExhausted("galleyd already serves " + std::to_string(admitted_jobs_) +
                                     " jobs, the limit max_jobs (" +
                                     std::to_string(settings_.max_jobs) + ")");
  }
  if (usage.jobs >= JobsPerUid()) {
    return Status::ResourceExhausted(uid + " already has " + std::to_string(usage.jobs) +
                                     " jobs, the limit max_jobs_per_uid (" +
                                     std::to_string(JobsPerUid()) + ")");
  }
  const size_t sharing = sampler_jobs_[a.sampler];
  if (sharing >= kMaxJobsPerDataset) {
    return Status::ResourceExhausted(
        std::to_string(sharing) + " jobs already read this dataset with policy '" +
        a.sampler.second + "', the most one sampler tracks (" + std::to_string(kMaxJobsPerDataset) +
        "); use another policy or wait for one to end");
  }
  if (shm_in_use_ + a.shm_bytes > settings_.max_shm_total) {
    return Status::ResourceExhausted("the job needs " + std::to_string(a.shm_bytes) +
                                     " bytes of shared memory and " + std::to_string(shm_in_use_) +
                                     " are in use, over the limit max_shm_total (" +
                                     std::to_string(settings_.max_shm_total) + ")");
  }
  if (usage.shm_bytes + a.shm_bytes > ShmPerUid()) {
    return Status::ResourceExhausted(uid + " would hold " +
                                     std::to_string(usage.shm_bytes + a.shm_bytes) +
                                     " bytes of shared memory, over the limit max_shm_per_uid (" +
                                     std::to_string(ShmPerUid()) + ")");
  }
  admitted_jobs_++;
  usage.jobs++;
  usage.shm_bytes += a.shm_bytes;
  sampler_jobs_[a.sampler]++;
  shm_in_use_ += a.shm_bytes;
  return Status::Ok();
}

void ControlServer::Release(const Admission& a) {
  std::lock_guard lock(mu_);
  UidUsage& usage = uid_usage_[a.uid];
  admitted_jobs_--;
  usage.jobs--;
  usage.shm_bytes -= a.shm_bytes;
  if (--sampler_jobs_[a.sampler] == 0) sampler_jobs_.erase(a.sampler);
  shm_in_use_ -= a.shm_bytes;
}

Result<std::shared_ptr<const Dataset>> ControlServer::OpenDataset(const JobSpec& spec) {
  const ShardOptions shard_options = ShardOptionsFor(spec, options_);
  std::string key;
  if (spec.shards.empty()) {
    std::error_code ec;
    key = std::filesystem::weakly_canonical(spec.dataset, ec).string();
    if (ec) key = spec.dataset;
  } else {
    key = Dataset::ShardSetKey(spec.shards, shard_options);
  }
  {
    std::lock_guard lock(mu_);
    if (auto it = datasets_.find(key); it != datasets_.end()) {
      // A shard replaced under running jobs: list the set again for this job.
      if (!it->second->stale()) return it->second;
      datasets_.erase(it);
    }
  }
  const std::vector<std::string> allowed_roots = Settings().allowed_roots;
  std::vector<std::filesystem::path> roots(allowed_roots.begin(), allowed_roots.end());
  GALLEY_ASSIGN_OR_RETURN(
      auto dataset, spec.shards.empty() ? Dataset::Open(spec.dataset, roots)
                                        : Dataset::OpenShards(spec.shards, shard_options, roots));
  std::lock_guard lock(mu_);
  // Two jobs may open the same dataset at once; the first one in wins so
  // both share one instance (and one sampler).
  auto [it, inserted] = datasets_.emplace(key, dataset);
  if (inserted) spdlog::info("dataset {}: {} items", dataset->root().string(), dataset->size());
  return it->second;
}

Result<std::shared_ptr<ServedJob>> ControlServer::CreateJob(const JobSpec& spec,
                                                            const wire::PeerCredentials& peer,
                                                            Admission* admission) {
  const DaemonOptions settings = Settings();
  if (spec.batch_size > settings.max_batch_size) {
    return Status::ResourceExhausted("batch_size " + std::to_string(spec.batch_size) +
                                     " exceeds the daemon's limit of " +
                                     std::to_string(settings.max_batch_size));
  }
  if (spec.prefetch > settings.max_prefetch) {
    return Status::ResourceExhausted("prefetch " + std::to_string(spec.prefetch) +
                                     " exceeds the daemon's limit of " +
                                     std::to_string(settings.max_prefetch));
  }
  auto job = std::make_shared<ServedJob>();
  job->spec = spec;
  job->owner_uid = peer.uid;
  job->owner_pid = peer.pid;
  GALLEY_ASSIGN_OR_RETURN(job->dataset, OpenDataset(spec));
  GALLEY_RETURN_IF_ERROR(CheckShardJob(*job->dataset, spec, peer.uid, peer.gid));
  // Class names travel to the client as JSON text; a folder whose name is
  // not UTF-8 (Latin-1, say) is refused here, naming it, rather than
  // renamed silently.
  for (const auto& name : job->dataset->classes()) {
    if (!wire::IsValidUtf8(name)) {
      return Status::InvalidArgument(
          "dataset " + wire::EscapeBytes(job->dataset->root().string()) + " has a class folder '" +
          wire::EscapeBytes(name) +
          "' whose name is not valid UTF-8; rename it (for example with convmv) to use it "
          "with galley");
    }
  }
  job->policy = spec.policy;
  if (!spec.shuffle) {
    // The sequential order is a policy of its own: jobs that walk it together
    // share their items.
    if (!job->policy.empty() && job->policy != "sequential") {
      return Status::InvalidArgument("policy '" + job->policy +
                                     "' decides a random order; a job with shuffle=false uses "
                                     "the sequential order (leave the policy empty)");
    }
    job->policy = "sequential";
  } else if (job->policy == "sequential") {
    return Status::InvalidArgument("policy 'sequential' needs shuffle=false");
  }
  if (job->policy.empty()) {
    auto configured = settings.dataset_policies.find(job->dataset->root().string());
    job->policy = configured != settings.dataset_policies.end() ? configured->second
                                                                : settings.default_policy;
  }

  SubsetSpec subset;
  subset.classes = spec.classes;
  for (const auto& [begin, end] : spec.id_ranges) {
    if (end > job->dataset->size()) {
      return Status::InvalidArgument("id range ends at " + std::to_string(end) +
                                     " but the dataset has " +
                                     std::to_string(job->dataset->size()) + " items");
    }
    subset.ranges.emplace_back(static_cast<ItemId>(begin), static_cast<ItemId>(end));
  }
  for (uint64_t id : spec.ids) {
    if (id >= job->dataset->size()) {
      return Status::InvalidArgument("item id " + std::to_string(id) +
                                     " is out of range (dataset has " +
                                     std::to_string(job->dataset->size()) + " items)");
    }
    subset.ids.push_back(static_cast<ItemId>(id));
  }
  GALLEY_ASSIGN_OR_RETURN(job->subset, job->dataset->Select(subset));
  const uint64_t n = job->subset.size();
  job->epoch_size = n == 0 ? 0 : job->ShardSize();
  if (job->epoch_size == 0) {
    return Status::InvalidArgument("rank " + std::to_string(spec.rank) + " of " +
                                   std::to_string(spec.world_size) +
                                   " gets no items from a subset of " + std::to_string(n));
  }

  auto transform = json::parse(spec.transform_json, nullptr, false);
  if (transform.is_discarded()) return Status::InvalidArgument("transform is not valid JSON");
  if (spec.native_size) {
    // torch's transform=None: the first image's size is the batch's; a
    // full-size CenterCrop passes same-size images through unchanged.
    if (!transform.is_object() || !transform.value("ops", json::array()).empty()) {
      return Status::InvalidArgument("native_size takes a transform without ops");
    }
    GALLEY_ASSIGN_OR_RETURN(auto bytes, job->dataset->Read(job->subset.front()));
    auto header = image::ReadHeader(bytes);
    if (!header.ok()) {
      return Status::InvalidArgument("transform=None takes the first image's size, but " +
                                     job->dataset->path(job->subset.front()).string() +
                                     " cannot be read: " + header.status().message());
    }
    transform["ops"] =
        json::array({{{"op", "CenterCrop"}, {"size", {header->height, header->width}}}});
  }
  GALLEY_ASSIGN_OR_RETURN(auto pipeline, image::TransformPipeline::FromJson(transform));
  job->pipeline = std::make_shared<const image::TransformPipeline>(std::move(pipeline));

  TensorShape shape;
  shape.height = static_cast<uint32_t>(job->pipeline->output_height());
  shape.width = static_cast<uint32_t>(job->pipeline->output_width());
  shape.dtype = job->pipeline->dtype() == image::DType::kUInt8 ? wire::ElementType::kUInt8
                                                               : wire::ElementType::kFloat32;
  shape.layout = job->pipeline->layout() == image::Layout::kNCHW ? wire::TensorLayout::kNCHW
                                                                 : wire::TensorLayout::kNHWC;
  // prefetch = batches prepared ahead of the one the consumer holds, so the
  // ring has one slot more: prefetch=1 double-buffers instead of deadlocking.
  GALLEY_ASSIGN_OR_RETURN(auto geometry, wire::ComputeGeometry(spec.prefetch + 1, spec.batch_size,
                                                               job->pipeline->sample_bytes()));
  if (geometry.segment_bytes > settings.max_shm_per_job) {
    return Status::ResourceExhausted("the job needs " + std::to_string(geometry.segment_bytes) +
                                     " bytes of shared memory ((prefetch + 1) x batch_size x "
                                     "sample size), over the per-job limit of " +
                                     std::to_string(settings.max_shm_per_job) +
                                     "; lower prefetch or batch_size");
  }
  *admission = {peer.uid, geometry.segment_bytes, {job->dataset.get(), job->policy}};
  GALLEY_RETURN_IF_ERROR(Admit(*admission));  // returned if creation fails
  {
    std::lock_guard lock(mu_);
    job->id = next_job_id_++;
  }
  auto ring = BatchRing::Create(geometry, shape, peer.uid);
  if (!ring.ok()) {
    Release(*admission);
    return ring.status();
  }
  job->ring = std::move(ring).value();
  return job;
}

Status ControlServer::ServeJob(wire::Connection& connection, const wire::Frame& open_frame,
                               const wire::PeerCredentials& peer) {
  const uint32_t open_id = open_frame.header.request_id;
  auto refuse = [&](const Status& status) {
    {
      std::lock_guard lock(mu_);
      jobs_refused_++;
    }
    spdlog::info("refused a job from pid {}: {}", peer.pid, status.ToString());
    SendError(connection, open_id, status);
    return Status::Ok();  // answered; the connection closes quietly
  };
  auto body = wire::ParseObject(open_frame.payload);
  if (!body.ok()) return refuse(body.status());
  auto spec = wire::JobSpecFromJson(*body);
  if (!spec.ok()) return refuse(spec.status());
  Admission admission;  // held from CreateJob until cleanup
  auto created = CreateJob(*spec, peer, &admission);
  if (!created.ok()) return refuse(created.status());
  std::shared_ptr<ServedJob> job = *created;
  if (Status s = scheduler_->AddJob(job); !s.ok()) {
    Release(admission);  // takes and drops mu_ before refuse() takes it
    return refuse(s);
  }
  {
    std::lock_guard lock(mu_);
    jobs_[job->id] = job;
    jobs_opened_++;
  }
  auto cleanup = [&](const Status& why) {
    scheduler_->RemoveJob(job->id);
    job->ring->Close(why);
    {
      std::lock_guard lock(mu_);
      jobs_.erase(job->id);
    }
    Release(admission);
    spdlog::info("job {} ({}) ended: {}", job->id, job->spec.name, why.ToString());
  };

  JobInfo info;
  info.job_id = job->id;
  info.dataset_size = job->dataset->size();
  info.subset_size = job->subset.size();
  info.epoch_size = job->epoch_size;
  info.batches_per_epoch = job->BatchesPerEpoch();
  info.classes = job->dataset->classes();
  info.dtype = job->pipeline->dtype() == image::DType::kUInt8 ? DType::kUInt8 : DType::kFloat32;
  info.layout = job->pipeline->layout() == image::Layout::kNCHW ? Layout::kNCHW : Layout::kNHWC;
  const int64_t h = job->pipeline->output_height(), w = job->pipeline->output_width();
  info.sample_shape =
      info.layout == Layout::kNCHW ? std::vector<int64_t>{3, h, w} : std::vector<int64_t>{h, w, 3};
  info.slots = job->ring->geometry().slot_count;
  info.segment_bytes = job->ring->geometry().segment_bytes;
  if (Status s =
          SendJson(connection, wire::MessageType::kJobOpened, open_id, wire::JobInfoToJson(info),
                   job->ring->segment_fd(), job->ring->ready_fd());
      !s.ok()) {
    cleanup(s);
    return Status::Ok();
  }
  spdlog::info("job {} ({}) opened by uid {} pid {}: {} items/epoch, batch {}, policy {}", job->id,
               job->spec.name, peer.uid, peer.pid, job->epoch_size, job->spec.batch_size,
               job->policy);

  Status ending = Status::Cancelled("the job was closed");
  MessagePacer releases(kReleaseRate, kReleaseBurst), requests(kRequestRate, kRequestBurst);
  while (true) {
    auto frame = connection.ReadFrame();
    if (frame.ok()) {
      (frame->header.type == wire::MessageType::kSlotReleased ? releases : requests)
          .Take(stopping_);
    }
    if (!frame.ok()) {
      ending = frame.status().code() == StatusCode::kUnavailable
                   ? Status::Cancelled("the client disconnected")
                   : frame.status();
      break;
    }
    const uint32_t request_id = frame->header.request_id;
    auto req = wire::ParseObject(frame->payload);
    if (!req.ok()) {
      ending = Status::ProtocolError(req.status().message());
      break;
    }
    if (frame->header.type == wire::MessageType::kSlotReleased) {
      scheduler_->Wake();
    } else if (frame->header.type == wire::MessageType::kSeekEpoch) {
      auto epoch = req->find("epoch");
      if (epoch == req->end() || !epoch->is_number_unsigned()) {
        SendError(connection, request_id, Status::InvalidArgument("SeekEpoch needs 'epoch'"));
        continue;
      }
      auto generation = scheduler_->Seek(job->id, epoch->get<uint64_t>());
      if (!generation.ok()) {
        SendError(connection, request_id, generation.status());
        continue;
      }
      (void)SendJson(connection, wire::MessageType::kEpochSought, request_id,
                     {{"epoch", epoch->get<uint64_t>()}, {"generation", *generation}});
    } else if (frame->header.type == wire::MessageType::kStatsRequest) {
      (void)SendJson(connection, wire::MessageType::kStats, request_id,
                     {{"job", job->Describe()},
                      {"samplers", scheduler_->Describe()},
                      {"pipeline", pipeline_->Describe()}});
    } else if (frame->header.type == wire::MessageType::kConsumerReady) {
      scheduler_->ConsumerReady(job->id);
    } else if (frame->header.type == wire::MessageType::kCloseJob) {
      break;
    } else {
      ending = Status::ProtocolError("unexpected " +
                                     std::string(wire::MessageTypeName(frame->header.type)) +
                                     " on a job connection");
      break;
    }
  }
  cleanup(ending);
  return ending.code() == StatusCode::kProtocolError ? ending : Status::Ok();
}

json ControlServer::Query(const std::string& what) const {
  const double uptime = std::chrono::duration<double>(Clock::now() - started_).count();
  std::lock_guard lock(mu_);
  if (what == "status") {
    return {{"version", kVersion},
            {"protocol_version", wire::kProtocolVersion},
            {"uid", static_cast<int64_t>(::geteuid())},
            {"owner_only", options_.owner_only},
            {"pid", static_cast<int64_t>(::getpid())},
            {"socket", options_.socket_path},
            {"uptime_seconds", uptime},
            {"jobs", jobs_.size()},
            {"jobs_opened", jobs_opened_},
            {"jobs_refused", jobs_refused_},
            {"protocol_errors", protocol_errors_},
            {"datasets", datasets_.size()},
            {"shm_bytes", shm_in_use_},
            {"limits",
             {{"max_jobs", settings_.max_jobs},
              {"max_shm_per_job", settings_.max_shm_per_job},
              {"max_shm_total", settings_.max_shm_total},
              {"max_jobs_per_uid", JobsPerUid()},
              {"max_shm_per_uid", ShmPerUid()},
              {"max_connections_per_uid", ConnectionsPerUid()}}},
            {"pipeline", pipeline_->Describe()},
            {"samplers", scheduler_->Describe()}};
  }
  if (what == "datasets") {
    json list = json::array();
    for (const auto& [key, dataset] : datasets_) {
      list.push_back({{"root", dataset->root().string()},
                      {"items", dataset->size()},
                      {"classes", dataset->classes().size()},
                      {"bytes", dataset->total_bytes()},
                      {"shards", DescribeShards(*dataset)}});
    }
    return {
        {"datasets", list}, {"indexing", DescribeIndexing()}, {"samplers", scheduler_->Describe()}};
  }
  if (what == "jobs") {
    json list = json::array();
    for (const auto& [id, job] : jobs_) list.push_back(job->Describe());
    return {{"jobs", list}};
  }
  if (what == "cache") {
    if (cache_planner_ == nullptr) return {{"enabled", false}, {"cache_bytes", 0}};
    json reply = cache_planner_->DescribeCache();
    const json plan = cache_planner_->Describe();
    reply["planner_inputs"] = plan["inputs"];
    const json pipeline = pipeline_->Describe();
    reply["pipeline"] = {
        {"file_reads", pipeline["file_reads"]},     {"decodes", pipeline["decodes"]},
        {"augments", pipeline["augments"]},         {"decoded_hits", pipeline["decoded_hits"]},
        {"encoded_hits", pipeline["encoded_hits"]}, {"augmented_hits", pipeline["augmented_hits"]}};
    return reply;
  }
  if (what == "plan") {
    if (cache_planner_ == nullptr) return {{"enabled", false}, {"cache_bytes", 0}};
    return cache_planner_->Describe();
  }
  return {{"error", "unknown query '" + what + "' (status, datasets, jobs, cache, plan)"}};
}

}  // namespace galley
