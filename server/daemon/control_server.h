// ControlServer: galleyd's Unix-socket front door.
//
// Accepts connections on the control socket and serves each on a thread of
// its own: handshake, then either one job (OpenJob; the connection then
// lives as long as the job and its close is how the daemon learns the
// client died) or queries. Every frame is validated; a bad one is answered
// with an Error and the connection is closed. Nothing a peer sends can stop
// the daemon.
//
// Start/Stop from the main thread; everything else is internal.
//
// Lock order: mu_ is a leaf with respect to this class (no method that
// holds it calls another that takes it; helpers named *Locked expect it
// held); under it only the scheduler's and pipeline's Describe() may be
// called, which take their own locks and never call back.
#ifndef GALLEY_SERVER_DAEMON_CONTROL_SERVER_H_
#define GALLEY_SERVER_DAEMON_CONTROL_SERVER_H_

#include <atomic>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "server/daemon/cache_planner.h"
#include "server/daemon/daemon_options.h"
#include "server/daemon/item_pipeline.h"
#include "server/daemon/scheduler.h"
#include "wire/connection.h"

namespace galley {

class ControlServer {
 public:
  // `cache_planner` may be null (caching disabled); it answers the "cache"
  // and "plan" queries and must outlive the server.
  ControlServer(const DaemonOptions& options, Scheduler* scheduler, ItemPipeline* pipeline,
                const CachePlanner* cache_planner = nullptr);
  ~ControlServer();

  // Binds the socket (creating its directory, replacing a stale socket file
  // but refusing one a live daemon answers on).
  Status Start();
  // Ends every job with `reason`, closes all connections, joins threads.
  void Stop(const Status& reason);
  // SIGHUP: from now on admission and job creation use `updated`'s limits,
  // allowed roots and default policies (DaemonOptions' reloadable keys;
  // the caller leaves the others as they were). Running jobs keep going,
  // even over a lowered limit. Main thread.
  Status Reload(const DaemonOptions& updated);

  nlohmann::json Query(const std::string& what) const;

 private:
  struct Session {
    std::unique_ptr<wire::Connection> connection;
    uid_t uid = 0;  // the peer's, from SO_PEERCRED at accept
    std::thread thread;
    std::atomic<bool> done{false};
  };
  // What one user holds now, for the per-uid limits.
  struct UidUsage {
    uint32_t connections = 0;
    uint32_t jobs = 0;
    uint64_t shm_bytes = 0;
  };
  // A job's place in the daemon's limits, taken in one step under mu_ by
  // Admit and given back by Release: the checks and the counts never race.
  struct Admission {
    uid_t uid = 0;
    uint64_t shm_bytes = 0;
    std::pair<const Dataset*, std::string> sampler;  // the sampler group it joins
  };

  void AcceptLoop();
  void Serve(Session* session);
  Status ServeJob(wire::Connection& connection, const wire::Frame& open_frame,
                  const wire::PeerCredentials& peer);
  // On success `admission` holds the job's place in the limits; the caller
  // gives it back with Release when the job ends.
  Result<std::shared_ptr<ServedJob>> CreateJob(const JobSpec& spec,
                                               const wire::PeerCredentials& peer,
                                               Admission* admission);
  // The job's dataset: shared with other jobs whose source resolves to the
  // same files (and keys); opened, or re-opened when stale, otherwise.
  Result<std::shared_ptr<const Dataset>> OpenDataset(const JobSpec& spec);
  void ReapFinishedSessions();
  Status Admit(const Admission& admission);  // takes mu_
  void Release(const Admission& admission);  // takes mu_
  uint32_t JobsPerUid() const;               // expects mu_ held
  uint64_t ShmPerUid() const;                // expects mu_ held
  uint32_t ConnectionsPerUid() const;        // expects mu_ held
  DaemonOptions Settings() const;            // takes mu_: a copy of settings_

  const DaemonOptions options_;  // as started; keys SIGHUP may change are read from settings_
  Scheduler* const scheduler_;
  ItemPipeline* const pipeline_;
  const CachePlanner* const cache_planner_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();

  wire::UniqueFd listen_fd_;
  wire::UniqueFd wake_read_, wake_write_;  // wakes AcceptLoop on Stop
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};

  mutable std::mutex mu_;
  DaemonOptions settings_;                                                 // GUARDED_BY(mu_)
  std::list<Session> sessions_;                                            // GUARDED_BY(mu_)
  std::map<uint64_t, std::shared_ptr<ServedJob>> jobs_;                    // GUARDED_BY(mu_)
  std::map<std::string, std::shared_ptr<const Dataset>> datasets_;         // GUARDED_BY(mu_)
  uint64_t next_job_id_ = 1;                                               // GUARDED_BY(mu_)
  uint64_t shm_in_use_ = 0;                                                // GUARDED_BY(mu_)
  uint32_t admitted_jobs_ = 0;                                             // GUARDED_BY(mu_)
  std::map<uid_t, UidUsage> uid_usage_;                                    // GUARDED_BY(mu_)
  std::map<std::pair<const Dataset*, std::string>, size_t> sampler_jobs_;  // GUARDED_BY(mu_)
  uint64_t protocol_errors_ = 0;                                           // GUARDED_BY(mu_)
  uint64_t jobs_opened_ = 0;                                               // GUARDED_BY(mu_)
  uint64_t jobs_refused_ = 0;                                              // GUARDED_BY(mu_)
};

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_CONTROL_SERVER_H_
