#include "galley/scheduling/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_map>

#include "galley/logging/restarting_loop.h"
#include "galley/random.h"

namespace galley {
namespace {

using Clock = std::chrono::steady_clock;

// A safety net only: every state change notifies the condition variable.
constexpr auto kIdleWait = std::chrono::milliseconds(500);
// How many times a failed sample's substitute is itself replaced when it
// fails too; past that the batch cannot be completed and the job ends.
constexpr uint32_t kSubstituteAttempts = 4;

// A job's own sampling stream for one epoch: its (seed, epoch, rank) and the
// daemon-wide seed, nothing else, so a job alone gets the same order after a
// restart or on another machine.
uint64_t JobEpochSeed(const JobSpec& spec, uint64_t epoch, uint64_t daemon_seed) {
  return SplitMix64(SplitMix64(SplitMix64(spec.seed ^ 0x6a09e667f3bcc909ULL) ^ epoch) ^ spec.rank) ^
         SplitMix64(daemon_seed);
}
// While a job is held for a peer, how often the scheduler looks whether its
// consumer's buffer has fallen below the gate's threshold (taking a batch
// sends nothing to the daemon; releasing it does).
constexpr auto kHoldPoll = std::chrono::milliseconds(2);

class SharedRings final : public RingView {
 public:
  RingOccupancy Occupancy(const ServedJob& job) const override {
    return {job.ring->geometry().slot_count, job.ring->FreeSlots(), job.ring->ReadySlots()};
  }
  std::optional<uint32_t> Claim(ServedJob& job) override { return job.ring->Claim(); }
  uint32_t ReadyOf(const ServedJob& job, uint64_t generation) const override {
    return job.ring->ReadySlotsOf(generation);
  }
};

// "1 sample", "3 samples".
std::string Samples(uint32_t count) {
  return std::to_string(count) + (count == 1 ? " sample" : " samples");
}

// Leaves in `items` (ids below `dataset_size`) the first copy of each
// item, in order, and returns the further copies, in order.
std::vector<ItemId> TakeRepeats(std::vector<ItemId>& items, size_t dataset_size) {
  std::vector<ItemId> repeats;
  std::vector<bool> seen(dataset_size, false);
  std::erase_if(items, [&](ItemId item) {
    if (!seen[item]) {
      seen[item] = true;
      return false;
    }
    repeats.push_back(item);
    return true;
  });
  return repeats;
}

}  // namespace

uint64_t DatasetRootHash(const std::string& root) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : root) h = (h ^ c) * 1099511628211ULL;
  return h;
}

RingView* RingView::Shared() {
  static SharedRings rings;
  return &rings;
}

Scheduler::Scheduler(SchedulerOptions options, ItemPreparer* pipeline, cache::TieredCache* cache,
                     SchedulerHooks hooks)
    : options_(options),
      pipeline_(pipeline),
      cache_(cache),
      clock_(hooks.clock != nullptr ? hooks.clock : SchedulerClock::Steady()),
      rings_(hooks.rings != nullptr ? hooks.rings : RingView::Shared()),
      gate_(options.gate),
      ledger_(cache != nullptr ? &cache->demand() : nullptr) {}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Start() {
  thread_ = std::thread([this] { RunRestartingLoop("scheduler", [this] { Loop(); }); });
}

void Scheduler::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

Status Scheduler::OnJobOpened(const std::shared_ptr<ServedJob>& job) {
  MutexLock lock(&mu_);
  auto key = std::make_pair(job->plan->dataset.get(), job->plan->policy);
  auto& group = groups_[key];
  if (!group) {
    SamplerOptions sampler_options;
    sampler_options.policy = job->plan->policy;
    sampler_options.seed = options_.sampler_seed ^
                           DatasetRootHash(job->plan->dataset->root().string()) ^
                           options_.stream_salt;
    if (job->plan->policy == SamplingPolicyNameOf(SamplingPolicyKind::kOds) && cache_ != nullptr) {
      // Runs on the scheduler thread under mu_; the tiers lock themselves.
      sampler_options.is_cached = [cache = cache_,
                                   dataset_index = job->plan->dataset_index](ItemId item) {
        const cache::Key key = cache::MakeKey(dataset_index, item);
        return cache->decoded().Contains(key) || cache->encoded().Contains(key);
      };
    }
    auto policy = MakeSamplingPolicy(sampler_options);
    if (!policy.ok()) {
      groups_.erase(key);
      return policy.status();
    }
    group = std::make_unique<SamplerGroup>();
    group->dataset = job->plan->dataset->root().string();
    group->policy_name = job->plan->policy;
    group->policy = std::move(policy).value();
  }
  group->jobs++;
  Production p;
  p.job = job;
  p.group = group.get();
  p.epoch = job->plan->spec.start_epoch;
  p.batch_index = job->plan->spec.start_batch;
  p.resuming = job->plan->spec.start_batch > 0 || !job->plan->spec.resume_consumed.empty();
  jobs_.emplace(job->id, std::move(p));
  dirty_ = true;
  cv_.SignalAll();
  return Status::Ok();
}

void Scheduler::EnterSampler(Production& p) {
  const JobId id = p.job->id;
  auto items = p.job->EpochItems(p.epoch, p.resuming);
  // A random policy draws distinct items; the further copies of one the
  // epoch holds twice come after its order.
  if (p.group->policy_name != SamplingPolicyNameOf(SamplingPolicyKind::kSequential)) {
    p.repeats = TakeRepeats(items, p.job->plan->dataset->size());
    p.repeats_served = 0;
  }
  const JobSamplingOptions sampling{
      .substitution_fraction = p.job->plan->spec.ods_fraction,
      .seed = JobEpochSeed(p.job->plan->spec, p.epoch, options_.sampler_seed)};
  if (Status s = p.group->policy->AddJob(id, items, sampling); !s.ok()) {
    spdlog::error("job {}: sampler refused epoch {}: {}", id, p.epoch, s.ToString());
  } else {
    ledger_.Enter(LedgerKey(id, p.epoch), p.job->plan->dataset_index, p.job->plan->dataset->size(),
                  items, p.repeats);
  }
  p.in_sampler = !items.empty();
}

bool Scheduler::MayDrawAhead(const Production& p) const {
  // A policy whose orders follow each job's seed (independent, lockstep,
  // sequential) promises the order itself, which delivering drawn-ahead
  // items later would change; and the first of them shares nothing.
  return options_.draw_ahead_batches > 0 && p.started && p.in_sampler && !p.finished &&
         p.failure.ok() && p.job->HasEpochItems(p.epoch) &&
         !p.group->policy->OrdersFollowJobSeeds();
}

void Scheduler::LeaveSampler(Production& p) {
  const JobId id = p.job->id;
  p.drawn_ahead.clear();
  p.drawn_next.clear();
  p.draw_ahead_full = false;
  if (p.in_sampler) {
    p.group->substitutions += p.group->policy->Substitutions(id).substitutions;
    p.group->policy->RemoveJob(id);
    p.in_sampler = false;
  }
  ledger_.Leave(LedgerKey(id, p.epoch));
  ledger_.Leave(LedgerKey(id, p.epoch + 1));
  p.sampler_ahead = false;
  p.repeats.clear();
  p.repeats_next.clear();
  p.repeats_served = 0;
}

bool Scheduler::EnterNextEpochEarly(Production& p) {
  const JobId id = p.job->id;
  const JobSpec& spec = p.job->plan->spec;
  const uint64_t next = p.epoch + 1;
  if (!options_.draw_across_epochs || p.sampler_ahead || !MayDrawAhead(p) ||
      p.drawn_ahead.empty() || p.group->policy->Remaining(id) > 0 ||
      (spec.epochs != 0 && next >= spec.start_epoch + spec.epochs) || !p.job->HasEpochItems(next)) {
    return false;
  }
  std::vector<ItemId> items = p.job->EpochItems(next);
  std::vector<ItemId> repeats = TakeRepeats(items, p.job->plan->dataset->size());
  if (items.empty()) return false;
  // The policy holds one epoch per job: the current one has nothing left to
  // draw, so it gives way to the next.
  p.group->substitutions += p.group->policy->Substitutions(id).substitutions;
  p.group->policy->RemoveJob(id);
  const JobSamplingOptions sampling{.substitution_fraction = spec.ods_fraction,
                                    .seed = JobEpochSeed(spec, next, options_.sampler_seed)};
  if (Status s = p.group->policy->AddJob(id, items, sampling); !s.ok()) {
    // Not expected (the epoch's items are the job's own); the job then
    // enters its next epoch when its current one ends, as without this.
    spdlog::error("job {}: sampler refused epoch {}: {}", id, next, s.ToString());
    p.in_sampler = false;
    return false;
  }
  ledger_.Enter(LedgerKey(id, next), p.job->plan->dataset_index, p.job->plan->dataset->size(),
                items, repeats);
  p.repeats_next = std::move(repeats);
  p.sampler_ahead = true;
  return true;
}

void Scheduler::MoveToEnteredEpoch(Production& p) {
  ledger_.Leave(LedgerKey(p.job->id, p.epoch));
  p.drawn_ahead = std::move(p.drawn_next);
  p.drawn_next.clear();
  p.repeats = std::move(p.repeats_next);
  p.repeats_next.clear();
  p.repeats_served = 0;
  p.sampler_ahead = false;
}

void Scheduler::CountLags() {
  // Positions in batches across epochs: how far each job's batches are
  // behind the furthest job of its group.
  std::map<const SamplerGroup*, uint64_t> furthest;
  auto position = [](const Production& p) {
    return p.epoch * p.job->plan->BatchesPerEpoch() + p.batch_index;
  };
  for (const auto& [id, p] : jobs_) {
    if (p.started && !p.finished) furthest[p.group] = std::max(furthest[p.group], position(p));
  }
  for (auto& [id, p] : jobs_) {
    JobCounters& c = p.job->counters;
    const uint64_t ahead = p.drawn_ahead.size() + p.drawn_next.size();
    c.drawn_ahead.store(ahead, std::memory_order_relaxed);
    if (ahead > c.drawn_ahead_peak.load(std::memory_order_relaxed)) {
      c.drawn_ahead_peak.store(ahead, std::memory_order_relaxed);
    }
    const uint64_t lag = p.started && !p.finished
                             ? (furthest[p.group] - position(p)) * p.job->plan->spec.batch_size
                             : 0;
    c.lag.store(lag, std::memory_order_relaxed);
    if (lag > c.lag_peak.load(std::memory_order_relaxed)) {
      c.lag_peak.store(lag, std::memory_order_relaxed);
    }
  }
}

void Scheduler::CountUnread(ServedJob& job, uint64_t batches) {
  job.counters.unread += batches;
  totals_.unread += batches;
}

void Scheduler::OnJobClosed(JobId job_id) {
  MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  // What the consumer left in the ring is never read now (batches of the
  // epochs it left were counted at its Seek); a batch still being prepared
  // is counted when it is done (Loop).
  CountUnread(*it->second.job, rings_->ReadyOf(*it->second.job, it->second.generation));
  LeaveSampler(it->second);
  it->second.group->jobs--;
  jobs_.erase(it);
  gate_.Forget(job_id);
  dirty_ = true;
  cv_.SignalAll();
}

Status Scheduler::OnJobSought(ServedJob& job, const JobSeek& seek) {
  MutexLock lock(&mu_);
  auto it = jobs_.find(job.id);
  if (it == jobs_.end() || it->second.job.get() != &job) return Status::NotFound("no such job");
  Production& p = it->second;
  const JobSpec& spec = job.plan->spec;
  if (spec.epochs != 0 && seek.epoch >= spec.start_epoch + spec.epochs) {
    return Status::InvalidArgument("epoch " + std::to_string(seek.epoch) +
                                   " is past the job's last epoch");
  }
  if (!p.failure.ok()) return p.failure;  // the job cannot go on (EndUnservableJob)
  if (job.plan->listed() != (seek.items != nullptr)) {
    return Status::InvalidArgument(
        job.plan->listed() ? "this job's client lists each epoch's items: SeekEpoch needs 'items'"
                           : "this job's items come from its subset and split: SeekEpoch takes no "
                             "'items' (open the job with 'epoch_items' to list them)");
  }
  // Under mu_, with the epoch below: no wave sees the new list with the old
  // epoch's generation.
  if (seek.items != nullptr) GALLEY_RETURN_IF_ERROR(job.ListEpoch(seek.epoch, *seek.items));
  // The consumer waits for the new epoch now (its seek is a request it
  // waits on), so it drops the batches published before unread.
  CountUnread(job, rings_->ReadyOf(job, p.generation));
  LeaveSampler(p);
  p.epoch = seek.epoch;
  p.batch_index = 0;
  p.resuming = false;
  p.finished = false;
  p.generation = seek.generation;
  dirty_ = true;
  cv_.SignalAll();
  return Status::Ok();
}

void Scheduler::OnConsumerReady(JobId job_id) {
  {
    MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return;
    it->second.consumer_ready = true;
    dirty_ = true;
  }
  cv_.SignalAll();
}

void Scheduler::OnSlotReleased(JobId /*job_id*/) {
  // Any job's free slot may let a wave run: every job is looked at again.
  {
    MutexLock lock(&mu_);
    dirty_ = true;
  }
  cv_.SignalAll();
}

std::vector<uint64_t> Scheduler::DecideWave() {
  const auto now = clock_->Now();
  std::vector<GateInput> inputs;
  inputs.reserve(jobs_.size());
  for (const auto& [id, p] : jobs_) {
    inputs.push_back(GateInput{
        .job = id,
        .group = p.group,
        .sharing = p.group->policy_name != SamplingPolicyNameOf(SamplingPolicyKind::kIndependent),
        // A listed job waits, idle, for its next epoch's list.
        .finished = p.finished || !p.job->HasEpochItems(p.epoch),
        .consumer_ready = p.consumer_ready,
        .started = p.started,
        .opened_at = p.job->plan->opened_at,
        .epoch = p.epoch,
        .generation = p.generation,
        .ring = rings_->Occupancy(*p.job)});
  }
  const std::vector<GateDecision> decisions = gate_.Decide(inputs, now);
  std::vector<uint64_t> produce;
  size_t i = 0;
  for (auto& [id, p] : jobs_) {
    const GateTimes times = gate_.Times(id, now);
    p.job->counters.blocked_ns.store(times.ring_full.count(), std::memory_order_relaxed);
    p.job->counters.held_ns.store(times.held.count(), std::memory_order_relaxed);
    p.job->counters.holds.store(times.holds, std::memory_order_relaxed);
    if (decisions[i] == GateDecision::kProduce) produce.push_back(id);
    ++i;
  }
  if (spdlog::should_log(spdlog::level::trace)) {
    std::vector<std::string> rings;
    for (size_t k = 0; k < inputs.size(); ++k) {
      rings.push_back(fmt::format("{}:{}f{}r:{}", inputs[k].job, inputs[k].ring.free,
                                  inputs[k].ring.ready, GateDecisionName(decisions[k])));
    }
    spdlog::trace("wave decisions {}", fmt::join(rings, " "));
  }
  return produce;
}

bool Scheduler::PlanOneWave(std::vector<std::unique_ptr<SlotPlan>>* plans,
                            std::vector<ItemTask>* tasks) {
  MutexLock lock(&mu_);
  return PlanWave(plans, tasks);
}

// One wave while it is planned.
struct Scheduler::Wave {
  std::vector<std::unique_ptr<SlotPlan>>* plans;
  std::vector<ItemTask>* tasks;
  // The slot claimed for each job produced for, and those jobs by sampler
  // group.
  std::unordered_map<JobId, SlotPlan*> claimed = {};
  std::map<SamplerGroup*, std::vector<Production*>> by_group = {};
  // Jobs of those groups that have no slot this wave but draw in its rounds.
  std::unordered_map<JobId, Production*> drawing_ahead = {};
};

// The tasks of one sampler group's items in a wave: one per item, which
// prepares it once for every slot position it is delivered to.
class Scheduler::GroupTasks {
 public:
  // The group's jobs read one dataset instance: `job_plan`, any one's plan,
  // says how its items are prepared; the pipeline counts what they cost in
  // `costs`, the group's.
  GroupTasks(std::vector<ItemTask>* tasks, const JobPlan* job_plan,
             std::shared_ptr<PreparationCosts> costs)
      : tasks_(tasks), job_plan_(job_plan), costs_(std::move(costs)) {}

  // Puts `item` in `plan`'s next position, prepared by this wave's task
  // for it; returns whether that task is new (a load).
  bool Deliver(SlotPlan* plan, ItemId item) {
    auto [it, inserted] = task_of_item_.try_emplace(item, tasks_->size());
    if (inserted) tasks_->push_back(ItemTask{job_plan_, item, {}, costs_});
    (*tasks_)[it->second].deliveries.push_back({plan, static_cast<uint32_t>(plan->items.size())});
    plan->items.push_back(item);
    return inserted;
  }

 private:
  std::vector<ItemTask>* const tasks_;
  const JobPlan* const job_plan_;
  const std::shared_ptr<PreparationCosts> costs_;
  std::unordered_map<ItemId, size_t> task_of_item_;
};

bool Scheduler::PlanWave(std::vector<std::unique_ptr<SlotPlan>>* plans,
                         std::vector<ItemTask>* tasks) {
  Wave wave{plans, tasks};
  ClaimSlots(wave);
  if (plans->empty()) return false;
  FindJobsDrawingAhead(wave);
  for (const auto& [group, members] : wave.by_group) PlanGroupBatches(wave, group, members);
  CountLags();
  // An epoch with no batch at all (drop_last, fewer items than batch_size)
  // is one empty batch flagged last, so the client still sees it end.
  for (auto& plan : *plans) plan->ResetOutcomes();
  return true;
}

void Scheduler::ClaimSlots(Wave& wave) {
  // Claim one slot for each job the gate lets produce. Jobs over one dataset
  // that are claimed in the same wave share its rounds; a job left out draws
  // ahead in them (up to SchedulerOptions::draw_ahead_batches), or else is
  // masked in the sampler and keeps the items it still needs.
  for (uint64_t id : DecideWave()) {
    Production& p = jobs_.at(id);
    auto slot = rings_->Claim(*p.job);
    if (!slot) continue;
    p.started = true;
    auto plan = std::make_unique<SlotPlan>();
    plan->job = p.job;
    plan->slot = *slot;
    plan->epoch = p.epoch;
    plan->batch_index = p.batch_index;
    plan->generation = p.generation;
    plan->items.reserve(p.job->plan->spec.batch_size);
    if (!p.in_sampler) EnterSampler(p);
    wave.claimed[id] = plan.get();
    wave.by_group[p.group].push_back(&p);
    wave.plans->push_back(std::move(plan));
  }
}

void Scheduler::FindJobsDrawingAhead(Wave& wave) {
  // Jobs of those groups that have no slot this wave draw ahead in its
  // rounds, so that they stay in step with the jobs produced for. So does a
  // job, with or without a slot, that has drawn its whole epoch ahead: it
  // draws its next epoch (EnterNextEpochEarly) while its batches still
  // take the last one's items.
  for (auto& [id, p] : jobs_) {
    if (!wave.by_group.count(p.group) || !MayDrawAhead(p)) continue;
    EnterNextEpochEarly(p);
    if (!wave.claimed.count(id) || p.sampler_ahead) wave.drawing_ahead[id] = &p;
  }
}

void Scheduler::PlanGroupBatches(Wave& wave, SamplerGroup* group,
                                 const std::vector<Production*>& members) {
  GroupTasks tasks(wave.tasks, members.front()->job->plan.get(), group->costs);
  // A job produced for alone catches up on what it drew ahead first.
  if (members.size() == 1) TakeDrawnAhead(wave, *members.front(), tasks);
  DrawRounds(wave, group, members, tasks);
  // Fill what the sampler left short, close epochs at their last batch,
  // decide flags, and advance counters.
  for (Production* p : members) FinishBatch(wave, *p, tasks);
}

void Scheduler::TakeDrawnAhead(Wave& wave, Production& p, GroupTasks& tasks) {
  // What a job drew ahead, in the order it was drawn, fills its batch when
  // no other job of its group is produced for in this wave (it catches up
  // alone) and, after the rounds, when its sampler has nothing left for
  // the batch. Otherwise the job draws in the rounds: it stays in step.
  SlotPlan* plan = wave.claimed.at(p.job->id);
  const uint64_t target = p.job->plan->BatchTarget(plan->batch_index);
  while (!p.drawn_ahead.empty() && plan->items.size() < target) {
    const ItemId item = p.drawn_ahead.front();
    p.drawn_ahead.pop_front();
    if (p.drawn_ahead.empty() && p.drawn_next.empty()) p.draw_ahead_full = false;
    p.group->loads += tasks.Deliver(plan, item) ? 1 : 0;
    p.group->requests++;
    ledger_.Consume(LedgerKey(p.job->id, p.epoch), item);
  }
}

void Scheduler::DrawRounds(Wave& wave, SamplerGroup* group, const std::vector<Production*>& members,
                           GroupTasks& tasks) {
  const std::unordered_map<JobId, SlotPlan*>& claimed = wave.claimed;
  // Jobs produced for that still need items the sampler holds; the jobs
  // drawing ahead take part only while one does, so that they never draw
  // alone.
  auto wants_more = [&](const Production* p) {
    const SlotPlan& plan = *claimed.at(p->job->id);
    return !p->sampler_ahead && plan.items.size() < p->job->plan->BatchTarget(plan.batch_index) &&
           group->policy->Remaining(p->job->id) > 0;
  };
  auto count_wanting = [&] {
    return static_cast<size_t>(std::count_if(members.begin(), members.end(), wants_more));
  };
  size_t wanting = count_wanting();
  // Only a job level with or behind every job produced for draws ahead.
  // One ahead of some of them would, left out, draw the items it misses
  // later in rounds those jobs share (they still need them), while an item
  // drawn ahead is prepared for it alone.
  // Where a job's draws are, epoch first: a job drawing its next epoch
  // already is ahead of every job still drawing the current one.
  auto draws_at = [&](const Production& p) {
    return std::make_pair(p.sampler_ahead ? p.epoch + 1 : p.epoch,
                          -static_cast<int64_t>(group->policy->Remaining(p.job->id)));
  };
  std::optional<std::pair<uint64_t, int64_t>> least_drawn;
  for (const Production* p : members) {
    if (p->sampler_ahead) continue;
    if (!least_drawn || draws_at(*p) < *least_drawn) least_drawn = draws_at(*p);
  }
  // A batch takes what its position in the epoch holds (BatchTarget), so
  // every epoch has exactly BatchesPerEpoch() batches.
  auto ready = [&](JobId job) {
    if (auto ahead = wave.drawing_ahead.find(job); ahead != wave.drawing_ahead.end()) {
      Production& p = *ahead->second;
      if (p.drawn_ahead.size() + p.drawn_next.size() >=
          uint64_t{options_.draw_ahead_batches} * p.job->plan->spec.batch_size) {
        p.draw_ahead_full = true;
        return false;
      }
      return wanting > 0 && !p.draw_ahead_full && p.group == group && least_drawn &&
             draws_at(p) <= *least_drawn;
    }
    if (auto it = claimed.find(job); it != claimed.end()) {
      const SlotPlan& plan = *it->second;
      return plan.items.size() < plan.job->plan->BatchTarget(plan.batch_index);
    }
    return false;
  };
  Round round;
  while (group->policy->Next(ready, &round)) {
    for (const Delivery& delivery : round.deliveries) {
      bool loaded = false;
      for (JobId receiver : delivery.receivers) {
        if (auto ahead = wave.drawing_ahead.find(receiver); ahead != wave.drawing_ahead.end()) {
          // Prepared once the job has a free slot (or, drawn for its next
          // epoch, once its current one is done); its demand stays.
          Production& p = *ahead->second;
          (p.sampler_ahead ? p.drawn_next : p.drawn_ahead).push_back(delivery.item);
          continue;
        }
        SlotPlan* plan = claimed.at(receiver);
        loaded |= tasks.Deliver(plan, delivery.item);
        ledger_.Consume(LedgerKey(receiver, plan->epoch), delivery.item);
        group->requests++;
      }
      group->loads += loaded ? 1 : 0;
    }
    wanting = count_wanting();
  }
}

void Scheduler::FinishBatch(Wave& wave, Production& p, GroupTasks& tasks) {
  SlotPlan* plan = wave.claimed.at(p.job->id);
  // The sampler runs dry before the batch is full when the epoch holds an
  // item twice (its copies follow), and when a resumed epoch was given
  // fewer items than it has positions left: substitutes keep the batch
  // count exact then too.
  TakeDrawnAhead(wave, p, tasks);
  const uint64_t target = p.job->plan->BatchTarget(plan->batch_index);
  const uint32_t dataset_index = p.job->plan->dataset_index;
  for (uint32_t attempt = 0; plan->items.size() < target;) {
    ItemId item;
    if (p.repeats_served < p.repeats.size()) {
      item = p.repeats[p.repeats_served++];
      ledger_.Consume(LedgerKey(p.job->id, p.epoch), item);
    } else {
      item = p.job->Substitute(p.epoch, 0, attempt++, [&](ItemId i) {
        mu_.AssertHeld();  // Substitute calls back before it returns, under our lock
        return failed_items_.count({dataset_index, i}) > 0;
      });
    }
    tasks.Deliver(plan, item);
  }
  AdvancePast(p, *plan);
}

void Scheduler::AdvancePast(Production& p, SlotPlan& plan) {
  if (plan.batch_index + 1 < p.job->plan->BatchesPerEpoch()) {
    p.batch_index++;
    return;
  }
  if (p.sampler_ahead) {
    MoveToEnteredEpoch(p);  // the sampler is in the next epoch already
  } else {
    LeaveSampler(p);
  }
  p.resuming = false;
  plan.flags |= wire::kLastInEpoch;
  p.job->counters.epochs_completed++;
  p.epoch++;
  p.batch_index = 0;
  const JobSpec& spec = p.job->plan->spec;
  if (spec.epochs != 0 && p.epoch >= spec.start_epoch + spec.epochs) {
    plan.flags |= wire::kEndOfStream;
    p.finished = true;
  }
}

void Scheduler::FindUnservable(std::vector<std::unique_ptr<SlotPlan>>& plans,
                               bool substitutes_done) {
  for (auto& plan : plans) {
    if (!plan->unservable.empty()) continue;
    uint32_t changed = 0, unreachable = 0, failed = 0;
    const std::string* first_changed = nullptr;
    const std::string* first_unreachable = nullptr;
    const std::string* first_failed = nullptr;
    for (uint32_t pos = 0; pos < plan->items.size(); ++pos) {
      if (plan->errors[pos].empty()) continue;
      ++failed;
      if (first_failed == nullptr) first_failed = &plan->errors[pos];
      if (plan->dataset_changed[pos] == kDatasetChanged) {
        ++changed;
        if (first_changed == nullptr) first_changed = &plan->errors[pos];
      } else if (plan->dataset_changed[pos] == kStoreUnreachable) {
        ++unreachable;
        if (first_unreachable == nullptr) first_unreachable = &plan->errors[pos];
      }
    }
    const std::string where = "epoch " + std::to_string(plan->epoch) + ", batch " +
                              std::to_string(plan->batch_index + 1) + " of " +
                              std::to_string(plan->job->plan->BatchesPerEpoch());
    uint64_t field_bytes = 0;
    for (const cache::FieldRecord& record : plan->fields) {
      if (record != nullptr) field_bytes += record->size();
    }
    const uint64_t field_area =
        plan->job->ring != nullptr ? plan->job->ring->geometry().field_bytes : 0;
    if (substitutes_done && failed == 0 && field_bytes > field_area) {
      plan->unservable = "the fields of " + where + " take " + std::to_string(field_bytes) +
                         " bytes, more than field_batch_bytes=" + std::to_string(field_area) +
                         "; raise it or lower batch_size";
    } else if (changed > 0) {
      plan->unservable = "dataset changed under the job: " + Samples(changed) + " of " + where +
                         " unreadable; iterate again to re-list it. First: " + *first_changed;
    } else if (unreachable > 0) {
      plan->unservable = "the object store stayed unreachable: " + Samples(unreachable) + " of " +
                         where +
                         " unreadable; iterate again once it answers. First: " + *first_unreachable;
    } else if (substitutes_done && failed > 0) {
      plan->unservable = std::to_string(failed) + " of " + Samples(plan->items.size()) + " of " +
                         where + " failed and none could be replaced. First: " + *first_failed;
    } else {
      continue;
    }
    // The close reason is bounded (wire::kMaxErrorText): the first failure
    // comes last, so only its tail is cut, and the cut shows.
    if (plan->unservable.size() >= wire::kMaxErrorText) {
      plan->unservable.resize(wire::kMaxErrorText - 4);
      plan->unservable += "...";
    }
  }
}

void Scheduler::EndUnservableJob(SlotPlan& plan) {
  ServedJob& job = *plan.job;
  const Status why = Status::DataLoss(plan.unservable);
  job.ring->Unclaim(plan.slot);
  {
    MutexLock lock(&mu_);
    auto it = jobs_.find(job.id);
    if (it != jobs_.end()) {
      LeaveSampler(it->second);
      it->second.finished = true;
      it->second.failure = why;
    }
  }
  // The batches published before stay readable; the client reports `why`
  // once it has taken them (docs/protocol.md).
  job.ring->Close(why);
  spdlog::warn("job {} ({}) cannot go on: {}", job.id, job.plan->spec.name, plan.unservable);
}

std::vector<ItemTask> Scheduler::PlanSubstitutes(std::vector<std::unique_ptr<SlotPlan>>& plans,
                                                 uint32_t attempt) {
  std::vector<ItemTask> tasks;
  MutexLock lock(&mu_);
  for (auto& plan : plans) {
    if (!plan->unservable.empty()) continue;  // the job ends: nothing to replace
    const uint32_t dataset_index = plan->job->plan->dataset_index;
    for (uint32_t pos = 0; pos < plan->items.size(); ++pos) {
      if (!plan->errors[pos].empty()) failed_items_.insert({dataset_index, plan->items[pos]});
    }
    auto known_to_fail = [&](ItemId item) {
      mu_.AssertHeld();  // Substitute calls back before it returns, under our lock
      return failed_items_.count({dataset_index, item}) > 0;
    };
    for (uint32_t pos = 0; pos < plan->items.size(); ++pos) {
      if (plan->errors[pos].empty()) continue;
      // A position is counted once, however many of its substitutes fail.
      if (attempt == 1 && plan->substituted++ == 0) plan->first_failure = plan->errors[pos];
      const ItemId item =
          plan->job->Substitute(plan->epoch, plan->items[pos], attempt, known_to_fail);
      if (item == plan->items[pos]) continue;  // nothing else to try: the job ends
      plan->errors[pos].clear();
      plan->items[pos] = item;
      tasks.push_back(ItemTask{plan->job->plan.get(), item, {{plan.get(), pos}}});
    }
  }
  return tasks;
}

bool Scheduler::Wanted(const SlotPlan& plan) const {
  // A job that could not go on (EndUnservableJob) wants no batch planned
  // before it ended, however soon after its last one.
  auto it = jobs_.find(plan.job->id);
  return it != jobs_.end() && it->second.generation == plan.generation && it->second.failure.ok();
}

bool Scheduler::ReadsObjects(std::span<const ItemTask> tasks) {
  return std::any_of(tasks.begin(), tasks.end(),
                     [](const ItemTask& task) { return task.dataset().reads_objects(); });
}

void Scheduler::Publish(SlotPlan& plan) {
  ServedJob& job = *plan.job;
  // Every position holds its sample: a batch with one still failed is never
  // published (FindUnservable), so none is left out.
  std::vector<int64_t> labels;
  labels.reserve(plan.items.size());
  for (ItemId item : plan.items) labels.push_back(job.plan->dataset->label(item));
  std::vector<std::span<const uint8_t>> fields;
  if (!job.plan->field_map.empty()) {
    for (const cache::FieldRecord& record : plan.fields) {
      fields.push_back(record != nullptr ? std::span<const uint8_t>(*record)
                                         : std::span<const uint8_t>());
    }
  }
  const auto kept = static_cast<uint32_t>(plan.items.size());
  job.counters.batches++;
  job.counters.samples += kept;
  job.counters.skipped += plan.substituted;
  job.ring->Publish(plan.slot, BatchDescription{.flags = plan.flags,
                                                .generation = plan.generation,
                                                .epoch = plan.epoch,
                                                .batch_index = plan.batch_index,
                                                .items = plan.items,
                                                .labels = labels,
                                                .fields = fields,
                                                .skipped = plan.substituted,
                                                .first_error = plan.first_failure});
}

void Scheduler::Loop() {
  // The wave planned while the one before it was prepared (ReadsObjects).
  std::vector<std::unique_ptr<SlotPlan>> next_plans;
  std::vector<ItemTask> next_tasks;
  while (true) {
    std::vector<std::unique_ptr<SlotPlan>> plans = std::move(next_plans);
    std::vector<ItemTask> tasks = std::move(next_tasks);
    next_plans.clear();
    next_tasks.clear();
    {
      MutexLock lock(&mu_);
      while (plans.empty() && !stop_) {
        dirty_ = false;
        if (PlanWave(&plans, &tasks)) break;
        auto wait = std::chrono::duration_cast<Clock::duration>(kIdleWait);
        if (gate_.any_held()) wait = kHoldPoll;
        if (auto deadline = gate_.next_deadline()) {
          wait =
              std::clamp<Clock::duration>(*deadline - clock_->Now(), Clock::duration::zero(), wait);
        }
        const auto until = Clock::now() + wait;
        while (!stop_ && !dirty_ && cv_.WaitUntil(&mu_, until)) {
        }
      }
      if (stop_) {
        for (auto& plan : plans) plan->job->ring->Unclaim(plan->slot);
        return;
      }
      // The next wave is planned now, when a job can take it, so that the
      // pipeline fetches its objects while it prepares this one: a GET's
      // round trip then hides behind the decodes. The waves are planned by
      // the same steps in the same order, so what each job receives keeps
      // every property it had; only the gate sees the rings a wave sooner,
      // which local reads have no use for. The next wave's demand changes
      // wait until this wave is prepared (DemandLedger::Defer), so that the
      // tiers keep what it reads for the next one.
      if (options_.plan_next_wave && ReadsObjects(tasks)) {
        ledger_.Defer();
        PlanWave(&next_plans, &next_tasks);
      }
    }
    const auto start = Clock::now();
    pipeline_->RunBeforeNext(tasks, next_tasks);
    // A sample that failed is replaced by a substitute, so every batch holds
    // what its position in the epoch promises; unless the dataset changed
    // under the job, or nothing could replace it: then the job ends, with
    // the count and the first failure, rather than receive a short epoch.
    for (uint32_t attempt = 1; attempt <= kSubstituteAttempts; ++attempt) {
      FindUnservable(plans, /*substitutes_done=*/false);
      std::vector<ItemTask> retry = PlanSubstitutes(plans, attempt);
      if (retry.empty()) break;
      pipeline_->Run(retry);
    }
    FindUnservable(plans, /*substitutes_done=*/true);
    const uint64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
    std::vector<SlotPlan*> unservable;
    {
      // Under mu_, so that a Seek or a close either comes before a batch is
      // published (the batch is then not published) or counts it in the
      // ring.
      MutexLock lock(&mu_);
      ledger_.ApplyDeferred();
      for (auto& plan : plans) {
        plan->job->counters.produce_ns += ns / plans.size();
        if (!plan->unservable.empty()) {
          unservable.push_back(plan.get());
          continue;
        }
        totals_.prepared++;
        if (Wanted(*plan)) {
          Publish(*plan);
        } else {
          plan->job->ring->Unclaim(plan->slot);
          CountUnread(*plan->job, 1);
        }
      }
    }
    for (SlotPlan* plan : unservable) EndUnservableJob(*plan);
  }
}

BatchTotalsSnapshot Scheduler::Totals() const {
  MutexLock lock(&mu_);
  return totals_;
}

std::vector<ItemId> Scheduler::DrawnAhead(JobId job_id) const {
  MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return {};
  std::vector<ItemId> items(it->second.drawn_ahead.begin(), it->second.drawn_ahead.end());
  items.insert(items.end(), it->second.drawn_next.begin(), it->second.drawn_next.end());
  return items;
}

std::vector<SamplerGroupSnapshot> Scheduler::Snapshot() const {
  MutexLock lock(&mu_);
  // Substitutions of the epochs in progress are still held by the policies.
  std::map<const SamplerGroup*, uint64_t> substitutions;
  std::map<const SamplerGroup*, std::set<uint64_t>> seeds;
  for (const auto& [id, p] : jobs_) {
    seeds[p.group].insert(p.job->plan->spec.seed);
    if (p.in_sampler) substitutions[p.group] += p.group->policy->Substitutions(id).substitutions;
  }
  std::vector<SamplerGroupSnapshot> groups;
  for (const auto& [key, group] : groups_) {
    SamplerGroupSnapshot& s = groups.emplace_back();
    s.dataset = group->dataset;
    s.policy = group->policy_name;
    s.jobs = group->jobs;
    s.requests = group->requests;
    s.loads = group->loads;
    s.loads_per_request = group->requests ? double(group->loads) / group->requests : 0.0;
    s.file_reads = group->costs->file_reads.load();
    s.decodes = group->costs->decodes.load();
    s.cache_hits = group->costs->cache_hits.load();
    const uint64_t requests = group->requests;
    const auto per_request = [requests](uint64_t count) {
      return requests ? double(count) / double(requests) : 0.0;
    };
    s.file_reads_per_request = per_request(s.file_reads);
    s.decodes_per_request = per_request(s.decodes);
    s.cache_hits_per_request = per_request(s.cache_hits);
    s.substitutions = group->substitutions + substitutions[group.get()];
    s.job_seeds = seeds[group.get()].size();
    s.orders_follow_seeds = group->policy->OrdersFollowJobSeeds();
  }
  return groups;
}

}  // namespace galley
