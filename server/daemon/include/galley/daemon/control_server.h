// ControlServer: galleyd's Unix-socket front door (the transport).
//
// Accepts connections on the control socket and serves each on a thread of
// its own: handshake, then either one job (OpenJob; the connection then
// lives as long as the job and its close is how the daemon learns the
// client died) or requests: queries (status, datasets, jobs, cache, plan)
// and the control requests cancel, drain and forget. Every frame is
// validated; a bad one is answered with an Error and the connection is
// closed. Nothing a peer sends can stop the daemon.
//
// What a job is and whether it may run is the JobManager's business, and
// so is every event of a job's connection (a seek, the consumer's first
// wait, a slot given back): the server tells the JobManager, which announces
// it to the components; it never drives the scheduler itself. Which
// datasets exist, whether they are fresh and who may read them is the
// DatasetRegistry's. Both belong to the Daemon (daemon.h), which outlives
// this server; the server hands requests to them and assembles the
// components' snapshots (snapshots.h) into the replies to queries, rendered
// by snapshot_json.h: a user sees their own jobs and the datasets they may
// read, unless they are an admin (JobManager::IsAdmin).
//
// Start/Stop from the owner's thread; everything else is internal.
//
// Lock order: mu_ (sessions only) is a leaf: nothing is called under it.
#ifndef GALLEY_SERVER_DAEMON_CONTROL_SERVER_H_
#define GALLEY_SERVER_DAEMON_CONTROL_SERVER_H_

#include <atomic>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "galley/daemon/cache_planner.h"
#include "galley/daemon/daemon_options.h"
#include "galley/daemon/dataset_registry.h"
#include "galley/daemon/item_pipeline.h"
#include "galley/daemon/job_manager.h"
#include "galley/daemon/request_parser.h"
#include "galley/daemon/scheduler.h"
#include "galley/logging/log_throttle.h"
#include "galley/mutex.h"
#include "galley/snapshots/snapshots.h"
#include "galley/unique_fd.h"
#include "wire/connection.h"

namespace galley {

// Where the control socket is and who may use it.
struct ControlServerOptions {
  std::string socket_path;
  // The socket file's group ("" keeps galleyd's) and mode.
  std::string socket_group;
  uint32_t socket_mode = 0660;
  // A personal daemon: every peer but galleyd's own uid is refused, and a
  // socket folder it creates is made 0700.
  bool owner_only = false;

  static ControlServerOptions From(const DaemonOptions& options);
};

class ControlServer {
 public:
  // Every pointer must outlive the server. `cache_planner` may be null
  // (caching disabled); it answers the "cache" and "plan" queries.
  ControlServer(const ControlServerOptions& options, JobManager* jobs, DatasetRegistry* datasets,
                const Scheduler* scheduler, ItemPipeline* pipeline,
                const CachePlanner* cache_planner = nullptr);
  ~ControlServer();

  // Binds the socket (creating its directory, replacing a stale socket file
  // but refusing one a live daemon answers on).
  Status Start();
  // Ends every job with `reason`, closes all connections, joins threads.
  void Stop(const Status& reason);

  // Everything /metrics shows, as an admin sees it.
  MetricsSnapshot Metrics() const;
  // Open jobs, every user's.
  uint64_t open_jobs() const;

 private:
  struct Session {
    std::unique_ptr<wire::Connection> connection;
    uid_t uid = 0;  // the peer's, from SO_PEERCRED at accept
    std::thread thread;
    std::atomic<bool> done{false};
    // Whether the connection still counts against its uid's limit; it stops
    // counting before its last reply, so a client that reads a refusal and
    // connects again is never refused for the connection it just lost.
    std::atomic<bool> counted{true};
  };

  void AcceptLoop();
  void Serve(Session* session);
  // Serves one job on its connection, from its OpenJob to its end, in the
  // steps below: OpenJob, JobOpened sent, ServeJobRequests, then the
  // JobManager closes it.
  Status ServeJob(Session* session, wire::Frame open_frame, const wire::PeerCredentials& peer);
  // The job an OpenJob frame asks for (JobManager::Open), or the refusal to
  // send; a cancel later sends its reason on `connection` and closes it.
  Result<std::shared_ptr<ServedJob>> OpenJob(wire::Connection& connection, wire::Frame open_frame,
                                             const wire::PeerCredentials& peer);
  // Reads the job's messages until it ends and returns why: its client
  // closed it or left, or sent what a job connection does not take (a
  // ProtocolError). Seeks, the consumer's first wait and released slots go
  // to the JobManager.
  Status ServeJobRequests(wire::Connection& connection, ServedJob& job);
  // RefreshCredentials: the job's re-resolved S3 access replaces its
  // credentials once every shard of its set is HEADed with them (as at a
  // job's open); refused, the job keeps signing with what it had. No reply:
  // the job's counters and galleyd's log say which, never the credentials.
  void RefreshCredentials(ServedJob& job, const nlohmann::json& body);
  void AnswerSeekEpoch(wire::Connection& connection, uint32_t request_id, const ServedJob& job,
                       const nlohmann::json& body);
  void AnswerStats(wire::Connection& connection, uint32_t request_id, const ServedJob& job) const;
  // An OpenJob body as a JobSpec. A large one is measured first (refused
  // when its parsed form would be too large) and parsed by request_parser_.
  Result<JobSpec> ParseOpenJob(std::string_view payload);
  // Gives back the session's place in the per-uid connection limit (once).
  void Uncount(Session* session);
  // A query or control request from `peer` on connection `peer_fd`: the
  // reply, or the error to send.
  Result<nlohmann::json> Request(const nlohmann::json& body, const wire::PeerCredentials& peer,
                                 int peer_fd);
  // A query's reply as `peer` may see it; InvalidArgument for an unknown one.
  Result<nlohmann::json> QueryAs(const std::string& what, const wire::PeerCredentials& peer,
                                 bool admin) const;
  // The snapshots behind the queries, filtered for `peer` unless `admin`.
  DaemonStatusSnapshot StatusFor(const wire::PeerCredentials& peer, bool admin) const;
  DatasetsSnapshot DatasetsFor(const wire::PeerCredentials& peer, bool admin) const;
  JobsSnapshot JobsFor(const wire::PeerCredentials& peer, bool admin) const;
  // Tier statistics with the pipeline's counters; none with caching off.
  std::optional<CacheSnapshot> Cache() const;
  void ReapFinishedSessions();

  const ControlServerOptions options_;
  JobManager* const jobs_;
  DatasetRegistry* const datasets_;
  const Scheduler* const scheduler_;  // its snapshots only
  ItemPipeline* const pipeline_;
  const CachePlanner* const cache_planner_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();

  UniqueFd listen_fd_;
  UniqueFd wake_read_, wake_write_;  // wakes AcceptLoop on Stop
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> protocol_errors_{0};
  // Accepts that found no descriptor free: logged at most once a minute.
  LogThrottle exhaustion_log_{1, std::chrono::minutes(1)};
  // Bytes of large frames all peers together may hold at once
  // (wire::FrameBudget): 16 full-size frames.
  static constexpr uint64_t kFrameBudgetBytes = uint64_t{16} * wire::kMaxPayloadBytes;
  wire::FrameBudget frame_budget_{kFrameBudgetBytes};
  // Large OpenJob bodies are parsed there, one at a time.
  RequestParser request_parser_;

  mutable Mutex mu_;
  std::list<Session> sessions_ GUARDED_BY(mu_);
};

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_CONTROL_SERVER_H_
