// galley_drift_sim: loads per request when jobs fall out of step, from
// galleyd's real Scheduler (gate, sampling policy, demand ledger) and real
// decoded tier driven in simulated time by scripted consumers
// (tests/unit/drift_harness.h). Deterministic: the same flags print the same
// table on any machine, however loaded.
//
//   galley_drift_sim [--seed N] [--epochs N] [--draw-ahead BATCHES] [--within-epochs]
//                    [--out-of-step] [--out-of-step-epochs N] [--load-ms MS]
//                    [--next-request-rule RULE] [--sees-drawn-ahead] [--lookahead]
//                    [--lookups-interleaved] [--region-decodes] [--csv FILE]
//
// --draw-ahead sets SchedulerOptions::draw_ahead_batches (default 64; 0: a
// job with no free slot is masked, as before drawing ahead existed);
// --within-epochs turns SchedulerOptions::draw_across_epochs off; --load-ms
// sets galleyd's time per load on one core (default 1). --next-request-rule
// (expected-min by default; expected-next, request-rate) is the rule by next
// request the first table compares with galleyd's decoded tier
// (DriftScenario::decoded_eviction), --sees-drawn-ahead lets it know the
// jobs' drawn-ahead queues. --lookahead adds a table: the demand rule
// replayed on the mixed-speed runs' requests knowing those of the next H
// waves, from none to all (MIN). --lookups-interleaved offers the decoded
// tier each miss right after its own lookup, as galleyd did before it
// looked up a whole wave first (ItemPipeline::Run). --region-decodes: the
// jobs' transforms start with a crop and a full decoded tier is offered
// nothing, as galleyd did before it asked whether the tier would keep the
// item (Tier::WouldAdmit).
//
// First table: jobs in step and jobs at truly different speeds (4 and 8;
// --out-of-step-epochs each, default 10), with no cache and with a decoded
// tier of a quarter of the items, beside the bounds of drift_harness.h
// (Belady's MIN among them) and a rule by next request (docs/sampling.md
// §3.5); --out-of-step prints it alone. Second table: 1,
// 2, 4, 8 and 16 jobs over the same 2,048 items under each drift, with no
// cache and with a decoded tier of 256 items (1/8 of the dataset). Third
// table: overlapping subsets beside the coupling tree's in-step figure
// (docs/sampling.md, "How much it shares").
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "galley/sampler/sampling_policy.h"
#include "tests/unit/drift_harness.h"

namespace galley {
namespace {

using testing::DriftJob;
using testing::DriftScenario;

constexpr uint32_t kItems = 2048;
constexpr size_t kCacheItems = kItems / 8;
constexpr double kPeriodMs = 100;  // a consumer's step per batch of 32

struct Drift {
  std::string name;
  // Adjusts the jobs (and the machine) of a scenario of `jobs` jobs.
  void (*apply)(DriftScenario& scenario);
};

std::vector<Drift> Drifts() {
  return {
      {"in-step", [](DriftScenario&) {}},
      {"staggered-0.5s",
       [](DriftScenario& s) {
         for (size_t k = 0; k < s.jobs.size(); ++k) s.jobs[k].start_ms = 500.0 * k;
       }},
      {"one-paused-0.5s",
       [](DriftScenario& s) { s.jobs.back().pauses.push_back({.at_ms = 1000, .for_ms = 500}); }},
      {"one-io-stall-2s",
       [](DriftScenario& s) { s.jobs.back().pauses.push_back({.at_ms = 1000, .for_ms = 2000}); }},
      {"speeds-+5%-each",
       [](DriftScenario& s) {
         for (size_t k = 0; k < s.jobs.size(); ++k)
           s.jobs[k].period_ms = kPeriodMs * (1 + 0.05 * k);
       }},
      {"loaded-20%-paused",
       [](DriftScenario& s) { s.load = {.mean_run_ms = 200, .mean_pause_ms = 50, .seed = 7}; }},
      {"loaded-50%-paused",
       [](DriftScenario& s) { s.load = {.mean_run_ms = 100, .mean_pause_ms = 100, .seed = 7}; }},
  };
}

// galleyd's time per load on one core (--load-ms).
double load_ms = 1.0;

// The wave's tier lookups before its misses are offered, as galleyd does;
// --lookups-interleaved: each miss offered right after its own lookup, as
// galleyd did before.
bool lookups_first = true;
// A full decoded tier is offered nothing, as for crop-first jobs before
// Tier::WouldAdmit (--region-decodes).
bool region_decodes = false;

DriftScenario Base(uint32_t epochs, size_t cache_items, uint32_t draw_ahead, bool across = true) {
  DriftScenario s;
  s.region_decodes_when_full = region_decodes;
  s.lookups_before_offers = lookups_first;
  s.draw_ahead_batches = draw_ahead;
  s.draw_across_epochs = across;
  s.items = kItems;
  s.batch = 32;
  s.epochs = epochs;
  s.cache_items = cache_items;
  s.load_ms = load_ms;
  s.request_ms = 0.1;
  s.cores = 2;
  return s;
}

std::vector<ItemId> RandomSubset(std::mt19937_64& random, uint32_t from, uint32_t size) {
  std::vector<ItemId> all(from);
  for (uint32_t i = 0; i < from; ++i) all[i] = i;
  for (uint32_t i = 0; i < size; ++i) {
    std::swap(all[i], all[i + random() % (from - i)]);
  }
  all.resize(size);
  std::sort(all.begin(), all.end());
  return all;
}

// What the coupling tree loads per request when every job draws in every
// round (the sampler alone, no scheduler, as docs/sampling.md §3.2 assumes):
// each job runs `epochs` epochs back to back, a job that ends one starts the
// next at once.
double SamplerInStep(const std::vector<DriftJob>& jobs, uint32_t epochs, uint64_t seed) {
  auto policy = std::move(MakeSamplingPolicy({"dsa", seed})).value();
  std::vector<uint32_t> epochs_left(jobs.size(), epochs);
  auto enter = [&](size_t j) {
    (void)policy->AddJob(j + 1, jobs[j].subset);
    epochs_left[j]--;
  };
  for (size_t j = 0; j < jobs.size(); ++j) enter(j);
  uint64_t loads = 0, requests = 0;
  Round round;
  while (policy->Next([](JobId) { return true; }, &round)) {
    loads += round.deliveries.size();
    for (const Delivery& delivery : round.deliveries) requests += delivery.receivers.size();
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (policy->Remaining(j + 1) > 0 || epochs_left[j] == 0) continue;
      policy->RemoveJob(j + 1);
      enter(j);
    }
  }
  return static_cast<double>(loads) / static_cast<double>(requests);
}

// The jobs of the out-of-step table: one whose model sleeps 0-50 ms a
// batch, one at full speed (as fast as galleyd prepares), and two at full
// speed that stall 2 s every 100 batches; `copies` of each.
std::vector<DriftJob> MixedSpeeds(size_t copies) {
  std::vector<DriftJob> jobs;
  for (size_t c = 0; c < copies; ++c) {
    jobs.push_back({.period_ms = 0, .jitter_ms = 50});
    jobs.push_back({.period_ms = 0});
    jobs.push_back({.period_ms = 0, .stall_every = 100, .stall_ms = 2000});
    jobs.push_back({.period_ms = 0, .stall_every = 100, .stall_ms = 2000});
  }
  return jobs;
}

struct Overlap {
  std::string name;
  std::vector<DriftJob> jobs;
};

std::vector<Overlap> Overlaps(uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<Overlap> mixes;
  Overlap four{"4x75%-random", {}};
  for (int j = 0; j < 4; ++j) four.jobs.push_back({.subset = RandomSubset(random, kItems, 1536)});
  mixes.push_back(four);
  Overlap nested{"nested-8/6/4", {}};
  const std::vector<ItemId> order = RandomSubset(random, kItems, kItems);
  std::vector<ItemId> shuffled = order;
  std::shuffle(shuffled.begin(), shuffled.end(), random);
  for (uint32_t size : {2048u, 1536u, 1024u}) {
    std::vector<ItemId> subset(shuffled.begin(), shuffled.begin() + size);
    std::sort(subset.begin(), subset.end());
    nested.jobs.push_back({.subset = subset});
  }
  mixes.push_back(nested);
  return mixes;
}

int Run(int argc, char** argv) {
  uint64_t seed = 1;
  uint32_t epochs = 2;
  uint32_t draw_ahead = DriftScenario{}.draw_ahead_batches;
  std::string csv_path;
  uint32_t out_of_step_epochs = 10;
  bool out_of_step_only = false;
  bool within_epochs = false;
  std::string next_request_rule = "expected-min";
  bool sees_drawn_ahead = false;
  bool lookahead = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--epochs" && i + 1 < argc) {
      epochs = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    } else if (arg == "--draw-ahead" && i + 1 < argc) {
      draw_ahead = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    } else if (arg == "--out-of-step-epochs" && i + 1 < argc) {
      out_of_step_epochs = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    } else if (arg == "--load-ms" && i + 1 < argc) {
      load_ms = std::strtod(argv[++i], nullptr);
    } else if (arg == "--next-request-rule" && i + 1 < argc) {
      next_request_rule = argv[++i];
    } else if (arg == "--region-decodes") {
      region_decodes = true;
    } else if (arg == "--lookups-interleaved") {
      lookups_first = false;
    } else if (arg == "--lookahead") {
      lookahead = true;
    } else if (arg == "--sees-drawn-ahead") {
      sees_drawn_ahead = true;
    } else if (arg == "--within-epochs") {
      within_epochs = true;
    } else if (arg == "--out-of-step") {
      out_of_step_only = true;
    } else if (arg == "--csv" && i + 1 < argc) {
      csv_path = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: %s [--seed N] [--epochs N] [--draw-ahead BATCHES] [--out-of-step] "
                   "[--out-of-step-epochs N] [--within-epochs] [--load-ms MS] "
                   "[--next-request-rule RULE] [--sees-drawn-ahead] [--lookahead] "
                   "[--lookups-interleaved] [--region-decodes] [--csv FILE]\n",
                   argv[0]);
      return 2;
    }
  }
  std::string pattern = (std::filesystem::temp_directory_path() / "galley_drift_XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::filesystem::path root = pattern;
  struct Cleanup {
    std::filesystem::path root;
    ~Cleanup() { std::filesystem::remove_all(root); }
  } cleanup{root};
  if (Status s = testing::WriteEmptyImageFolder(root, kItems); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  auto dataset = Dataset::Open(root, {});
  if (!dataset.ok()) {
    std::fprintf(stderr, "%s\n", dataset.status().ToString().c_str());
    return 1;
  }
  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path);
    csv << "table,mix,drift,jobs,cache_items,requests,loads,loads_per_request,misses,"
           "misses_per_request,bound,max_wait_ms,max_held_ms,min_misses_per_request,"
           "next_rule_misses_per_request,next_rule_min_misses_per_request\n";
  }
  auto report = [&](const char* table, const std::string& mix, const std::string& drift,
                    size_t jobs, size_t cache_items, const testing::DriftOutcome& o, double bound) {
    double max_wait = 0, max_held = 0;
    for (const auto& job : o.jobs) {
      max_wait = std::max(max_wait, job.waited_ms);
      max_held = std::max(max_held, job.held_ms);
    }
    std::printf("%-14s %-18s %4zu %6zu %9llu %9llu %9.4f %9.4f %8.0f %7.1f", mix.c_str(),
                drift.c_str(), jobs, cache_items, static_cast<unsigned long long>(o.requests),
                static_cast<unsigned long long>(o.loads), o.LoadsPerRequest(), o.MissesPerRequest(),
                max_wait, max_held);
    if (bound >= 0) std::printf(" %9.4f", bound);
    std::printf("\n");
    if (csv.is_open()) {
      csv << table << ',' << mix << ',' << drift << ',' << jobs << ',' << cache_items << ','
          << o.requests << ',' << o.loads << ',' << o.LoadsPerRequest() << ',' << o.misses << ','
          << o.MissesPerRequest() << ',' << bound << ',' << max_wait << ',' << max_held << ",,,\n";
    }
  };

  // One run of `jobs` (each at the common period) under `drift`.
  auto run = [&](std::vector<DriftJob> jobs, const Drift& drift, size_t cache_items) {
    DriftScenario s = Base(epochs, cache_items, draw_ahead, !within_epochs);
    s.jobs = std::move(jobs);
    for (DriftJob& job : s.jobs) job.period_ms = kPeriodMs;
    drift.apply(s);
    s.load.seed += seed;
    return testing::RunDrift(*dataset, s, seed);
  };
  // The out-of-step set of `jobs` jobs, in step at `period` ms a batch or
  // at mixed speeds (period < 0), with a decoded tier of `cache_items`.
  auto out_of_step = [&](size_t jobs, double period, size_t cache_items) {
    DriftScenario s = Base(out_of_step_epochs, cache_items, draw_ahead, !within_epochs);
    s.load.seed += seed;
    if (period > 0) {
      s.jobs.assign(jobs, DriftJob{.period_ms = period});
    } else {
      s.jobs = MixedSpeeds(jobs / 4);
    }
    return s;
  };
  // Out of step: loads per request beside what no scheduler can go below
  // (drift_harness.h): with the cache off, the maximal coupling of the
  // remaining sets wave by wave; with a tier of C items, Belady's MIN on the
  // requests galleyd made, and one common order with C items kept between
  // waves; and every load reused. With a tier, the same run again with the
  // decoded tier choosing by the items' next requests (--next-request-rule),
  // beside the MIN of its own requests.
  std::printf("%-12s %4s %6s %9s %9s %9s %9s %9s %9s %9s %9s %9s %8s %8s\n", "mix", "jobs", "cache",
              "requests", "loads/req", "coupling", "miss/req", "MIN", "next-rule", "its MIN",
              "one-order", "all-reuse", "lag peak", "ahead pk");
  for (const auto& [name, jobs, period] :
       {std::tuple{"in-step", size_t{4}, kPeriodMs}, std::tuple{"in-step", size_t{8}, kPeriodMs},
        std::tuple{"mixed-speeds", size_t{4}, -1.0}, std::tuple{"mixed-speeds", size_t{8}, -1.0}}) {
    for (size_t cache_items : {size_t{0}, size_t{kItems / 4}}) {
      const DriftScenario s = out_of_step(jobs, period, cache_items);
      auto o = testing::RunDrift(*dataset, s, seed);
      if (!o.ok()) {
        std::fprintf(stderr, "%s\n", o.status().ToString().c_str());
        return 1;
      }
      const double requests = static_cast<double>(o->requests);
      const double coupling = testing::CouplingBound(s, *o) / requests;
      const double one_order =
          static_cast<double>(testing::SharedOrderBound(s, *o, cache_items)) / requests;
      const double all_reuse =
          static_cast<double>(testing::SharedOrderBound(s, *o, SIZE_MAX / 2)) / requests;
      const double min =
          static_cast<double>(testing::MinMisses(o->wave_items, cache_items)) / requests;
      double by_rule = -1, by_rule_min = -1;
      if (cache_items > 0) {
        DriftScenario r = s;
        r.decoded_eviction = next_request_rule;
        r.next_request_sees_drawn_ahead = sees_drawn_ahead;
        auto ro = testing::RunDrift(*dataset, r, seed);
        if (!ro.ok()) {
          std::fprintf(stderr, "%s\n", ro.status().ToString().c_str());
          return 1;
        }
        by_rule = ro->MissesPerRequest();
        by_rule_min = static_cast<double>(testing::MinMisses(ro->wave_items, cache_items)) /
                      static_cast<double>(ro->requests);
      }
      uint64_t lag_peak = 0;
      for (const auto& job : o->jobs) lag_peak = std::max(lag_peak, job.lag_peak);
      // "-" where there is no tier to compare.
      auto cell = [](double value) {
        char text[16] = "-";
        if (value >= 0) std::snprintf(text, sizeof text, "%.4f", value);
        return std::string(text);
      };
      std::printf("%-12s %4zu %6zu %9llu %9.4f %9.4f %9.4f %9.4f %9s %9s %9.4f %9.4f %8llu %8llu\n",
                  name, jobs, cache_items, static_cast<unsigned long long>(o->requests),
                  o->LoadsPerRequest(), coupling, o->MissesPerRequest(), min, cell(by_rule).c_str(),
                  cell(by_rule_min).c_str(), one_order, all_reuse,
                  static_cast<unsigned long long>(lag_peak),
                  static_cast<unsigned long long>(o->max_drawn_ahead));
      if (csv.is_open()) {
        csv << "out-of-step," << name << ",-," << jobs << ',' << cache_items << ',' << o->requests
            << ',' << o->loads << ',' << o->LoadsPerRequest() << ',' << o->misses << ','
            << o->MissesPerRequest() << ',' << coupling << ",,," << min << ',' << by_rule << ','
            << by_rule_min << '\n';
      }
    }
  }
  if (lookahead) {
    // How much of MIN's lead over the demand rule is knowing the next few
    // waves: the demand rule replayed on each run's requests with every
    // request within `horizon` waves known (drift_harness.h,
    // LookaheadMisses).
    const std::vector<uint64_t> horizons = {0, 1, 4, 16, 64, 256, 1024, 4096, UINT64_MAX};
    std::printf(
        "\nmisses per request of the demand rule knowing the requests of the next H waves\n");
    std::printf("%-12s %4s %9s %9s", "mix", "jobs", "galleyd", "waves");
    for (uint64_t h : horizons) {
      if (h == UINT64_MAX) {
        std::printf(" %9s", "MIN");
      } else {
        std::printf(" %9s", ("H=" + std::to_string(h)).c_str());
      }
    }
    std::printf("\n");
    for (size_t jobs : {size_t{4}, size_t{8}}) {
      const DriftScenario s = out_of_step(jobs, -1, kItems / 4);
      auto o = testing::RunDrift(*dataset, s, seed);
      if (!o.ok()) {
        std::fprintf(stderr, "%s\n", o.status().ToString().c_str());
        return 1;
      }
      const double requests = static_cast<double>(o->requests);
      std::printf("%-12s %4zu %9.4f %9zu", "mixed-speeds", jobs, o->MissesPerRequest(),
                  o->wave_items.size());
      for (uint64_t h : horizons) {
        std::printf(
            " %9.4f",
            static_cast<double>(testing::LookaheadMisses(s, *o, s.cache_items, h)) / requests);
      }
      std::printf("\n");
    }
  }
  if (out_of_step_only) return 0;

  std::printf("\n%-14s %-18s %4s %6s %9s %9s %9s %9s %8s %7s\n", "mix", "drift", "jobs", "cache",
              "requests", "loads", "loads/req", "miss/req", "wait ms", "held ms");
  for (const Drift& drift : Drifts()) {
    for (size_t jobs : {1, 2, 4, 8, 16}) {
      for (size_t cache_items : {size_t{0}, kCacheItems}) {
        auto o = run(std::vector<DriftJob>(jobs), drift, cache_items);
        if (!o.ok()) {
          std::fprintf(stderr, "%s\n", o.status().ToString().c_str());
          return 1;
        }
        report("same", "identical", drift.name, jobs, cache_items, *o, -1);
      }
    }
  }

  std::printf("\n%-14s %-18s %4s %6s %9s %9s %9s %9s %8s %7s %9s\n", "mix", "drift", "jobs",
              "cache", "requests", "loads", "loads/req", "miss/req", "wait ms", "held ms",
              "sampler");
  for (const Overlap& mix : Overlaps(seed)) {
    const double bound = SamplerInStep(mix.jobs, epochs, seed);
    for (const Drift& drift : Drifts()) {
      for (size_t cache_items : {size_t{0}, kCacheItems}) {
        auto o = run(mix.jobs, drift, cache_items);
        if (!o.ok()) {
          std::fprintf(stderr, "%s\n", o.status().ToString().c_str());
          return 1;
        }
        report("overlap", mix.name, drift.name, mix.jobs.size(), cache_items, *o, bound);
      }
    }
    // In step, each job at a speed proportional to its subset, so that
    // every epoch starts and ends together, as the bound assumes.
    DriftScenario s = Base(epochs, 0, draw_ahead, !within_epochs);
    s.jobs = mix.jobs;
    size_t largest = 0;
    for (const DriftJob& job : s.jobs) largest = std::max(largest, job.subset.size());
    for (DriftJob& job : s.jobs) {
      job.period_ms =
          kPeriodMs * static_cast<double>(largest) / static_cast<double>(job.subset.size());
    }
    auto o = testing::RunDrift(*dataset, s, seed);
    if (!o.ok()) {
      std::fprintf(stderr, "%s\n", o.status().ToString().c_str());
      return 1;
    }
    report("overlap", mix.name, "epochs-aligned", mix.jobs.size(), 0, *o, bound);
  }
  return 0;
}

}  // namespace
}  // namespace galley

int main(int argc, char** argv) { return galley::Run(argc, argv); }
