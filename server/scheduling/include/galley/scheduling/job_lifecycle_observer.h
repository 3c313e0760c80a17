// JobLifecycleObserver: what a component hears of a job's life from its one
// owner, the JobManager: the job opened, its client restarted it at an
// epoch (a seek), its consumer waits for its first batch, its consumer gave
// a slot of its ring back, and it closed.
//
// The Scheduler (production) and the CachePlanner (the cache's split)
// implement it; the JobManager is given them once, in order, and calls each
// in that order for every event, from the thread of the request (the job's
// connection, or whoever cancels or closes the job) and with none of its
// own locks held. An observer takes its own locks, never another
// observer's, and must not call back into the JobManager: so no observer
// is ever called under another's lock.
//
// One job's events come in order: opened, then any number of seeks,
// consumer-ready and slot releases (one at a time: they come from the job's
// connection), then closed, once. A close from another thread (a cancel,
// shutdown) may overtake an event in flight: an observer answers a seek of
// a job it no longer has with NotFound, and ignores the others.
#ifndef GALLEY_SERVER_SCHEDULING_JOB_LIFECYCLE_OBSERVER_H_
#define GALLEY_SERVER_SCHEDULING_JOB_LIFECYCLE_OBSERVER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "galley/ids.h"
#include "galley/scheduling/served_job.h"
#include "galley/status.h"

namespace galley {

// A seek as the JobManager announces it.
struct JobSeek {
  uint64_t epoch = 0;  // the job restarts at the beginning of this epoch
  // The job's count of accepted seeks, this one included (its first seek
  // makes it 1): the new epoch's batches carry it (SlotHeader::generation),
  // so the client tells them from those published before.
  uint64_t generation = 0;
  // A listed job's list of the epoch as its client sent it
  // (JobSpec::epoch_items); null for any other job. Checked by the
  // Scheduler, which owns the job's production.
  const std::vector<uint64_t>* items = nullptr;
};

class JobLifecycleObserver {
 public:
  virtual ~JobLifecycleObserver() = default;

  // `job` is admitted and its ring made; nothing was produced for it yet. A
  // refusal refuses the job, with that status: the observers before this one
  // then hear OnJobClosed, those after it nothing.
  virtual Status OnJobOpened(const std::shared_ptr<ServedJob>& job) = 0;
  // `job`'s client restarts it as `seek` says. A refusal is the seek's
  // answer: the observers after this one hear nothing of it and its
  // generation is not taken, so an observer that may refuse a seek comes
  // before any that acts on one.
  virtual Status OnJobSought(ServedJob& job, const JobSeek& seek) = 0;
  // The job's consumer waits for its first batch: production may start.
  // Only the Scheduler needs this and OnSlotReleased; they do nothing unless
  // overridden.
  virtual void OnConsumerReady(JobId /*job_id*/) {}
  // The job's consumer gave a slot of its ring back: it has room for a
  // batch again. Heard for every batch the consumer takes.
  virtual void OnSlotReleased(JobId /*job_id*/) {}
  // The job ended (closed by its client, cancelled, its client gone,
  // shutdown): heard once for each job this observer accepted, also when
  // an observer after it refused the job.
  virtual void OnJobClosed(JobId job_id) = 0;
};

}  // namespace galley

#endif  // GALLEY_SERVER_SCHEDULING_JOB_LIFECYCLE_OBSERVER_H_
