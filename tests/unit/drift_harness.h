// A deterministic run of galleyd's real Scheduler (its ProductionGate,
// sampling policy and DemandLedger) against scripted consumers, in simulated
// time: how many items galleyd loads per request when jobs fall out of step.
//
// Time is an integer count of microseconds moved by the harness; the
// scheduler reads it through an injected SchedulerClock and sees each job's
// ring through an injected RingView, so nothing depends on how busy the
// machine running it is. Each tick (250 us) the harness publishes the wave
// galleyd finished, lets every consumer that is due and not paused take a
// batch, and, when galleyd is idle, plans the next wave
// (Scheduler::PlanOneWave). A wave keeps galleyd busy for
// (misses x load_ms + requests x request_ms) / cores; its slots become ready
// when it ends.
//
// The decoded tier, when on, is a real cache::TieredCache whose decoded tier
// holds `cache_items` items: the scheduler's DemandLedger keeps its demand
// counts, a wave's item is a miss (a read and a decode) unless the tier has
// it, and the wave's misses are offered to the tier after all of its items
// were looked up, as ItemPipeline does (DriftScenario::lookups_before_offers
// and region_decodes_when_full model galleyd before two changes to that).
// DriftScenario::decoded_eviction swaps the demand rule for rules by
// predicted next request, in a tier of the harness's own.
//
// Used by the scheduler's unit tests (tests/unit/scheduler_drift_test.cc) and
// by galley_drift_sim (bench/drift_sim.cc). Not thread-safe.
#ifndef GALLEY_TESTS_UNIT_DRIFT_HARNESS_H_
#define GALLEY_TESTS_UNIT_DRIFT_HARNESS_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "galley/daemon/production_gate.h"
#include "galley/dataset/dataset.h"
#include "galley/ids.h"
#include "galley/status.h"

namespace galley::testing {

// The consumer takes no batch in [at_ms, at_ms + for_ms): descheduled,
// stalled on I/O, or (for_ms huge) stopped for good.
struct ConsumerPause {
  double at_ms = 0;
  double for_ms = 0;
};

struct DriftJob {
  std::vector<ItemId> subset;  // sorted, distinct; empty: every item
  double period_ms = 10;       // the consumer takes a batch this often
  double start_ms = 0;         // when its consumer first asks for a batch
  std::vector<ConsumerPause> pauses;
  uint32_t ring_slots = 4;
  bool under_load = true;  // also paused by the scenario's MachineLoad
  // Each step is period_ms plus a uniform draw in [0, jitter_ms): a model
  // whose time per batch varies (drawn from the scenario's seed and the
  // job's index).
  double jitter_ms = 0;
  // After every stall_every batches the consumer takes none for stall_ms
  // (a stall on I/O every so often, counted in batches); 0: never.
  uint32_t stall_every = 0;
  double stall_ms = 0;
};

// Descheduling on a loaded machine: every consumer is paused again and
// again, each pause and each stretch of running exponentially distributed
// (means below), drawn from `seed` and the job's index.
struct MachineLoad {
  double mean_run_ms = 0;  // 0: no random pauses
  double mean_pause_ms = 0;
  uint64_t seed = 1;
};

struct DriftScenario {
  std::string policy = "dsa";
  uint32_t items = 2048;  // dataset size
  uint32_t batch = 32;
  uint32_t epochs = 2;
  size_t cache_items = 0;  // decoded tier capacity in items; 0: no cache
  double load_ms = 0.2;    // read + decode of one item, on one core
  double request_ms = 0.02;
  uint32_t cores = 2;
  GateOptions gate;
  uint32_t draw_ahead_batches = 64;  // SchedulerOptions::draw_ahead_batches
  bool draw_across_epochs = true;    // SchedulerOptions::draw_across_epochs
  MachineLoad load;
  // How the decoded tier chooses what to keep: "demand" (galleyd's
  // RefCountEviction on the number of jobs still needing the item this
  // epoch), or a rule by the item's next request as galleyd could predict
  // it (NextRequestRule): "expected-next" (kFirstExpected), "expected-min"
  // (kExpectedFirst), "request-rate" (kRequestRate).
  std::string decoded_eviction = "demand";
  // A rule by next request also knows each job's drawn-ahead queue, whose
  // order is drawn already (Scheduler::DrawnAhead).
  bool next_request_sees_drawn_ahead = false;
  // The wave's items are all looked up in the decoded tier before any miss
  // is offered to it, as ItemPipeline::Run does, so that a miss admitted
  // early in the wave cannot push out an item the same wave is about to
  // take from the tier; false: each item is offered right after its own
  // lookup, as galleyd did before.
  bool lookups_before_offers = true;
  // The jobs' transforms start with a crop (RandomResizedCrop, CenterCrop)
  // and a full decoded tier is offered nothing, as galleyd did before it
  // asked the tier whether it would keep the item (Tier::WouldAdmit): it
  // decoded only the region a miss's crops read once the tier was full, so
  // the tier kept what filled it. Demand rule only.
  bool region_decodes_when_full = false;
  std::vector<DriftJob> jobs;
  // Stops there even if a job has not finished (a stalled one never does).
  double horizon_ms = 600'000;
};

struct DriftJobOutcome {
  uint64_t batches = 0;     // taken by the consumer
  double finished_ms = -1;  // took its last batch; -1 if it never did
  double waited_ms = 0;     // the consumer was due, not paused, and had no batch
  double held_ms = 0;       // the gate's thin holds charged to the job
  // The items of each epoch, in the order the job's batches hold them.
  std::vector<std::vector<ItemId>> epochs;
  uint64_t drawn_ahead_peak = 0;  // JobCounters::drawn_ahead_peak at the end
  uint64_t lag_peak = 0;          // JobCounters::lag_peak at the end
};

// When an item is next asked for, as galleyd could predict it from what it
// knows of each job (the items its batches have not taken this epoch, its
// epochs left, its items per second; optionally its drawn-ahead queue): a
// job that still needs the item takes it at a uniformly random place among
// its remaining items, which puts its request uniformly in a window of
// time; one that took it this epoch, in a window of its next epoch; one
// that drew it ahead, at a known time. The eviction rules tried in the
// simulator (DriftScenario::decoded_eviction) keep the items asked for
// soonest by:
enum class NextRequestRule {
  kFirstExpected,  // the earliest of the jobs' expected requests
  kExpectedFirst,  // the expected earliest request (windows independent)
  kRequestRate,    // the sum of the rates at which jobs may ask for it now
};

// A job's request for an item falls uniformly in [from, to] seconds from
// now (from == to: at a known time).
struct RequestWindow {
  double from = 0;
  double to = 0;
};

// The expectation of the earliest of independent requests, one uniform in
// each window; infinity when there is none.
double ExpectedFirstRequest(const std::vector<RequestWindow>& windows);

// One batch as galleyd planned it: what the bounds of drift_bounds.h are
// computed from.
struct DriftBatch {
  size_t job = 0;       // index into DriftScenario::jobs
  uint64_t wave = 0;    // the wave that prepared it (waves are numbered in order)
  int64_t made_us = 0;  // simulated time the wave was planned
  uint64_t epoch = 0;
  uint64_t first = 0;  // its first item's position in the epoch
  uint64_t size = 0;
};

struct DriftOutcome {
  uint64_t requests = 0;  // item deliveries (the scheduler's own counter)
  uint64_t loads = 0;     // distinct items per wave (the scheduler's own counter)
  uint64_t misses = 0;    // loads the decoded tier did not hold
  std::vector<DriftJobOutcome> jobs;
  std::vector<DriftBatch> batches;  // in the order they were planned
  // The items each wave loaded or took from the decoded tier (one per
  // ItemTask, in the order the wave holds them), wave by wave: the request
  // sequence the tier saw, from which MinMisses is computed.
  std::vector<std::vector<ItemId>> wave_items;
  // The most items any job held drawn ahead at the end of a wave.
  uint64_t max_drawn_ahead = 0;
  // With next_request_sees_drawn_ahead: items a wave's batches took from a
  // drawn-ahead queue as Scheduler::DrawnAhead gave it after the wave
  // before, and how many of them were not the queue's next item.
  uint64_t drawn_ahead_checked = 0;
  uint64_t drawn_ahead_out_of_order = 0;

  double LoadsPerRequest() const { return requests ? double(loads) / double(requests) : 0; }
  double MissesPerRequest() const { return requests ? double(misses) / double(requests) : 0; }
};

// What no scheduler can go below, for the batches as `outcome` made them
// (which job got a batch in which wave, at which position of its epoch):
//
// CouplingBound: loads (distinct items per wave) when nothing is kept
// between waves. In a wave, job j's batch of b_j items is a uniform
// b_j-subset of the ℓ_j items it has not received, so item x is loaded with
// probability at least max over its jobs of b_j/ℓ_j; summed over the items
// that is smallest when the remaining sets are nested (sizes sorted
// ascending, the items first met at the k-th set counted at the k-th
// weight): the maximal coupling of the jobs' remaining sets. Jobs in
// different epochs share only as far as their remaining sets can overlap.
double CouplingBound(const DriftScenario& scenario, const DriftOutcome& outcome);
// SharedOrderBound: loads when every job receives one common order (epoch
// e's i-th item the same for all) and up to `held` items may be kept
// between waves (a decoded tier or a holding buffer of that many items). A
// position a later wave delivers again is free if it is kept from the
// previous delivery of it to that wave: an interval of waves occupying one
// item of room. The most intervals that fit `held` items at every moment
// (earliest end first, each into the room freed latest before it starts:
// optimal for unit intervals on identical machines) are the loads saved.
// With `held` at least the most ever in flight this is the number of
// distinct positions: every load reused.
uint64_t SharedOrderBound(const DriftScenario& scenario, const DriftOutcome& outcome, size_t held);

// MinMisses: the fewest misses any cache of `held` items can have on the
// request sequence `waves` (the items of one wave are requested at once; an
// item named twice in one wave is one request), starting empty: Belady's
// MIN. After each wave the cache keeps, of what it held and what the wave
// brought, the `held` items whose next request comes soonest (an item never
// requested again is not kept); a miss need not be admitted. Serving a
// wave's requests one after the other, hits first, turns any cache's choices
// into such a choice after the wave, so the furthest-next-request rule's
// exchange argument applies wave by wave. O(n log held) over the n requests,
// with the next request of each found by one backward pass.
//
// For a drift run it bounds the eviction policy for the requests galleyd's
// scheduler produced (its orders, its waves, who received what when), not
// the orders: another coupling of the jobs' orders gives another sequence.
uint64_t MinMisses(const std::vector<std::vector<ItemId>>& waves, size_t held);

// LookaheadMisses: the misses of a tier of `held` items on the run's requests
// (outcome.wave_items) that knows each item's next request when it comes
// within `horizon` waves and ranks every other item as galleyd's demand rule
// does (jobs that have not received it in their current epoch, by the
// batches placed so far; residents before newcomers among equals, the
// younger resident first): after each wave it keeps the `held` best of what
// it held and what the wave brought, the items known to come soon first,
// soonest first. Replayed offline on the requests of one run (its timing
// does not follow the tier, as galleyd's would). Horizon 0 is the demand
// rule replayed (without the demand a job drawing its next epoch early
// adds); a horizon past the last wave is MIN. How fast the misses fall with
// the horizon says how much of MIN's lead is knowing the next few waves.
uint64_t LookaheadMisses(const DriftScenario& scenario, const DriftOutcome& outcome, size_t held,
                         uint64_t horizon);

// `items` empty .jpg files in one class folder under `root` (created), for
// a Dataset whose listing is real and whose files are never read.
Status WriteEmptyImageFolder(const std::filesystem::path& root, int items);

// Runs `scenario` over `dataset` (at least scenario.items items), whose
// stream salt is 0 and whose seed is `seed`. InvalidArgument for an unknown
// policy or a cache that cannot be made.
Result<DriftOutcome> RunDrift(const std::shared_ptr<const Dataset>& dataset,
                              const DriftScenario& scenario, uint64_t seed = 1);

}  // namespace galley::testing

#endif  // GALLEY_TESTS_UNIT_DRIFT_HARNESS_H_
