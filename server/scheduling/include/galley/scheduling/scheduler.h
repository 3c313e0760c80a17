// Scheduler: decides which items go to which jobs and when, in waves.
//
// One thread. Each wave it claims a free ring slot for every job that has
// one, asks each dataset's SamplingPolicy for rounds until those slots'
// batches are full (a job without a free slot is masked), runs the wave's
// items through its ItemPreparer, the daemon's ItemPipeline (read + decode
// once per item, one transform per receiving job) and publishes the slots.
// It sleeps on a condition variable when no job can take a batch. When a
// wave reads a dataset of objects, the next wave is planned before it is
// prepared and handed over with it (ItemPreparer::RunBeforeNext), so the
// next wave's GETs are in flight while this one decodes
// (SchedulerOptions::plan_next_wave); the waves are the same, in the same
// order, only planned sooner.
//
// The Scheduler hears of jobs from their owner, the JobManager, as a
// JobLifecycleObserver: a job opened (OnJobOpened: it joins its dataset's
// sampler group), its client sought (OnJobSought: it restarts at an epoch),
// its consumer waits for its first batch (OnConsumerReady: production
// starts), its consumer gave a slot back (OnSlotReleased: look again), it
// closed (OnJobClosed: it is forgotten). It calls no other component on
// those events: the CachePlanner hears of them from the JobManager too.
// It reads each job's values from the job's JobPlan.
//
// With a TieredCache it also keeps the cache's demand counts exact through
// its DemandLedger: a job's epoch enters the ledger when the job enters the
// sampler for that epoch, each item leaves it as it is placed in one of the
// job's batches (while the wave is planned, so before the pipeline offers
// the item to a tier), and the rest when the job leaves the epoch, at its
// end or early (seek, close, a job that cannot go on); a next wave planned
// ahead makes its changes once the wave before it is prepared
// (DemandLedger::Defer). An "ods" group asks the
// cache, while a wave is planned, whether an item is in the encoded or
// decoded tier, and each job's epoch is registered with its spec's
// ods_fraction.
//
// Every batch holds what its position in the epoch promises
// (JobPlan::BatchTarget) and an epoch ends with its last batch, so
// batches_per_epoch is exact for every job and rank. A sample that fails in
// the pipeline (a bad file) is replaced by a substitute
// (ServedJob::Substitute, never an item known to fail) in up to four more
// pipeline passes before the wave is published. A batch that cannot keep
// that promise is never published short: when a read shows that the dataset
// changed under the job (a listed file is gone, a shard was truncated or
// replaced), or no substitute could be prepared, the job ends: its ring is
// closed with DataLoss naming the count and the first failure, which the
// client reports after the batches already published, and it produces
// nothing more (Seek returns that status). Each job's epoch enters its
// policy with the job's own seed (JobSpec seed, epoch, rank and the daemon's
// sampler_seed).
//
// When each job gets a batch is decided by a ProductionGate from the time of
// an injected SchedulerClock and the occupancy read through an injected
// RingView: jobs are not kept in step, so a slower or stalled job costs a
// faster peer at most the gate's hold budget per epoch (and none under
// "independent"); sharing between jobs of different speeds comes from the
// sampler and from the decoded tier, which keeps items that are still in
// demand. A job under dsa, dsa-chain or ods whose ring is full draws ahead in the
// wave's rounds (SchedulerOptions::draw_ahead_batches): it stays in step
// with the others, and its batches take those items later, when it is
// produced for alone or its sampler has nothing left for the batch; past
// the bound (then until its batches have taken what it drew), or ahead of
// the jobs produced for, it is masked and keeps the items it still needs.
// Once it has drawn its whole epoch it enters the next one in the sampler
// (SchedulerOptions::draw_across_epochs) and draws it in step while its
// batches finish the last; the demand ledger then holds both epochs of the
// job (docs/sampling.md §3.4). Each job's lag behind the furthest job of
// its group and its drawn-ahead count go to its JobCounters after each
// wave.
//
// A batch is prepared for a job's consumer and for nothing else: one
// prepared for an epoch the job has left (Seek) or for a job that has closed
// is not published, and every batch prepared but never taken (not published
// for that reason, or still in the ring when its job sought or closed) is
// counted in the job's and the daemon's unread batches (BatchTotals).
//
// The JobLifecycleObserver calls, Snapshot and Totals may be called from any
// thread; they take mu_. Production state is changed
// only under mu_, by the scheduler thread or by those calls.
#ifndef GALLEY_SERVER_SCHEDULING_SCHEDULER_H_
#define GALLEY_SERVER_SCHEDULING_SCHEDULER_H_

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "galley/cache/tiered_cache.h"
#include "galley/mutex.h"
#include "galley/sampler/sampling_policy.h"
#include "galley/scheduling/demand_ledger.h"
#include "galley/scheduling/item_task.h"
#include "galley/scheduling/job_lifecycle_observer.h"
#include "galley/scheduling/production_gate.h"
#include "galley/scheduling/served_job.h"
#include "galley/snapshots/snapshots.h"

namespace galley {

// The jobs on one dataset that share one sampling policy instance.
struct SamplerGroup {
  std::string dataset;
  std::string policy_name;
  std::unique_ptr<SamplingPolicy> policy;
  size_t jobs = 0;
  uint64_t requests = 0;  // item deliveries to jobs
  uint64_t loads = 0;     // distinct item preparations (rounds)
  // What those preparations cost, counted by the pipeline as it runs them.
  std::shared_ptr<PreparationCosts> costs = std::make_shared<PreparationCosts>();
  // ods: draws replaced by cached items in epochs the jobs have left (the
  // current epochs' count is read from the policy).
  uint64_t substitutions = 0;
};

struct SchedulerOptions {
  // The daemon-wide seed (DaemonOptions::sampler_seed): mixed into every
  // sampler's stream and every job's order. 0 (default) keeps a job's order
  // a pure function of its (seed, epoch) across restarts and machines.
  uint64_t sampler_seed = 0;
  // Mixed into the stream each dataset's sampler group draws from once two
  // jobs share it (never into a job's own stream, which keeps a lone job's
  // order reproducible). galleyd sets it from fresh entropy at every start:
  // daemons on different nodes that see the same events would otherwise
  // make the same decisions, and the ranks of one DDP job would walk their
  // shards in one pattern. Tests leave it 0 to replay decisions.
  uint64_t stream_salt = 0;
  GateOptions gate;  // when a job is produced for (production_gate.h)
  // Most items a job with no free slot may draw ahead, in batches, in the
  // rounds it shares with the jobs produced for (under dsa, dsa-chain and
  // ods: the policies whose orders do not follow each job's seed).
  // What a job draws ahead is prepared, in that order, once it has a free
  // slot, and keeps its demand in the cache until then. 0: a job with no
  // free slot is masked (draws nothing) and falls out of step. Each item
  // costs 4 bytes of the scheduler's memory.
  uint32_t draw_ahead_batches = 64;
  // Whether a job that has drawn its whole epoch ahead enters its next
  // epoch in the sampler then (it keeps drawing in step with the others
  // while its batches finish the epoch) rather than when its last batch is
  // planned (then it starts the next epoch behind the others by what it
  // drew ahead, and that lag returns every epoch). false only to measure
  // the difference.
  bool draw_across_epochs = true;
  // Whether a wave that reads a dataset of objects is prepared with the
  // next wave already planned, so that the pipeline fetches the next
  // wave's objects while it prepares this one
  // (ItemPreparer::RunBeforeNext). A wave of local datasets never is.
  // false only to measure the difference.
  bool plan_next_wave = true;

  // galleyd fills these from its options (SchedulerOptionsFor, daemon.h).
};

// A group's sampler stream is seeded with
// sampler_seed ^ DatasetRootHash(dataset root) ^ stream_salt.
uint64_t DatasetRootHash(const std::string& root);

// What the scheduler reads and claims of a job's batch ring. The daemon's
// is RingView::Shared(), over the job's BatchRing; tests may pass their own.
// Called by the scheduler thread under the scheduler's mutex.
class RingView {
 public:
  virtual ~RingView() = default;
  virtual RingOccupancy Occupancy(const ServedJob& job) const = 0;
  // Takes a free slot for filling, or nullopt if there is none.
  virtual std::optional<uint32_t> Claim(ServedJob& job) = 0;
  // Published slots of `generation` the consumer has not taken.
  virtual uint32_t ReadyOf(const ServedJob& job, uint64_t generation) const = 0;
  static RingView* Shared();  // never null, lives forever
};

// Seams for tests; null members mean the real ones.
struct SchedulerHooks {
  const SchedulerClock* clock = nullptr;
  RingView* rings = nullptr;
};

class Scheduler final : public JobLifecycleObserver {
 public:
  // `pipeline` prepares the waves' items (the daemon's ItemPipeline); it
  // may be null only for a scheduler that is never started (PlanOneWave).
  // `cache` may be null; when set it must outlive the scheduler.
  Scheduler(SchedulerOptions options, ItemPreparer* pipeline, cache::TieredCache* cache = nullptr,
            SchedulerHooks hooks = {});
  ~Scheduler() override;  // stops the thread

  void Start();
  void Stop() EXCLUDES(mu_);

  // Registers a job; InvalidArgument if its policy is unknown.
  Status OnJobOpened(const std::shared_ptr<ServedJob>& job) override EXCLUDES(mu_);
  // Restarts a job at the beginning of `seek.epoch`, its batches from then
  // on tagged with `seek.generation`. Refused for an epoch past the job's
  // last, for a job that cannot go on (its failure), and when `seek.items`
  // does not fit the job: a listed job (JobPlan::listed) needs the
  // epoch's list, which must fit it (ServedJob::ListEpoch), and any other
  // job refuses one (InvalidArgument).
  Status OnJobSought(ServedJob& job, const JobSeek& seek) override EXCLUDES(mu_);
  // The job's consumer is waiting for its first batch: start producing.
  void OnConsumerReady(JobId job_id) override EXCLUDES(mu_);
  // A slot of the job's ring is free again: look again.
  void OnSlotReleased(JobId job_id) override EXCLUDES(mu_);
  // Forgets a job (closed or its client died). Safe to call twice.
  void OnJobClosed(JobId job_id) override EXCLUDES(mu_);

  // Every sampler group, with the substitutions of the epochs in progress.
  std::vector<SamplerGroupSnapshot> Snapshot() const EXCLUDES(mu_);
  // Batches prepared and left unread since start, every job's, closed or open.
  BatchTotalsSnapshot Totals() const EXCLUDES(mu_);
  // The items `job_id` drew ahead that its batches have not taken yet, in
  // the order they will take them (its current epoch's, then its next
  // epoch's); empty for a job it does not know.
  std::vector<ItemId> DrawnAhead(JobId job_id) const EXCLUDES(mu_);

  // Plans one wave as the scheduler thread does each turn (slots claimed
  // through the RingView, rounds decided, nothing prepared or published);
  // false if the gate lets no job be produced for now. Only for a scheduler
  // that was not started: tests drive its decisions by hand.
  bool PlanOneWave(std::vector<std::unique_ptr<SlotPlan>>* plans, std::vector<ItemTask>* tasks)
      EXCLUDES(mu_);

 private:
  struct Production {
    std::shared_ptr<ServedJob> job;
    SamplerGroup* group = nullptr;
    uint64_t epoch = 0;
    uint64_t batch_index = 0;
    uint64_t generation = 0;
    bool in_sampler = false;
    bool finished = false;
    bool consumer_ready = false;  // production starts when the consumer first waits
    bool started = false;         // a batch has been planned for the job
    // Producing start_epoch after a restart: leave out resume_consumed.
    bool resuming = false;
    // Copies of an item the epoch holds more than once, which a random
    // policy (distinct items only) does not draw: served after its order.
    std::vector<ItemId> repeats;
    size_t repeats_served = 0;
    // Why the job cannot go on, once a batch could not be completed.
    Status failure;
    // Items drawn while the job had no free slot, in draw order: its next
    // batches take them before they draw again
    // (SchedulerOptions::draw_ahead_batches). Still in the demand ledger.
    std::deque<ItemId> drawn_ahead;
    // The sampler holds the job's next epoch (epoch + 1) already: every item
    // of `epoch` was drawn, and its batches still take the rest of
    // drawn_ahead, while the job draws the next epoch's items in step with
    // the others into drawn_next (EnterNextEpochEarly). Its next epoch's
    // copies of repeated items wait in repeats_next.
    bool sampler_ahead = false;
    std::deque<ItemId> drawn_next;
    // The job filled its drawn-ahead bound: it is further behind than
    // drawing ahead bridges, so it draws in no more rounds without a slot
    // until its batches have taken everything it drew ahead.
    bool draw_ahead_full = false;
    std::vector<ItemId> repeats_next;
  };

  void Loop() EXCLUDES(mu_);
  // Asks the gate which jobs to produce for now and copies its times into
  // the jobs' counters; returns the jobs to produce for, in jobs_ order.
  std::vector<uint64_t> DecideWave() REQUIRES(mu_);
  // Plans a wave; returns false if no job can take a batch. Its steps
  // follow, in order.
  bool PlanWave(std::vector<std::unique_ptr<SlotPlan>>* plans, std::vector<ItemTask>* tasks)
      REQUIRES(mu_);
  // A wave while it is planned, and the tasks of one sampler group's items
  // in it (scheduler.cc).
  struct Wave;
  class GroupTasks;
  // Claims a slot for each job the gate lets produce now (entering its
  // epoch if it is not in it yet), and groups those jobs by sampler group.
  void ClaimSlots(Wave& wave) REQUIRES(mu_);
  // The jobs of those groups, without a slot this wave, that draw ahead in
  // its rounds (MayDrawAhead).
  void FindJobsDrawingAhead(Wave& wave) REQUIRES(mu_);
  // Fills the batches of one sampler group's jobs produced for in the wave
  // (`members`): TakeDrawnAhead for a job alone, DrawRounds, then
  // FinishBatch for each.
  void PlanGroupBatches(Wave& wave, SamplerGroup* group, const std::vector<Production*>& members)
      REQUIRES(mu_);
  // Puts what `p` drew ahead, in draw order, into its batch, up to the
  // batch's target.
  void TakeDrawnAhead(Wave& wave, Production& p, GroupTasks& tasks) REQUIRES(mu_);
  // Runs the group's sampler rounds while a job produced for needs items
  // it holds; jobs drawing ahead keep what they draw for later batches.
  void DrawRounds(Wave& wave, SamplerGroup* group, const std::vector<Production*>& members,
                  GroupTasks& tasks) REQUIRES(mu_);
  // Completes `p`'s batch with what it drew ahead, the epoch's repeated
  // items, then substitutes, and moves the job past it (AdvancePast).
  void FinishBatch(Wave& wave, Production& p, GroupTasks& tasks) REQUIRES(mu_);
  // Moves the job past the batch `plan` holds: to its next batch or, after
  // its epoch's last (flagged so, and the stream's end after the job's last
  // epoch), out of the sampler and into the next epoch.
  void AdvancePast(Production& p, SlotPlan& plan) REQUIRES(mu_);
  void Publish(SlotPlan& plan) REQUIRES(mu_);
  // Whether a prepared plan is still wanted: its job is open, has not
  // sought since the plan was made and can go on.
  bool Wanted(const SlotPlan& plan) const REQUIRES(mu_);
  // Whether a wave's tasks read a dataset of objects: then the scheduler
  // plans the next wave before preparing it (ItemPreparer::RunBeforeNext).
  static bool ReadsObjects(std::span<const ItemTask> tasks);
  // Counts `batches` of `job` as prepared and never taken by its consumer.
  void CountUnread(ServedJob& job, uint64_t batches) REQUIRES(mu_);
  // Replaces the samples of `plans` that failed by substitutes and returns
  // the tasks that prepare them (empty: nothing failed). Plans already
  // unservable are left alone.
  std::vector<ItemTask> PlanSubstitutes(std::vector<std::unique_ptr<SlotPlan>>& plans,
                                        uint32_t attempt) EXCLUDES(mu_);
  // Sets SlotPlan::unservable, with the count and the first failure, for
  // plans holding a sample the dataset's change made fail, and, once
  // `substitutes_done`, for plans with a sample still failed or whose field
  // records do not fit the slot's field area.
  static void FindUnservable(std::vector<std::unique_ptr<SlotPlan>>& plans, bool substitutes_done);
  // Ends the job of an unservable plan: gives its slot back, stops its
  // production and closes its ring with the reason.
  void EndUnservableJob(SlotPlan& plan) EXCLUDES(mu_);
  // Enters the job's current epoch: the sampler and the demand ledger get
  // its items. `p` is one of jobs_, hence the lock.
  void EnterSampler(Production& p) REQUIRES(mu_);
  // Whether a job left out of a wave may draw ahead in its rounds: it is in
  // an epoch of a policy whose orders do not follow the job's seed (dsa,
  // dsa-chain, ods; SchedulerOptions::draw_ahead_batches).
  bool MayDrawAhead(const Production& p) const REQUIRES(mu_);
  // Leaves the job's current epoch, dropping the demand it still had and
  // what it drew ahead (of the next epoch too, if it had entered it).
  void LeaveSampler(Production& p) REQUIRES(mu_);
  // A job that has drawn every item of its epoch but not yet received them
  // all (it drew ahead) enters its next epoch in the sampler now, so that it
  // keeps drawing in step with the others across its epoch's end instead of
  // starting the next epoch behind them; false if it may not (a policy that
  // does not draw ahead, its last epoch, a next epoch not listed yet or
  // empty). Its batches finish the current epoch from drawn_ahead first.
  bool EnterNextEpochEarly(Production& p) REQUIRES(mu_);
  // At the end of an epoch whose successor the job entered early: what it
  // drew of that epoch becomes its drawn_ahead.
  void MoveToEnteredEpoch(Production& p) REQUIRES(mu_);
  // The demand ledger's key for the job's `epoch`: one entry per epoch, as
  // a job may be in two at once (EnterNextEpochEarly).
  static JobId LedgerKey(JobId job, uint64_t epoch) { return job * 2 + (epoch & 1); }
  // Updates the jobs' drawn-ahead and lag counters after a wave.
  void CountLags() REQUIRES(mu_);

  const SchedulerOptions options_;
  ItemPreparer* const pipeline_;
  cache::TieredCache* const cache_;
  const SchedulerClock* const clock_;
  RingView* const rings_;

  mutable Mutex mu_;
  CondVar cv_;  // signalled when stop_ or dirty_ is set
  bool stop_ GUARDED_BY(mu_) = false;
  bool dirty_ GUARDED_BY(mu_) = false;
  ProductionGate gate_ GUARDED_BY(mu_);
  // The jobs' outstanding demand for the cache; single-threaded, hence mu_.
  DemandLedger ledger_ GUARDED_BY(mu_);
  std::map<JobId, Production> jobs_ GUARDED_BY(mu_);
  std::map<std::pair<const Dataset*, std::string>, std::unique_ptr<SamplerGroup>> groups_
      GUARDED_BY(mu_);
  // Items that failed to read or decode, by dataset index: substitutes are
  // never drawn from them.
  std::set<std::pair<uint32_t, ItemId>> failed_items_ GUARDED_BY(mu_);
  BatchTotalsSnapshot totals_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace galley

#endif  // GALLEY_SERVER_SCHEDULING_SCHEDULER_H_
