// JobManager: the daemon's open jobs, from admission to close.
//
// The one owner of a job's life cycle. Turns an OpenJob request into a
// producing ServedJob: checks the request against the limits, gets the
// job's dataset from the DatasetRegistry (which checks the peer may read
// what it is served), builds the job's JobPlan (its items, policy,
// transform and ring layout; immutable from then on), admits it, makes its
// ring and announces it. Admission is atomic: every limit (jobs, jobs and shared
// memory per uid, shared memory in all, jobs per sampler) is checked and
// taken in one step under mu_, and given back exactly once when the
// Admission that holds it is destroyed. Refusals name the limit.
//
// Every event of a job's life, its opening, its client's seeks (numbered
// here: the job's generation), its consumer's first wait and each slot it
// gives back, and its close, is announced to the JobLifecycleObservers given
// at construction (in galleyd the Scheduler, then the CachePlanner), in that
// order; no component passes them on, and the connection that carries them
// tells only the JobManager.
//
// When the last job reading a dataset ends, the dataset's open descriptors
// are closed (its listing stays for the next job).
//
// Also: cancelling a job (its owner, or an admin), draining (no new jobs;
// galleyd exits once the last one ends), limits and policies reloaded on
// SIGHUP, and what each peer may see of the jobs.
//
// Thread-safety: every method may be called from any thread. Lock order:
// mu_ is a leaf; observer and DatasetRegistry calls are made without it.
#ifndef GALLEY_SERVER_DAEMON_JOB_MANAGER_H_
#define GALLEY_SERVER_DAEMON_JOB_MANAGER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "galley/daemon/daemon_options.h"
#include "galley/daemon/dataset_registry.h"
#include "galley/job_spec.h"
#include "galley/mutex.h"
#include "galley/scheduling/job_lifecycle_observer.h"
#include "galley/scheduling/served_job.h"
#include "galley/status.h"
#include "wire/connection.h"

namespace galley {

// What SIGHUP may change about admission.
struct JobLimits {
  uint32_t max_jobs = 0;
  uint32_t max_jobs_per_uid = 0;  // resolved: never 0
  uint64_t max_shm_total = 0;
  uint64_t max_shm_per_uid = 0;  // resolved: never 0
  uint64_t max_shm_per_job = 0;
  // galleyd's own memory one user's listings and item lists may hold
  // (UserMemory); resolved: never 0.
  uint64_t max_memory_per_uid = 0;
  uint32_t max_connections_per_uid = 0;  // resolved: never 0
  uint32_t max_prefetch = 0;
  uint32_t max_batch_size = 0;
  std::string default_policy;
  std::map<std::string, std::string> dataset_policies;

  static JobLimits From(const DaemonOptions& options);
};

struct JobManagerOptions {
  JobLimits limits;
  // Members of this group see and act on every job ("" or a group the node
  // lacks: none besides root and galleyd's own user).
  std::string admin_group;

  static JobManagerOptions From(const DaemonOptions& options);
};

// Counts for status and metrics.
struct JobManagerCounters {
  uint64_t jobs = 0;
  uint64_t jobs_opened = 0;
  uint64_t jobs_refused = 0;
  uint64_t shm_bytes = 0;
  bool draining = false;
};

class JobManager {
 public:
  // Called, without any lock held, when a drain finishes (the last job
  // ended); galleyd then stops as on SIGTERM.
  using DrainedCallback = std::function<void()>;

  // `observers` hear every job's events, in this order; they, `datasets`
  // and `memory` (may be null: item lists are not charged) must outlive the
  // manager. Each job's item lists (its subset, and the lists a listed job's
  // client sends) are charged to its user in `memory`
  // (kBytesPerListedItem a listed item).
  JobManager(const JobManagerOptions& options, std::vector<JobLifecycleObserver*> observers,
             DatasetRegistry* datasets, DrainedCallback drained, UserMemory* memory = nullptr);

  // galleyd memory `uid`'s listings and item lists hold now (UserMemory).
  uint64_t MemoryHeld(uid_t uid) const { return memory_ != nullptr ? memory_->held(uid) : 0; }

  // What galleyd holds for one item of a listed epoch: the list as received
  // (8 bytes), the job's copy (4) and the scheduler's remaining set; 61 MiB
  // were measured for a job listing 2.9 million items (22 bytes an item).
  static constexpr uint64_t kBytesPerListedItem = 24;
  ~JobManager();

  // A job that is producing; `cancel` is how Cancel ends it (the caller's
  // connection sends the reason and closes). The caller must Close it.
  // `stop` (may be null) stops a listing the open needs (Cancelled).
  Result<std::shared_ptr<ServedJob>> Open(const JobSpec& spec, const wire::PeerCredentials& peer,
                                          std::function<void(const Status&)> cancel,
                                          ListingStop* stop = nullptr);
  // The job's client restarts it at the beginning of `epoch`; a listed
  // job's client sends the epoch's `items` with it. Returns the job's new
  // generation, or the refusal of an observer (the Scheduler checks the
  // seek against the job: JobLifecycleObserver::OnJobSought). A job's seeks
  // come from its connection, one at a time.
  Result<uint64_t> Seek(JobId job_id, uint64_t epoch, const std::vector<uint64_t>* items = nullptr);
  // The job's consumer waits for its first batch, or gave a slot of its ring
  // back: the observers hear it (JobLifecycleObserver::OnConsumerReady,
  // OnSlotReleased). Called by the job's connection, which holds the job
  // open; nothing is looked up or locked, as a slot comes back for every
  // batch.
  void ConsumerReady(JobId job_id) const;
  void SlotReleased(JobId job_id) const;
  // Ends the job: the observers hear it closed, its ring is closed with
  // `why`, its admission given back. Idempotent.
  void Close(uint64_t job_id, const Status& why);

  // Cancels a job of the peer's own, or any job for an admin. NotFound for
  // no such job (also for another user's, which a non-admin may not see).
  Status Cancel(uint64_t job_id, const wire::PeerCredentials& by);
  // Admins only: no new jobs from now on; galleyd exits when none is left.
  Status Drain(const wire::PeerCredentials& by);

  // Whether the peer may see and act on every job: uid 0, the daemon's own
  // uid, or a member of admin_group.
  bool IsAdmin(const wire::PeerCredentials& peer) const;

  // Limits and policies from a reloaded configuration; later requests use them.
  void Reload(const JobLimits& limits);
  JobLimits limits() const;

  // A connection's place in the per-uid connection limit; given back by
  // ReleaseConnection.
  Status AdmitConnection(uid_t uid);
  void ReleaseConnection(uid_t uid);

  // Open jobs, those of `uid` only unless `all`.
  std::vector<std::shared_ptr<ServedJob>> Jobs(uid_t uid, bool all) const;
  JobManagerCounters counters() const;
  // Ends every job with `reason` (shutdown).
  void CloseAll(const Status& reason);

 private:
  // A job's place in the limits; gives it back when destroyed.
  class Admission {
   public:
    Admission(JobManager* manager, uid_t uid, uint64_t shm_bytes,
              std::pair<const Dataset*, std::string> sampler)
        : manager_(manager), uid_(uid), shm_bytes_(shm_bytes), sampler_(std::move(sampler)) {}
    ~Admission();
    Admission(const Admission&) = delete;
    Admission& operator=(const Admission&) = delete;

   private:
    friend class JobManager;
    JobManager* manager_;
    uid_t uid_;
    uint64_t shm_bytes_;
    std::pair<const Dataset*, std::string> sampler_;
  };
  struct UidUsage {
    uint32_t connections = 0;
    uint32_t jobs = 0;
    uint64_t shm_bytes = 0;
  };
  struct Record {
    std::shared_ptr<ServedJob> job;
    std::unique_ptr<Admission> admission;
    std::function<void(const Status&)> cancel;
    uint64_t generation = 0;    // seeks the observers accepted (JobSeek::generation)
    UserMemory::Charge memory;  // the job's item lists
  };
  // The memory `job`'s item lists take, with `listed` items in its latest
  // list (a listed job).
  static uint64_t ItemListBytes(const ServedJob& job, uint64_t listed);

  // The job, its plan built and checked, not admitted yet; `shm_bytes` is
  // its ring.
  Result<std::shared_ptr<ServedJob>> Build(const JobSpec& spec, const wire::PeerCredentials& peer,
                                           const JobLimits& limits, uint64_t* shm_bytes,
                                           ListingStop* stop);
  Result<std::unique_ptr<Admission>> Admit(uid_t uid, uint64_t shm_bytes,
                                           std::pair<const Dataset*, std::string> sampler);
  void Release(const Admission& admission);  // takes mu_
  // Closes the descriptors `dataset` keeps open unless an open job reads
  // it. Takes mu_.
  void ReleaseIfUnread(const Dataset& dataset);
  Status Refused(const Status& why);  // counts the refusal
  // Tells the observers, in order, that `job` opened; on a refusal, those
  // told before hear it closed, and the refusal is returned.
  Status AnnounceOpened(const std::shared_ptr<ServedJob>& job) EXCLUDES(mu_);
  void AnnounceClosed(JobId job_id) EXCLUDES(mu_);

  const std::vector<JobLifecycleObserver*> observers_;
  DatasetRegistry* const datasets_;
  UserMemory* const memory_;
  const DrainedCallback drained_;
  gid_t admin_gid_ = static_cast<gid_t>(-1);  // none

  mutable Mutex mu_;
  JobLimits limits_ GUARDED_BY(mu_);
  std::map<JobId, Record> jobs_ GUARDED_BY(mu_);
  std::map<uid_t, UidUsage> uid_usage_ GUARDED_BY(mu_);
  std::map<std::pair<const Dataset*, std::string>, size_t> sampler_jobs_ GUARDED_BY(mu_);
  uint64_t next_job_id_ GUARDED_BY(mu_) = 1;
  uint32_t admitted_jobs_ GUARDED_BY(mu_) = 0;
  uint64_t shm_in_use_ GUARDED_BY(mu_) = 0;
  uint64_t jobs_opened_ GUARDED_BY(mu_) = 0;
  uint64_t jobs_refused_ GUARDED_BY(mu_) = 0;
  bool draining_ GUARDED_BY(mu_) = false;
};

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_JOB_MANAGER_H_
