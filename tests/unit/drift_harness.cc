#include "tests/unit/drift_harness.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "galley/cache/tiered_cache.h"
#include "galley/random.h"
#include "galley/scheduling/scheduler.h"

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
    uint64_t requests = 0, misses = 0;
    for (const ItemTask& task : tasks) {
      requests += task.deliveries.size();
      const cache::Key key = cache::MakeKey(task.job_plan->dataset_index, task.item);
      if (cache != nullptr && cache->decoded().Get(key) != nullptr) continue;
      ++misses;
      if (cache != nullptr) cache->decoded().Put(key, item_blob);
    }
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

}  // namespace galley::testing
