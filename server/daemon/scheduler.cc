#include "server/daemon/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "galley/random.h"
#include "server/daemon/restarting_loop.h"

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

uint64_t HashString(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

}  // namespace

RingView* RingView::Shared() {
  static SharedRings rings;
  return &rings;
}

SchedulerOptions SchedulerOptions::From(const DaemonOptions& options) {
  SchedulerOptions o;
  o.sampler_seed = options.sampler_seed;
  o.gate.hold_budget_per_epoch = std::chrono::milliseconds(options.hold_budget_ms);
  o.gate.thin_hold = std::chrono::milliseconds(options.thin_hold_ms);
  o.gate.peer_stall = std::chrono::milliseconds(options.peer_stall_ms);
  return o;
}

Scheduler::Scheduler(SchedulerOptions options, ItemPipeline* pipeline, cache::TieredCache* cache,
                     CachePlanner* planner, SchedulerHooks hooks)
    : options_(options),
      pipeline_(pipeline),
      cache_(cache),
      planner_(planner),
      clock_(hooks.clock != nullptr ? hooks.clock : SchedulerClock::Steady()),
      rings_(hooks.rings != nullptr ? hooks.rings : RingView::Shared()),
      gate_(options.gate) {}

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

Status Scheduler::AddJob(const std::shared_ptr<ServedJob>& job) {
  MutexLock lock(&mu_);
  auto key = std::make_pair(job->dataset.get(), job->policy);
  auto& group = groups_[key];
  if (!group) {
    SamplerOptions sampler_options;
    sampler_options.policy = job->policy;
    sampler_options.seed =
        options_.sampler_seed ^ HashString(job->dataset->root().string()) ^ options_.stream_salt;
    if (job->policy == SamplingPolicyNameOf(SamplingPolicyKind::kOds) && cache_ != nullptr) {
      // Runs on the scheduler thread under mu_; the tiers lock themselves.
      sampler_options.is_cached = [cache = cache_,
                                   dataset_index = job->dataset_index](ItemId item) {
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
    group->dataset = job->dataset->root().string();
    group->policy_name = job->policy;
    group->policy = std::move(policy).value();
  }
  group->jobs++;
  Production p;
  p.job = job;
  p.group = group.get();
  p.epoch = job->spec.start_epoch;
  p.batch_index = job->spec.start_batch;
  p.resuming = job->spec.start_batch > 0 || !job->spec.resume_consumed.empty();
  p.dataset_index = job->dataset_index;
  jobs_.emplace(job->id, std::move(p));
  if (planner_ != nullptr) {
    planner_->JobOpened(
        job->id, PlannedJob{job->dataset, AugmentationSignature(*job),
                            job->pipeline->sample_bytes(), job->subset.size(), job->pipeline});
  }
  dirty_ = true;
  cv_.SignalAll();
  return Status::Ok();
}

void Scheduler::EnterEpochDemand(Production& p, std::span<const ItemId> items,
                                 std::span<const ItemId> repeats) {
  if (cache_ == nullptr || items.empty()) return;
  std::vector<cache::Key> keys;
  keys.reserve(items.size() + repeats.size());
  p.undelivered.assign(p.job->dataset->size(), false);
  p.undelivered_again.clear();
  for (std::span<const ItemId> part : {items, repeats}) {
    for (ItemId item : part) {
      keys.push_back(cache::MakeKey(p.dataset_index, item));
      if (p.undelivered[item]) {
        p.undelivered_again[item]++;
      } else {
        p.undelivered[item] = true;
      }
    }
  }
  p.undelivered_count = keys.size();
  cache_->demand().AddDemand(keys);
}

void Scheduler::ConsumeDemand(Production& p, ItemId item) {
  if (cache_ == nullptr || item >= p.undelivered.size() || !p.undelivered[item]) return;
  if (auto again = p.undelivered_again.find(item); again != p.undelivered_again.end()) {
    if (--again->second == 0) p.undelivered_again.erase(again);
  } else {
    p.undelivered[item] = false;
  }
  p.undelivered_count--;
  cache_->demand().ConsumeDemand(cache::MakeKey(p.dataset_index, item));
}

void Scheduler::LeaveSampler(Production& p) {
  if (p.in_sampler) {
    p.group->substitutions +=
        p.group->policy->Substitutions(static_cast<JobId>(p.job->id)).substitutions;
    p.group->policy->RemoveJob(static_cast<JobId>(p.job->id));
    p.in_sampler = false;
  }
  if (p.undelivered_count > 0) {
    std::vector<cache::Key> keys;
    keys.reserve(p.undelivered_count);
    for (ItemId item = 0; item < p.undelivered.size(); ++item) {
      if (p.undelivered[item]) keys.push_back(cache::MakeKey(p.dataset_index, item));
    }
    for (const auto& [item, copies] : p.undelivered_again) {
      keys.insert(keys.end(), copies, cache::MakeKey(p.dataset_index, item));
    }
    cache_->demand().DropDemand(keys);
  }
  p.undelivered.clear();
  p.undelivered.shrink_to_fit();
  p.undelivered_again.clear();
  p.undelivered_count = 0;
  p.repeats.clear();
  p.repeats_served = 0;
}

void Scheduler::CountUnread(ServedJob& job, uint64_t batches) {
  job.counters.unread += batches;
  totals_.unread += batches;
}

void Scheduler::RemoveJob(uint64_t job_id) {
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
  if (planner_ != nullptr) planner_->JobClosed(job_id);
  dirty_ = true;
  cv_.SignalAll();
}

Result<uint64_t> Scheduler::Seek(uint64_t job_id, uint64_t epoch,
                                 const std::vector<uint64_t>* items) {
  MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return Status::NotFound("no such job");
  Production& p = it->second;
  const JobSpec& spec = p.job->spec;
  if (spec.epochs != 0 && epoch >= spec.start_epoch + spec.epochs) {
    return Status::InvalidArgument("epoch " + std::to_string(epoch) +
                                   " is past the job's last epoch");
  }
  if (!p.failure.ok()) return p.failure;  // the job cannot go on (EndUnservableJob)
  if (p.job->listed() != (items != nullptr)) {
    return Status::InvalidArgument(
        p.job->listed() ? "this job's client lists each epoch's items: SeekEpoch needs 'items'"
                        : "this job's items come from its subset and split: SeekEpoch takes no "
                          "'items' (open the job with 'epoch_items' to list them)");
  }
  if (items != nullptr) GALLEY_RETURN_IF_ERROR(p.job->ListEpoch(epoch, *items));
  // The consumer waits for the new epoch now (its Seek is a request it
  // waits on), so it drops the batches published before unread.
  CountUnread(*p.job, rings_->ReadyOf(*p.job, p.generation));
  LeaveSampler(p);
  p.epoch = epoch;
  p.batch_index = 0;
  p.resuming = false;
  p.finished = false;
  p.generation++;
  dirty_ = true;
  cv_.SignalAll();
  return p.generation;
}

void Scheduler::ConsumerReady(uint64_t job_id) {
  {
    MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return;
    it->second.consumer_ready = true;
    dirty_ = true;
  }
  cv_.SignalAll();
}

void Scheduler::Wake() {
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
        .opened_at = p.job->opened_at,
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

bool Scheduler::PlanWave(std::vector<std::unique_ptr<SlotPlan>>* plans,
                         std::vector<ItemTask>* tasks) {
  // Claim one slot for each job the gate lets produce. Jobs over one dataset
  // that are claimed in the same wave share its rounds; a job left out is
  // masked in the sampler and keeps the items it still needs.
  std::unordered_map<JobId, SlotPlan*> claimed;
  std::unordered_map<JobId, Production*> production;
  std::map<SamplerGroup*, std::vector<Production*>> by_group;
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
    plan->items.reserve(p.job->spec.batch_size);
    if (!p.in_sampler) {
      auto items = p.job->EpochItems(p.epoch, p.resuming);
      // A random policy draws distinct items; the further copies of one
      // the epoch holds twice come after its order.
      if (p.group->policy_name != SamplingPolicyNameOf(SamplingPolicyKind::kSequential)) {
        p.repeats = TakeRepeats(items, p.job->dataset->size());
        p.repeats_served = 0;
      }
      const JobSamplingOptions sampling{
          .substitution_fraction = p.job->spec.ods_fraction,
          .seed = JobEpochSeed(p.job->spec, p.epoch, options_.sampler_seed)};
      if (Status s = p.group->policy->AddJob(static_cast<JobId>(id), items, sampling); !s.ok()) {
        spdlog::error("job {}: sampler refused epoch {}: {}", id, p.epoch, s.ToString());
      } else {
        EnterEpochDemand(p, items, p.repeats);
      }
      p.in_sampler = !items.empty();
    }
    claimed[static_cast<JobId>(id)] = plan.get();
    production[static_cast<JobId>(id)] = &p;
    by_group[p.group].push_back(&p);
    plans->push_back(std::move(plan));
  }
  if (plans->empty()) return false;
  for (auto& [group, members] : by_group) {
    std::unordered_map<ItemId, size_t> task_of_item;
    // A batch takes what its position in the epoch holds (BatchTarget), so
    // every epoch has exactly BatchesPerEpoch() batches.
    auto ready = [&](JobId job) {
      auto it = claimed.find(job);
      if (it == claimed.end()) return false;
      const SlotPlan& plan = *it->second;
      return plan.items.size() < plan.job->BatchTarget(plan.batch_index);
    };
    const Dataset* dataset = members.front()->job->dataset.get();
    const uint32_t dataset_index = members.front()->dataset_index;
    Round round;
    while (group->policy->Next(ready, &round)) {
      for (const Delivery& delivery : round.deliveries) {
        auto [it, inserted] = task_of_item.try_emplace(delivery.item, tasks->size());
        if (inserted) tasks->push_back(ItemTask{dataset, delivery.item, {}, dataset_index});
        ItemTask& task = (*tasks)[it->second];
        for (JobId receiver : delivery.receivers) {
          SlotPlan* plan = claimed.at(receiver);
          task.deliveries.push_back({plan, static_cast<uint32_t>(plan->items.size())});
          plan->items.push_back(delivery.item);
          ConsumeDemand(*production.at(receiver), delivery.item);
        }
        group->requests += delivery.receivers.size();
        group->loads += inserted ? 1 : 0;
      }
    }
    // Close epochs at their last batch, decide flags, and advance counters.
    for (Production* p : members) {
      SlotPlan* plan = claimed.at(static_cast<JobId>(p->job->id));
      // The sampler runs dry before the batch is full when the epoch holds
      // an item twice (its copies follow), and when a resumed epoch was
      // given fewer items than it has positions left: substitutes keep the
      // batch count exact then too.
      const uint64_t target = p->job->BatchTarget(plan->batch_index);
      for (uint32_t attempt = 0; plan->items.size() < target;) {
        ItemId item;
        if (p->repeats_served < p->repeats.size()) {
          item = p->repeats[p->repeats_served++];
          ConsumeDemand(*p, item);
        } else {
          item = p->job->Substitute(p->epoch, 0, attempt++, [&](ItemId i) {
            mu_.AssertHeld();  // Substitute calls back before it returns, under our lock
            return failed_items_.count({dataset_index, i}) > 0;
          });
        }
        auto [it, inserted] = task_of_item.try_emplace(item, tasks->size());
        if (inserted) tasks->push_back(ItemTask{dataset, item, {}, dataset_index});
        (*tasks)[it->second].deliveries.push_back(
            {plan, static_cast<uint32_t>(plan->items.size())});
        plan->items.push_back(item);
      }
      const bool last = plan->batch_index + 1 >= p->job->BatchesPerEpoch();
      if (last) {
        LeaveSampler(*p);
        p->resuming = false;
        plan->flags |= wire::kLastInEpoch;
        p->job->counters.epochs_completed++;
        p->epoch++;
        p->batch_index = 0;
        const JobSpec& spec = p->job->spec;
        if (spec.epochs != 0 && p->epoch >= spec.start_epoch + spec.epochs) {
          plan->flags |= wire::kEndOfStream;
          p->finished = true;
        }
      } else {
        p->batch_index++;
      }
    }
  }
  // An epoch with no batch at all (drop_last, fewer items than batch_size)
  // is one empty batch flagged last, so the client still sees it end.
  for (auto& plan : *plans) plan->ResetOutcomes();
  return true;
}

void Scheduler::FindUnservable(std::vector<std::unique_ptr<SlotPlan>>& plans,
                               bool substitutes_done) {
  for (auto& plan : plans) {
    if (!plan->unservable.empty()) continue;
    uint32_t changed = 0, failed = 0;
    const std::string* first_changed = nullptr;
    const std::string* first_failed = nullptr;
    for (uint32_t pos = 0; pos < plan->items.size(); ++pos) {
      if (plan->errors[pos].empty()) continue;
      ++failed;
      if (first_failed == nullptr) first_failed = &plan->errors[pos];
      if (plan->dataset_changed[pos] != 0) {
        ++changed;
        if (first_changed == nullptr) first_changed = &plan->errors[pos];
      }
    }
    const std::string where = "epoch " + std::to_string(plan->epoch) + ", batch " +
                              std::to_string(plan->batch_index + 1) + " of " +
                              std::to_string(plan->job->BatchesPerEpoch());
    if (changed > 0) {
      plan->unservable = "dataset changed under the job: " + Samples(changed) + " of " + where +
                         " unreadable; iterate again to re-list it. First: " + *first_changed;
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
  spdlog::warn("job {} ({}) cannot go on: {}", job.id, job.spec.name, plan.unservable);
}

std::vector<ItemTask> Scheduler::PlanSubstitutes(std::vector<std::unique_ptr<SlotPlan>>& plans,
                                                 uint32_t attempt) {
  std::vector<ItemTask> tasks;
  MutexLock lock(&mu_);
  for (auto& plan : plans) {
    if (!plan->unservable.empty()) continue;  // the job ends: nothing to replace
    const uint32_t dataset_index = plan->job->dataset_index;
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
      tasks.push_back(ItemTask{plan->job->dataset.get(), item, {{plan.get(), pos}}, dataset_index});
    }
  }
  return tasks;
}

bool Scheduler::Wanted(const SlotPlan& plan) const {
  auto it = jobs_.find(plan.job->id);
  return it != jobs_.end() && it->second.generation == plan.generation;
}

void Scheduler::Publish(SlotPlan& plan) {
  ServedJob& job = *plan.job;
  BatchRing& ring = *job.ring;
  const auto& g = ring.geometry();
  wire::SlotHeader* slot = ring.slot(plan.slot);
  uint64_t* ids = wire::SlotItemIds(slot);
  int64_t* labels = wire::SlotLabels(slot, g);
  // Every position holds its sample: a batch with one still failed is never
  // published (FindUnservable), so none is left out.
  const auto kept = static_cast<uint32_t>(plan.items.size());
  const uint32_t skipped = plan.substituted;
  const std::string& first_error = plan.first_failure;
  for (uint32_t pos = 0; pos < kept; ++pos) {
    ids[pos] = plan.items[pos];
    labels[pos] = job.dataset->label(plan.items[pos]);
  }
  slot->flags = plan.flags;
  slot->generation = plan.generation;
  slot->epoch = plan.epoch;
  slot->batch_index = plan.batch_index;
  slot->sample_count = kept;
  slot->skipped_count = skipped;
  const size_t n = std::min(first_error.size(), wire::kMaxErrorText - 1);
  std::memcpy(slot->first_error, first_error.data(), n);
  slot->first_error[n] = '\0';
  job.counters.batches++;
  job.counters.samples += kept;
  job.counters.skipped += skipped;
  ring.Publish(plan.slot);
}

void Scheduler::Loop() {
  while (true) {
    std::vector<std::unique_ptr<SlotPlan>> plans;
    std::vector<ItemTask> tasks;
    {
      MutexLock lock(&mu_);
      while (!stop_) {
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
    }
    const auto start = Clock::now();
    pipeline_->Run(tasks);
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

std::vector<SamplerGroupSnapshot> Scheduler::Snapshot() const {
  MutexLock lock(&mu_);
  // Substitutions of the epochs in progress are still held by the policies.
  std::map<const SamplerGroup*, uint64_t> substitutions;
  std::map<const SamplerGroup*, std::set<uint64_t>> seeds;
  for (const auto& [id, p] : jobs_) {
    seeds[p.group].insert(p.job->spec.seed);
    if (p.in_sampler) {
      const JobId job = static_cast<JobId>(id);
      substitutions[p.group] += p.group->policy->Substitutions(job).substitutions;
    }
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
    s.substitutions = group->substitutions + substitutions[group.get()];
    s.job_seeds = seeds[group.get()].size();
    s.orders_follow_seeds = group->policy->OrdersFollowJobSeeds();
  }
  return groups;
}

}  // namespace galley
