#include "tests/unit/drift_harness.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "galley/cache/eviction_policy.h"
#include "galley/cache/tiered_cache.h"
#include "galley/daemon/scheduler.h"
#include "galley/random.h"

namespace galley::testing {
namespace {

using Micros = int64_t;
constexpr Micros kTick = 250;

Micros ToMicros(double ms) { return static_cast<Micros>(std::llround(ms * 1000.0)); }

class SimulatedClock final : public SchedulerClock {
 public:
  TimePoint Now() const override { return origin_ + std::chrono::microseconds(now_); }
  void Set(Micros now) { now_ = now; }

 private:
  const TimePoint origin_ = TimePoint{} + std::chrono::hours(1);
  Micros now_ = 0;
};

// A ring as counts: a claimed slot is being filled until its wave ends,
// then ready until the consumer takes it.
class SimulatedRings final : public RingView {
 public:
  struct Ring {
    uint32_t slots = 0;
    uint32_t filling = 0;
    uint32_t ready = 0;
  };
  RingOccupancy Occupancy(const ServedJob& job) const override {
    const Ring& r = rings_.at(job.id);
    return {r.slots, r.slots - r.filling - r.ready, r.ready};
  }
  std::optional<uint32_t> Claim(ServedJob& job) override {
    Ring& r = rings_.at(job.id);
    if (r.filling + r.ready == r.slots) return std::nullopt;
    return r.filling++;
  }
  uint32_t ReadyOf(const ServedJob& job, uint64_t) const override {
    return rings_.at(job.id).ready;
  }
  Ring& at(JobId job) { return rings_[job]; }

 private:
  std::map<JobId, Ring> rings_;
};

// Uniform in [0, 1) from a SplitMix64 stream: the same draws with every
// compiler and standard library.
class Stream {
 public:
  explicit Stream(uint64_t seed) : state_(seed) {}
  double Uniform() {
    state_ += kGoldenGamma;
    return static_cast<double>(Mix64(state_) >> 11) * 0x1.0p-53;
  }
  double Exponential(double mean) { return -mean * std::log1p(-Uniform()); }

 private:
  uint64_t state_;
};

// The job's scripted pauses plus, under machine load, random ones up to the
// horizon, in time order.
std::vector<std::pair<Micros, Micros>> PausesOf(const DriftScenario& scenario, size_t index) {
  std::vector<std::pair<Micros, Micros>> pauses;
  for (const ConsumerPause& pause : scenario.jobs[index].pauses) {
    pauses.emplace_back(ToMicros(pause.at_ms), ToMicros(pause.at_ms + pause.for_ms));
  }
  const MachineLoad& load = scenario.load;
  if (scenario.jobs[index].under_load && load.mean_run_ms > 0 && load.mean_pause_ms > 0) {
    Stream stream(SplitMix64(load.seed) ^ SplitMix64(index + 1));
    for (double t = stream.Exponential(load.mean_run_ms); t < scenario.horizon_ms;) {
      const double length = stream.Exponential(load.mean_pause_ms);
      pauses.emplace_back(ToMicros(t), ToMicros(t + length));
      t += length + stream.Exponential(load.mean_run_ms);
    }
  }
  std::sort(pauses.begin(), pauses.end());
  return pauses;
}

struct Consumer {
  std::shared_ptr<ServedJob> job;
  std::vector<std::pair<Micros, Micros>> pauses;  // [from, to), sorted
  size_t next_pause = 0;
  Micros period = 0;
  Micros jitter = 0;
  uint32_t stall_every = 0;
  Micros stall = 0;
  std::unique_ptr<Stream> steps;  // the jitter's draws
  Micros start = 0;
  Micros due = 0;  // when it wants its next batch
  bool asked = false;
  uint64_t batches_total = 0;
  DriftJobOutcome outcome;

  bool PausedAt(Micros now) {
    while (next_pause < pauses.size() && pauses[next_pause].second <= now) ++next_pause;
    return next_pause < pauses.size() && pauses[next_pause].first <= now;
  }
};

// What galleyd knows of each job when its decoded tier chooses what to keep:
// the items the job's batches have not taken yet this epoch, how many, how
// many epochs it has left, how fast its batches take items (items placed per
// second since it opened) and, optionally, the items it drew ahead, whose
// order is known. From these, when each item is expected to be asked for
// again: a job that still needs it takes it at a uniformly random place
// among its remaining items not drawn ahead, one that does not at a
// uniformly random place in its next epoch, one that drew it ahead at its
// place in the queue.
class NextRequestOracle {
 public:
  NextRequestOracle(const DriftScenario& scenario, NextRequestRule rule)
      : epochs_(scenario.epochs), rule_(rule) {
    for (const DriftJob& spec : scenario.jobs) {
      Job& job = jobs_.emplace_back();
      job.in_subset.assign(scenario.items, spec.subset.empty());
      for (ItemId item : spec.subset) job.in_subset[item] = true;
      job.size = spec.subset.empty() ? scenario.items : spec.subset.size();
      job.needs = job.in_subset;
      job.remaining = job.size;
      job.queue_place.assign(scenario.items, -1);
    }
  }

  // The scheduler placed `items` in a batch of `epoch` for job `index`.
  void Placed(size_t index, uint64_t epoch, const std::vector<ItemId>& items) {
    Job& job = jobs_[index];
    if (epoch != job.epoch) {
      job.epoch = epoch;
      job.needs = job.in_subset;
      job.remaining = job.size;
    }
    for (ItemId item : items) {
      if (job.needs[item]) {
        job.needs[item] = false;
        job.remaining--;
      }
    }
    job.placed += items.size();
  }

  void SetNow(Micros now) { now_s_ = std::max(1e-3, static_cast<double>(now) / 1e6); }

  // The items job `index` drew ahead, in the order its batches will take
  // them (Scheduler::DrawnAhead).
  void SetDrawnAhead(size_t index, const std::vector<ItemId>& queue) {
    Job& job = jobs_[index];
    for (ItemId item : job.queued) job.queue_place[item] = -1;
    job.queued.clear();
    job.queued_now = 0;
    for (size_t place = 0; place < queue.size(); ++place) {
      const ItemId item = queue[place];
      if (job.queue_place[item] >= 0) continue;  // in this epoch's queue and the next's
      job.queue_place[item] = static_cast<int32_t>(place);
      job.queued.push_back(item);
      if (job.needs[item]) job.queued_now++;
    }
  }

  // `item` as a tier's demand: higher is sooner, 0 never again.
  uint32_t Urgency(ItemId item) const {
    windows_.clear();
    for (const Job& job : jobs_) {
      const double rate = std::max(static_cast<double>(job.placed), 1.0) / now_s_;
      const double remaining = static_cast<double>(job.remaining);
      if (const int32_t place = job.queue_place[item]; place >= 0) {
        windows_.push_back({(place + 1) / rate, (place + 1) / rate});
      } else if (job.needs[item]) {
        windows_.push_back({static_cast<double>(job.queued_now) / rate, remaining / rate});
      } else if (job.in_subset[item] && job.epoch + 1 < epochs_) {
        const double queued_next = static_cast<double>(job.queued.size() - job.queued_now);
        windows_.push_back(
            {(remaining + queued_next) / rate, (remaining + static_cast<double>(job.size)) / rate});
      }
    }
    if (windows_.empty()) return 0;
    double seconds = 0;
    switch (rule_) {
      case NextRequestRule::kFirstExpected:
        seconds = std::numeric_limits<double>::infinity();
        for (const RequestWindow& w : windows_) seconds = std::min(seconds, (w.from + w.to) / 2);
        break;
      case NextRequestRule::kExpectedFirst:
        seconds = ExpectedFirstRequest(windows_);
        break;
      case NextRequestRule::kRequestRate: {
        // Each job that may take the item now takes it with probability
        // 1/(window) per second; an item no job may take now comes after
        // every one that some job may.
        double rate = 0;
        for (const RequestWindow& w : windows_) {
          if (w.from == 0 && w.to > 0) rate += 1 / w.to;
        }
        seconds = rate > 0 ? 1 / rate : 3600 + ExpectedFirstRequest(windows_);
        break;
      }
    }
    const double micros = std::clamp(seconds * 1e6, 0.0, 4e9);
    return static_cast<uint32_t>(4e9 - micros) + 1;
  }

 private:
  struct Job {
    std::vector<bool> in_subset;
    std::vector<bool> needs;
    uint64_t size = 0;
    uint64_t remaining = 0;
    uint64_t epoch = 0;
    uint64_t placed = 0;
    std::vector<int32_t> queue_place;  // item -> its place in the drawn-ahead queue, or -1
    std::vector<ItemId> queued;        // the items queue_place holds
    uint64_t queued_now = 0;           // of them, items of the current epoch
  };
  const uint32_t epochs_;
  const NextRequestRule rule_;
  std::vector<Job> jobs_;
  double now_s_ = 1e-3;
  mutable std::vector<RequestWindow> windows_;  // Urgency's scratch
};

// The rule `name` names; nullopt for "demand"; InvalidArgument otherwise.
Result<std::optional<NextRequestRule>> RuleNamed(const std::string& name) {
  if (name == "demand") return std::optional<NextRequestRule>();
  if (name == "expected-next") return std::optional(NextRequestRule::kFirstExpected);
  if (name == "expected-min") return std::optional(NextRequestRule::kExpectedFirst);
  if (name == "request-rate") return std::optional(NextRequestRule::kRequestRate);
  return Status::InvalidArgument("unknown decoded eviction \"" + name +
                                 "\" (want demand, expected-next, expected-min or request-rate)");
}

}  // namespace

Status WriteEmptyImageFolder(const std::filesystem::path& root, int items) {
  std::error_code error;
  std::filesystem::create_directories(root / "a", error);
  if (error) return Status::Internal("cannot create " + root.string() + ": " + error.message());
  for (int i = 0; i < items; ++i) {
    std::ofstream file(root / "a" / (std::to_string(i) + ".jpg"));
    if (!file) return Status::Internal("cannot write in " + root.string());
  }
  return Status::Ok();
}

Result<DriftOutcome> RunDrift(const std::shared_ptr<const Dataset>& dataset,
                              const DriftScenario& scenario, uint64_t seed) {
  std::unique_ptr<cache::TieredCache> cache;
  cache::BlobPtr item_blob = std::make_shared<cache::Blob>(cache::Blob{.bytes = {0}});
  if (scenario.cache_items > 0) {
    cache::CacheOptions options;
    options.cache_bytes = scenario.cache_items * cache::ChargedBytes(*item_blob);
    options.split = {.encoded_pct = 0, .decoded_pct = 100, .augmented_pct = 0};
    options.augmented_reuse_limit = 0;
    options.decoded_arena = false;
    auto made = cache::TieredCache::Create(options);
    if (!made.ok()) return made.status();
    cache = std::move(made).value();
  }
  GALLEY_ASSIGN_OR_RETURN(const std::optional<NextRequestRule> rule,
                          RuleNamed(scenario.decoded_eviction));
  std::optional<NextRequestOracle> oracle;
  // With a rule by next request, the decoded tier is a Tier of its own whose
  // entries' demand is their urgency (RefCountEviction keeps the highest and
  // admits a newcomer only if it is more urgent than what it displaces), set
  // again for every resident entry before each wave's requests.
  std::unique_ptr<cache::Tier> by_next_tier;
  std::unordered_set<ItemId> resident;
  std::vector<std::vector<ItemId>> queues(scenario.jobs.size());  // Scheduler::DrawnAhead
  if (cache != nullptr && rule) {
    oracle.emplace(scenario, *rule);
    by_next_tier = std::make_unique<cache::Tier>(
        "decoded", scenario.cache_items * cache::ChargedBytes(*item_blob),
        cache::MakeEvictionPolicy("refcount").value());
  }
  SimulatedClock clock;
  SimulatedRings rings;
  SchedulerOptions options;
  options.sampler_seed = seed;
  // A salt equal to the root's hash cancels it from the stream's seed, so a
  // run depends on `seed` alone, not on the temporary folder's name.
  options.stream_salt = DatasetRootHash(dataset->root().string());
  options.gate = scenario.gate;
  options.draw_ahead_batches = scenario.draw_ahead_batches;
  options.draw_across_epochs = scenario.draw_across_epochs;
  Scheduler scheduler(options, nullptr, cache.get(),
                      SchedulerHooks{.clock = &clock, .rings = &rings});

  std::vector<Consumer> consumers(scenario.jobs.size());
  for (size_t i = 0; i < scenario.jobs.size(); ++i) {
    const DriftJob& spec = scenario.jobs[i];
    auto plan = std::make_shared<JobPlan>();
    plan->spec.batch_size = scenario.batch;
    plan->spec.epochs = scenario.epochs;
    plan->subset = spec.subset;
    if (plan->subset.empty()) {
      for (ItemId item = 0; item < scenario.items; ++item) plan->subset.push_back(item);
    }
    plan->epoch_size = plan->subset.size();
    plan->dataset = dataset;
    plan->policy = scenario.policy;
    plan->opened_at = clock.Now();
    auto job = std::make_shared<ServedJob>(std::move(plan));
    job->id = i + 1;
    rings.at(job->id).slots = spec.ring_slots;
    GALLEY_RETURN_IF_ERROR(scheduler.OnJobOpened(job));
    Consumer& c = consumers[i];
    c.job = job;
    c.pauses = PausesOf(scenario, i);
    c.period = ToMicros(spec.period_ms);
    c.jitter = ToMicros(spec.jitter_ms);
    c.stall_every = spec.stall_every;
    c.stall = ToMicros(spec.stall_ms);
    c.steps = std::make_unique<Stream>(SplitMix64(seed ^ 0x5eedULL) ^ SplitMix64(i + 101));
    c.start = ToMicros(spec.start_ms);
    c.due = c.start;
    c.batches_total = job->plan->BatchesPerEpoch() * scenario.epochs;
  }

  DriftOutcome outcome;
  std::vector<std::unique_ptr<SlotPlan>> in_flight;
  Micros busy_until = 0;
  uint64_t waves = 0;
  const Micros horizon = ToMicros(scenario.horizon_ms);
  for (Micros now = 0; now < horizon; now += kTick) {
    clock.Set(now);
    if (!in_flight.empty() && busy_until <= now) {
      for (auto& plan : in_flight) {
        SimulatedRings::Ring& ring = rings.at(plan->job->id);
        ring.filling--;
        ring.ready++;
        auto& epochs = consumers[plan->job->id - 1].outcome.epochs;
        if (epochs.size() <= plan->epoch) epochs.resize(plan->epoch + 1);
        epochs[plan->epoch].insert(epochs[plan->epoch].end(), plan->items.begin(),
                                   plan->items.end());
      }
      in_flight.clear();
    }
    bool all_done = true;
    for (Consumer& c : consumers) {
      if (c.outcome.finished_ms >= 0) continue;
      all_done = false;
      if (now < c.due) continue;
      if (!c.asked) {
        c.asked = true;
        scheduler.OnConsumerReady(c.job->id);
      }
      if (c.PausedAt(now)) continue;
      SimulatedRings::Ring& ring = rings.at(c.job->id);
      if (ring.ready == 0) {
        c.outcome.waited_ms += kTick / 1000.0;
        continue;
      }
      ring.ready--;
      c.due = now + c.period;
      if (c.jitter > 0) c.due += static_cast<Micros>(c.steps->Uniform() * c.jitter);
      if (++c.outcome.batches == c.batches_total) c.outcome.finished_ms = now / 1000.0;
      if (c.stall_every > 0 && c.outcome.batches % c.stall_every == 0) c.due += c.stall;
    }
    if (all_done) break;
    if (!in_flight.empty()) continue;
    std::vector<ItemTask> tasks;
    if (!scheduler.PlanOneWave(&in_flight, &tasks)) continue;
    for (const auto& plan : in_flight) {
      const uint64_t batch = scenario.batch;
      outcome.batches.push_back(DriftBatch{.job = plan->job->id - 1,
                                           .wave = waves,
                                           .made_us = now,
                                           .epoch = plan->epoch,
                                           .first = plan->batch_index * batch,
                                           .size = plan->items.size()});
    }
    ++waves;
    if (oracle) {
      for (const auto& plan : in_flight)
        oracle->Placed(plan->job->id - 1, plan->epoch, plan->items);
      oracle->SetNow(now);
      if (scenario.next_request_sees_drawn_ahead) {
        // What this wave's batches took of each queue seen after the last
        // wave must be its head, in order: the queue is the order of the
        // job's next requests, which the rule relies on.
        for (const auto& plan : in_flight) {
          const std::vector<ItemId>& queue = queues[plan->job->id - 1];
          const std::unordered_set<ItemId> queued(queue.begin(), queue.end());
          size_t head = 0;
          for (ItemId item : plan->items) {
            if (!queued.contains(item)) continue;
            outcome.drawn_ahead_checked++;
            if (head >= queue.size() || queue[head++] != item) outcome.drawn_ahead_out_of_order++;
          }
        }
        for (size_t j = 0; j < consumers.size(); ++j) {
          queues[j] = scheduler.DrawnAhead(consumers[j].job->id);
          oracle->SetDrawnAhead(j, queues[j]);
        }
      }
      for (auto it = resident.begin(); it != resident.end();) {
        const cache::Key key = cache::MakeKey(0, *it);
        if (!by_next_tier->Contains(key)) {
          it = resident.erase(it);
          continue;
        }
        by_next_tier->SetDemand(key, oracle->Urgency(*it));
        ++it;
      }
    }
    uint64_t requests = 0, misses = 0;
    std::vector<ItemId>& wave_items = outcome.wave_items.emplace_back();
    // Offers the decoded tier what `items` holds, as the pipeline does after
    // a read and a decode, and empties it.
    auto offer = [&](std::vector<ItemId>& items) {
      for (ItemId item : items) {
        const cache::Key key = cache::MakeKey(0, item);
        if (by_next_tier != nullptr) {
          if (by_next_tier->Put(key, item_blob, oracle->Urgency(item))) resident.insert(item);
        } else if (cache != nullptr) {
          // As galleyd before Tier::WouldAdmit, for crop-first jobs: a full
          // tier is offered nothing.
          const cache::TierStats decoded = cache->decoded().Stats();
          if (scenario.region_decodes_when_full &&
              decoded.bytes + cache::ChargedBytes(*item_blob) > decoded.budget_bytes) {
            continue;
          }
          cache->decoded().Put(key, item_blob);
        }
      }
      items.clear();
    };
    // The items the tier did not hold, offered to it after the wave's
    // lookups when lookups_before_offers is set, else each right after its
    // own lookup.
    std::vector<ItemId> missed;
    for (const ItemTask& task : tasks) {
      requests += task.deliveries.size();
      wave_items.push_back(task.item);
      const cache::Key key = cache::MakeKey(task.job_plan->dataset_index, task.item);
      cache::Tier* tier = by_next_tier != nullptr ? by_next_tier.get()
                          : cache != nullptr      ? &cache->decoded()
                                                  : nullptr;
      if (tier != nullptr && tier->Get(key) != nullptr) continue;
      ++misses;
      missed.push_back(task.item);
      if (!scenario.lookups_before_offers) offer(missed);
    }
    offer(missed);
    outcome.misses += misses;
    const double busy_ms =
        (misses * scenario.load_ms + requests * scenario.request_ms) / scenario.cores;
    busy_until = now + std::max<Micros>(kTick, ToMicros(busy_ms));
  }
  for (const SamplerGroupSnapshot& group : scheduler.Snapshot()) {
    outcome.requests += group.requests;
    outcome.loads += group.loads;
  }
  for (Consumer& c : consumers) {
    c.outcome.held_ms = static_cast<double>(c.job->counters.held_ns.load()) / 1e6;
    c.outcome.drawn_ahead_peak = c.job->counters.drawn_ahead_peak.load();
    c.outcome.lag_peak = c.job->counters.lag_peak.load();
    outcome.max_drawn_ahead = std::max(outcome.max_drawn_ahead, c.outcome.drawn_ahead_peak);
    outcome.jobs.push_back(c.outcome);
  }
  return outcome;
}

namespace {

// Items per epoch of each job of `scenario`.
std::vector<uint64_t> EpochSizes(const DriftScenario& scenario) {
  std::vector<uint64_t> sizes;
  for (const DriftJob& job : scenario.jobs) {
    sizes.push_back(job.subset.empty() ? scenario.items : job.subset.size());
  }
  return sizes;
}

}  // namespace

double CouplingBound(const DriftScenario& scenario, const DriftOutcome& outcome) {
  const std::vector<uint64_t> sizes = EpochSizes(scenario);
  double bound = 0;
  for (size_t begin = 0; begin < outcome.batches.size();) {
    size_t end = begin;
    while (end < outcome.batches.size() &&
           outcome.batches[end].wave == outcome.batches[begin].wave) {
      ++end;
    }
    // (remaining, weight) of each job in the wave, smallest set first.
    std::vector<std::pair<double, double>> jobs;
    for (size_t i = begin; i < end; ++i) {
      const DriftBatch& b = outcome.batches[i];
      const double remaining = static_cast<double>(sizes[b.job] - b.first);
      if (remaining <= 0 || b.size == 0) continue;
      jobs.emplace_back(remaining, std::min(1.0, static_cast<double>(b.size) / remaining));
    }
    std::sort(jobs.begin(), jobs.end());
    double previous = 0, weight = 1;
    for (const auto& [remaining, w] : jobs) {
      weight = std::min(weight, w);  // non-increasing, so the nested sets are the least
      bound += (remaining - previous) * weight;
      previous = remaining;
    }
    begin = end;
  }
  return bound;
}

uint64_t SharedOrderBound(const DriftScenario& scenario, const DriftOutcome& outcome, size_t held) {
  // Every delivery of a position, as (epoch, position) -> waves; batches of
  // one size line up, so a batch stands for its `size` positions.
  std::map<std::pair<uint64_t, uint64_t>, std::vector<std::pair<uint64_t, uint64_t>>> deliveries;
  uint64_t requests = 0;
  for (const DriftBatch& b : outcome.batches) {
    deliveries[{b.epoch, b.first}].emplace_back(b.wave, b.size);
    requests += b.size;
  }
  (void)scenario;
  // Intervals [from wave, to wave) of `count` items each that would save a
  // load each if kept.
  struct Interval {
    uint64_t from, to, count;
  };
  std::vector<Interval> intervals;
  uint64_t free_reuses = 0;
  for (auto& [position, waves] : deliveries) {
    std::sort(waves.begin(), waves.end());
    for (size_t k = 1; k < waves.size(); ++k) {
      const uint64_t count = std::min(waves[k].second, waves[k - 1].second);
      if (waves[k].first == waves[k - 1].first) {
        free_reuses += count;
      } else {
        intervals.push_back({waves[k - 1].first, waves[k].first, count});
      }
    }
  }
  std::sort(intervals.begin(), intervals.end(),
            [](const Interval& a, const Interval& b) { return a.to < b.to; });
  // Each unit of room is free from the wave in the multiset on.
  std::multiset<uint64_t> room;
  for (size_t i = 0; i < std::min<uint64_t>(held, requests); ++i) room.insert(0);
  uint64_t kept = 0;
  for (const Interval& interval : intervals) {
    for (uint64_t unit = 0; unit < interval.count; ++unit) {
      auto it = room.upper_bound(interval.from);
      if (it == room.begin()) break;
      room.erase(std::prev(it));
      room.insert(interval.to);
      ++kept;
    }
  }
  return requests - free_reuses - kept;
}

double ExpectedFirstRequest(const std::vector<RequestWindow>& windows) {
  // E[first] = the integral over s of P(every request is later than s): a
  // product of one linear piece per window between the windows' ends,
  // integrated exactly enough by 4-point Gauss-Legendre on each piece (a
  // point window is a step, which the pieces' ends take care of).
  if (windows.empty()) return std::numeric_limits<double>::infinity();
  std::vector<double> ends = {0};
  double stop = std::numeric_limits<double>::infinity();
  for (const RequestWindow& w : windows) {
    ends.push_back(w.from);
    ends.push_back(w.to);
    stop = std::min(stop, w.to);
  }
  std::sort(ends.begin(), ends.end());
  auto later_than = [&](double s) {
    double p = 1;
    for (const RequestWindow& w : windows) {
      if (s >= w.to) return 0.0;
      if (s > w.from) p *= (w.to - s) / (w.to - w.from);
    }
    return p;
  };
  static constexpr double kNodes[4] = {-0.8611363115940526, -0.3399810435848563, 0.3399810435848563,
                                       0.8611363115940526};
  static constexpr double kWeights[4] = {0.3478548451374538, 0.6521451548625461, 0.6521451548625461,
                                         0.3478548451374538};
  double integral = 0;
  for (size_t k = 0; k + 1 < ends.size() && ends[k] < stop; ++k) {
    const double a = ends[k], b = std::min(ends[k + 1], stop);
    if (b <= a) continue;
    for (int q = 0; q < 4; ++q) {
      integral += (b - a) / 2 * kWeights[q] * later_than((a + b) / 2 + (b - a) / 2 * kNodes[q]);
    }
  }
  return integral;
}

uint64_t MinMisses(const std::vector<std::vector<ItemId>>& waves, size_t held) {
  constexpr uint64_t kNever = UINT64_MAX;
  // Each wave's distinct items, and for each of them the wave that requests
  // it next (kNever: none), from one pass backwards.
  std::vector<std::vector<ItemId>> distinct(waves.size());
  std::vector<std::vector<uint64_t>> next(waves.size());
  std::unordered_map<ItemId, uint64_t> seen_at;
  for (size_t w = waves.size(); w-- > 0;) {
    distinct[w] = waves[w];
    std::sort(distinct[w].begin(), distinct[w].end());
    distinct[w].erase(std::unique(distinct[w].begin(), distinct[w].end()), distinct[w].end());
    next[w].reserve(distinct[w].size());
    for (ItemId item : distinct[w]) {
      auto [it, first] = seen_at.try_emplace(item, w);
      next[w].push_back(first ? kNever : it->second);
      it->second = w;
    }
  }
  // The cache: each held item with the wave that requests it next, largest
  // (furthest) last.
  std::set<std::pair<uint64_t, ItemId>> by_next;
  std::unordered_map<ItemId, uint64_t> next_of;
  uint64_t misses = 0;
  for (size_t w = 0; w < waves.size(); ++w) {
    // The wave's items leave the cache (a hit) or were not in it (a miss)
    // before any choice is made, then come back as candidates.
    for (ItemId item : distinct[w]) {
      auto it = next_of.find(item);
      if (it == next_of.end()) {
        ++misses;
        continue;
      }
      by_next.erase({it->second, item});
      next_of.erase(it);
    }
    for (size_t i = 0; i < distinct[w].size(); ++i) {
      const ItemId item = distinct[w][i];
      if (next[w][i] == kNever || held == 0) continue;
      by_next.emplace(next[w][i], item);
      next_of.emplace(item, next[w][i]);
      if (by_next.size() > held) {
        auto furthest = std::prev(by_next.end());
        next_of.erase(furthest->second);
        by_next.erase(furthest);
      }
    }
  }
  return misses;
}

uint64_t LookaheadMisses(const DriftScenario& scenario, const DriftOutcome& outcome, size_t held,
                         uint64_t horizon) {
  constexpr uint64_t kNever = UINT64_MAX;
  const std::vector<std::vector<ItemId>>& waves = outcome.wave_items;
  // Each wave's distinct items with the wave that asks for each next.
  std::vector<std::vector<std::pair<ItemId, uint64_t>>> requests(waves.size());
  std::unordered_map<ItemId, uint64_t> seen_at;
  for (size_t w = waves.size(); w-- > 0;) {
    std::vector<ItemId> distinct = waves[w];
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    for (ItemId item : distinct) {
      auto [it, first] = seen_at.try_emplace(item, w);
      requests[w].emplace_back(item, first ? kNever : it->second);
      it->second = w;
    }
  }
  // Each job's needs as its batches took items, wave by wave.
  struct Need {
    std::vector<bool> in_subset, needs;
    uint64_t epoch = 0;
  };
  std::vector<Need> jobs(scenario.jobs.size());
  std::vector<uint32_t> demand(scenario.items, 0);
  for (size_t j = 0; j < jobs.size(); ++j) {
    jobs[j].in_subset.assign(scenario.items, scenario.jobs[j].subset.empty());
    for (ItemId item : scenario.jobs[j].subset) jobs[j].in_subset[item] = true;
    jobs[j].needs = jobs[j].in_subset;
    for (ItemId item = 0; item < scenario.items; ++item) demand[item] += jobs[j].needs[item];
  }
  struct Held {
    uint64_t next;      // the wave asking for it next
    uint64_t admitted;  // the wave it came in
  };
  std::unordered_map<ItemId, Held> cache;
  uint64_t misses = 0;
  size_t batch = 0;
  for (size_t w = 0; w < waves.size(); ++w) {
    for (; batch < outcome.batches.size() && outcome.batches[batch].wave == w; ++batch) {
      const DriftBatch& b = outcome.batches[batch];
      Need& job = jobs[b.job];
      if (b.epoch != job.epoch) {
        for (ItemId item = 0; item < scenario.items; ++item) {
          demand[item] += uint32_t{job.in_subset[item]} - uint32_t{job.needs[item]};
        }
        job.needs = job.in_subset;
        job.epoch = b.epoch;
      }
      const std::vector<ItemId>& order = outcome.jobs[b.job].epochs[b.epoch];
      for (uint64_t k = b.first; k < b.first + b.size && k < order.size(); ++k) {
        if (!job.needs[order[k]]) continue;
        job.needs[order[k]] = false;
        demand[order[k]]--;
      }
    }
    // The candidates: what the tier held and what the wave brought, ranked
    // (known soon first, by next request; then by demand, residents first,
    // the younger first).
    struct Candidate {
      ItemId item;
      Held held;
      bool resident;
    };
    std::vector<Candidate> candidates;
    for (const auto& [item, next] : requests[w]) {
      auto it = cache.find(item);
      if (it == cache.end()) {
        ++misses;
        candidates.push_back({item, {next, w}, false});
      } else {
        candidates.push_back({item, {next, it->second.admitted}, true});
        cache.erase(it);
      }
    }
    for (const auto& [item, h] : cache) candidates.push_back({item, h, true});
    auto known = [&](const Candidate& c) {
      return c.held.next != kNever && c.held.next - w <= horizon;
    };
    std::sort(candidates.begin(), candidates.end(), [&](const Candidate& a, const Candidate& b) {
      const bool ka = known(a), kb = known(b);
      if (ka != kb) return ka;
      if (ka) return a.held.next < b.held.next;
      if (demand[a.item] != demand[b.item]) return demand[a.item] > demand[b.item];
      if (a.resident != b.resident) return a.resident;
      if (a.held.admitted != b.held.admitted) return a.held.admitted > b.held.admitted;
      return a.item < b.item;
    });
    cache.clear();
    for (size_t k = 0; k < candidates.size() && k < held; ++k) {
      cache.emplace(candidates[k].item, candidates[k].held);
    }
  }
  return misses;
}

}  // namespace galley::testing
