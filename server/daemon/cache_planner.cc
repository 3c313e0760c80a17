#include "galley/daemon/cache_planner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string_view>
#include <utility>

#include "galley/daemon/memory_setup.h"
#include "galley/logging/restarting_loop.h"

namespace galley {
namespace {

// A 224x224 RGB uint8 sample: the usual finished sample before any job says.
constexpr double kDefaultSampleBytes = 3.0 * 224 * 224;

SplitSnapshot SnapshotOf(const cache::Split& split) {
  return {split.encoded_pct, split.decoded_pct, split.augmented_pct};
}

TierSnapshot SnapshotOf(const cache::TierStats& t) {
  const uint64_t lookups = t.hits + t.misses;
  TierSnapshot s;
  s.budget_bytes = t.budget_bytes;
  s.bytes = t.bytes;
  s.entries = t.entries;
  s.hits = t.hits;
  s.misses = t.misses;
  s.hit_rate = lookups ? double(t.hits) / double(lookups) : 0.0;
  s.inserts = t.inserts;
  s.rejects = t.rejects;
  s.evictions = t.evictions;
  return s;
}

PerSourceSnapshot SnapshotOf(const cache::SourceRates& r) {
  return {r.augmented, r.decoded, r.encoded, r.storage, r.remote};
}

PerSourceSnapshot SnapshotOf(const cache::HitFractions& f) {
  return {f.augmented, f.decoded, f.encoded, f.storage, f.remote};
}

// The admin's split, when cache_split names one.
std::optional<cache::Split> AdminSplit(const DaemonOptions& options) {
  if (options.cache_split.empty()) return std::nullopt;
  return cache::Split{options.cache_split[0], options.cache_split[1], options.cache_split[2]};
}

}  // namespace

PlannerOverrides PlannerOverrides::From(const DaemonOptions& options) {
  PlannerOverrides o;
  o.storage_bytes_per_s = options.storage_bytes_per_s > 0 ? options.storage_bytes_per_s
                                                          : options.storage_throttle_bytes_per_s;
  o.decode_augment_per_core_per_s = options.decode_per_core_per_s;
  o.augment_per_core_per_s = options.augment_per_core_per_s;
  o.memory_bytes_per_s = options.memory_bytes_per_s;
  o.cores = static_cast<int>(options.cores);
  o.split = AdminSplit(options);
  o.remote_bytes_per_s = options.remote_cache_bytes_per_s;
  o.remote_capacity_bytes = options.remote_cache_capacity_bytes;
  o.nic_bytes_per_s = options.nic_bytes_per_s;
  o.remote_form = options.remote_cache_form == "decoded"   ? cache::RemoteTierForm::kDecoded
                  : options.remote_cache_form == "encoded" ? cache::RemoteTierForm::kEncoded
                                                           : cache::RemoteTierForm::kNone;
  o.remote_max_value_bytes = options.remote_cache_max_value_bytes;
  return o;
}

cache::CacheOptions CacheOptionsFrom(const DaemonOptions& options) {
  cache::CacheOptions o;
  o.cache_bytes = options.cache_bytes;
  o.eviction = options.cache_eviction;
  if (std::optional<cache::Split> split = AdminSplit(options)) o.split = *split;
  return o;
}

CachePlanner::CachePlanner(cache::TieredCache* cache, const NodeMeasurements& node,
                           int worker_threads, const PlannerOverrides& overrides,
                           RemoteCache* remote, PipelineTimer time_pipeline,
                           DatasetSampleStore* samples)
    : cache_(cache),
      remote_(remote),
      node_(node),
      worker_threads_(std::max(1, worker_threads)),
      overrides_(overrides),
      time_pipeline_(time_pipeline ? std::move(time_pipeline)
                                   : [](const image::TransformPipeline&
                                            pipeline) { return MeasureAugmentRate(pipeline); }),
      samples_(samples) {
  if (overrides_.split) {
    // The options accept only splits that add up, so the cache takes it.
    const Status applied = cache_->SetSplit(*overrides_.split);
    if (!applied.ok()) spdlog::error("cache planner: the admin's split: {}", applied.message());
  }
}

CachePlanner::~CachePlanner() { Stop(); }

void CachePlanner::Start() {
  thread_ = std::thread([this] { RunRestartingLoop("cache planner", [this] { Loop(); }); });
}

void CachePlanner::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

Status CachePlanner::OnJobOpened(const std::shared_ptr<ServedJob>& job) {
  RecordJob(job->id, job->plan);
  return Status::Ok();
}

Status CachePlanner::OnJobSought(ServedJob& /*job*/, const JobSeek& /*seek*/) {
  return Status::Ok();
}

void CachePlanner::RecordJob(JobId job_id, std::shared_ptr<const JobPlan> job) {
  {
    MutexLock lock(&mu_);
    DatasetInfo& info = datasets_[job->dataset.get()];
    if (info.reader == nullptr) info.reader = job;
    jobs_[job_id] = std::move(job);
    pending_ = true;
  }
  cv_.SignalAll();
}

void CachePlanner::OnJobClosed(JobId job_id) {
  {
    MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return;
    const std::shared_ptr<const JobPlan> closed = std::move(it->second);
    const Dataset* dataset = closed->dataset.get();
    jobs_.erase(it);
    // A dataset no job reads any more is not planned for (and a re-listed
    // one is a new dataset): its sample goes with it. Otherwise another of
    // its jobs stands for it, so that no closed job's plan (its item list)
    // outlives the job here.
    auto reader = std::find_if(jobs_.begin(), jobs_.end(), [&](const auto& job) {
      return job.second->dataset.get() == dataset;
    });
    if (reader == jobs_.end()) {
      datasets_.erase(dataset);
    } else if (auto info = datasets_.find(dataset);
               info != datasets_.end() && info->second.reader == closed) {
      info->second.reader = reader->second;
    }
    pending_ = true;
  }
  cv_.SignalAll();
}

void CachePlanner::Loop() {
  while (true) {
    {
      MutexLock lock(&mu_);
      while (!stop_ && !pending_) cv_.Wait(&mu_);
      if (stop_) return;
      pending_ = false;
    }
    ReplanNow();
  }
}

cache::Plan CachePlanner::ReplanNow() {
  MutexLock plan_lock(&plan_mu_);
  std::vector<std::shared_ptr<const JobPlan>> to_sample;  // a reader of each
  {
    MutexLock lock(&mu_);
    for (auto& [key, info] : datasets_) {
      if (!info.sample && info.sample_error.empty()) to_sample.push_back(info.reader);
    }
  }
  // Pipelines not measured yet; measured, like datasets, without mu_. With
  // no cache there is nothing to split, so no CPU goes to timing them.
  std::map<std::string, std::shared_ptr<const image::TransformPipeline>> to_measure;
  if (cache_->cache_bytes() > 0) {
    MutexLock lock(&mu_);
    for (const auto& [id, job] : jobs_) {
      if (job->pipeline && !pipeline_rates_.contains(job->pipeline->Signature())) {
        to_measure.emplace(job->pipeline->Signature(), job->pipeline);
      }
    }
  }
  std::map<std::string, double> rates;
  for (const auto& [signature, pipeline] : to_measure) {
    auto rate = time_pipeline_(*pipeline);
    rates[signature] = rate.ok() ? *rate : 0.0;
    if (!rate.ok())
      spdlog::warn("cache planner: cannot time a pipeline: {}", rate.status().ToString());
  }
  {
    MutexLock lock(&mu_);
    pipeline_rates_.insert(rates.begin(), rates.end());
  }
  // Sampling reads files: done without mu_, so RecordJob never waits on disk.
  std::vector<std::pair<const Dataset*, TakenSample>> samples;
  samples.reserve(to_sample.size());
  for (const std::shared_ptr<const JobPlan>& reader : to_sample) {
    samples.emplace_back(reader->dataset.get(),
                         Sample(*reader->dataset, reader->spec.max_resolution));
  }

  cache::PlannerInputs inputs;
  bool have_data = false;
  {
    MutexLock lock(&mu_);
    for (auto& [key, taken] : samples) {
      auto found = datasets_.find(key);
      if (found == datasets_.end()) continue;  // its last job closed meanwhile
      DatasetInfo& info = found->second;
      const Result<DatasetSample>& sample = taken.sample;
      if (sample.ok()) {
        info.sample = *sample;
        info.sample_source = taken.source;
        if (key->reads_objects()) {
          RememberLocked(*key, info.reader->spec.max_resolution, *sample);
        }
        spdlog::info(
            "cache planner: dataset {}: {} items, {:.0f} B mean, inflation {:.2f}, read {:.3g} "
            "MB/s{}",
            info.reader->dataset->root().string(), sample->items, sample->mean_encoded_bytes,
            sample->inflation,
            sample->read_seconds > 0 ? sample->bytes_read / sample->read_seconds / 1e6 : 0.0,
            std::string_view(taken.source) == "storage"
                ? ""
                : fmt::format(" (its sample kept in {}, nothing read)", taken.source));
      } else {
        info.sample_error = sample.status().ToString();
        spdlog::warn("cache planner: cannot sample {}: {}", info.reader->dataset->root().string(),
                     info.sample_error);
      }
    }
    for (const auto& [key, info] : datasets_) have_data = have_data || info.sample.has_value();
    inputs = InputsLocked();
    if (!have_data) {
      // Nothing to size the tiers against yet: keep the split in force.
      cache::Plan plan;
      const cache::Split split = cache_->split();
      plan.encoded_pct = split.encoded_pct;
      plan.decoded_pct = split.decoded_pct;
      plan.augmented_pct = split.augmented_pct;
      return plan;
    }
  }
  const cache::Plan plan = overrides_.split
                               ? cache::FixedSplitPlanner(*overrides_.split).MakePlan(inputs)
                               : cache::ModelDrivenPlanner().MakePlan(inputs);
  if (const Status applied = cache_->SetSplit(plan.split()); !applied.ok()) {
    spdlog::error("cache planner: the cache refused split {}/{}/{}: {}", plan.encoded_pct,
                  plan.decoded_pct, plan.augmented_pct, applied.message());
  }
  if (remote_ != nullptr && plan.remote_form != cache::RemoteTierForm::kNone) {
    remote_->set_write_form(plan.remote_form == cache::RemoteTierForm::kDecoded
                                ? RemoteForm::kDecoded
                                : RemoteForm::kEncoded);
  }
  {
    MutexLock lock(&mu_);
    plan_ = plan;
    plan_inputs_ = inputs;
    ++plans_made_;
  }
  spdlog::info("cache split {}/{}/{} (encoded/decoded/augmented %){}, predicted {:.0f} items/s{}",
               plan.encoded_pct, plan.decoded_pct, plan.augmented_pct,
               remote_ != nullptr ? fmt::format(", remote tier {} ({:.0f}% of items)",
                                                cache::RemoteTierFormName(plan.remote_form),
                                                100 * plan.fractions.remote)
                                  : "",
               plan.predicted_items_per_s, overrides_.split ? " (admin's split)" : "");
  return plan;
}

namespace {

// A kept sample, with the item count and mean size of the dataset's listing.
DatasetSample WithListingSizes(DatasetSample sample, const Dataset& dataset) {
  sample.items = dataset.size();
  sample.mean_encoded_bytes =
      dataset.size() > 0 ? double(dataset.total_bytes()) / double(dataset.size()) : 0.0;
  return sample;
}

}  // namespace

void CachePlanner::RememberLocked(const Dataset& dataset, uint32_t max_resolution,
                                  const DatasetSample& sample) {
  const ContentFingerprint& fingerprint = dataset.content_fingerprint();
  const SampleKey key{fingerprint.high, fingerprint.low, max_resolution};
  if (!remembered_.insert_or_assign(key, sample).second) return;  // known: kept in its place
  remembered_order_.push_back(key);
  if (remembered_order_.size() > kRememberedSamples) {
    remembered_.erase(remembered_order_.front());
    remembered_order_.pop_front();
  }
}

CachePlanner::TakenSample CachePlanner::Sample(const Dataset& dataset,
                                               uint32_t max_resolution) const {
  // Only a dataset of objects: its sample costs GETs of the store, while a
  // local one's costs a few reads of files that sampling again keeps current.
  if (!dataset.reads_objects()) return {SampleDataset(dataset, max_resolution)};
  const ContentFingerprint& fingerprint = dataset.content_fingerprint();
  {
    MutexLock lock(&mu_);
    auto found = remembered_.find({fingerprint.high, fingerprint.low, max_resolution});
    if (found != remembered_.end()) return {WithListingSizes(found->second, dataset), "memory"};
  }
  if (samples_ == nullptr) return {SampleDataset(dataset, max_resolution)};
  if (std::optional<DatasetSample> kept = samples_->Load(fingerprint, max_resolution)) {
    return {WithListingSizes(*kept, dataset), "disk cache"};
  }
  TakenSample taken{SampleDataset(dataset, max_resolution)};
  if (taken.sample.ok()) {
    if (const Status saved = samples_->Save(fingerprint, max_resolution, *taken.sample);
        !saved.ok()) {
      spdlog::warn(
          "cache planner: cannot keep the sample of {}: {}; a restarted galleyd "
          "samples it again",
          dataset.root().string(), saved.message());
    }
  }
  return taken;
}

cache::PlannerInputs CachePlanner::CurrentInputs() const {
  MutexLock lock(&mu_);
  return InputsLocked();
}

uint64_t CachePlanner::plans_made() const {
  MutexLock lock(&mu_);
  return plans_made_;
}

cache::PlannerInputs CachePlanner::InputsLocked() const {
  cache::PlannerInputs in;
  in.decode_augment_per_core_per_s = overrides_.decode_augment_per_core_per_s > 0
                                         ? overrides_.decode_augment_per_core_per_s
                                         : node_.decode_augment_per_core_per_s;
  in.augment_per_core_per_s = overrides_.augment_per_core_per_s > 0
                                  ? overrides_.augment_per_core_per_s
                                  : node_.augment_per_core_per_s;
  // The open jobs' pipelines replace the probe's augment cost (their mean
  // seconds per item); the decode share of the probe's decode + augment
  // cost stays. An admin's override still wins.
  double pipeline_seconds = 0;
  int timed = 0;
  for (const auto& [id, job] : jobs_) {
    if (!job->pipeline) continue;
    const auto rate = pipeline_rates_.find(job->pipeline->Signature());
    if (rate == pipeline_rates_.end() || rate->second <= 0) continue;
    pipeline_seconds += 1.0 / rate->second;
    ++timed;
  }
  if (timed > 0 && node_.augment_per_core_per_s > 0 && node_.decode_augment_per_core_per_s > 0) {
    const double augment_seconds = pipeline_seconds / timed;
    const double decode_seconds = std::max(
        0.0, 1.0 / node_.decode_augment_per_core_per_s - 1.0 / node_.augment_per_core_per_s);
    if (overrides_.augment_per_core_per_s <= 0) in.augment_per_core_per_s = 1.0 / augment_seconds;
    if (overrides_.decode_augment_per_core_per_s <= 0) {
      in.decode_augment_per_core_per_s = 1.0 / (decode_seconds + augment_seconds);
    }
  }
  in.cores = overrides_.cores > 0 ? overrides_.cores : worker_threads_;
  in.memory_bytes_per_s =
      overrides_.memory_bytes_per_s > 0 ? overrides_.memory_bytes_per_s : node_.memory_bytes_per_s;
  // Jobs pull as fast as they can; their own pace is not known in advance.
  in.jobs_consumption_per_s = 0;
  in.cache_bytes = cache_->cache_bytes();
  in.augmented_reuse_limit = cache_->augmented().reuse_limit();

  // Items per dataset in use: at most the dataset, at most what its jobs
  // name together (their union is not tracked; the sum bounds it).
  std::map<const Dataset*, uint64_t> used;
  std::map<std::pair<const Dataset*, std::string>, int> signature_groups;
  double sample_bytes = 0;
  for (const auto& [id, job] : jobs_) {
    used[job->dataset.get()] += job->subset.size();
    in.identical_pipeline_jobs =
        std::max(in.identical_pipeline_jobs,
                 ++signature_groups[{job->dataset.get(), job->augmentation_signature}]);
    sample_bytes += double(job->geometry.sample_bytes);
  }
  in.augmented_item_bytes =
      jobs_.empty() ? kDefaultSampleBytes : sample_bytes / double(jobs_.size());

  // The datasets jobs use now; with no job, every dataset seen so far.
  uint64_t items = 0;
  double encoded_bytes = 0, decoded_bytes = 0, read_bytes = 0, read_seconds = 0;
  for (const auto& [key, info] : datasets_) {
    if (!info.sample) continue;
    read_bytes += double(info.sample->bytes_read);
    read_seconds += info.sample->read_seconds;
    if (!jobs_.empty() && !used.contains(key)) continue;
    const uint64_t n = jobs_.empty() ? info.sample->items : std::min(info.sample->items, used[key]);
    items += n;
    encoded_bytes += double(n) * info.sample->mean_encoded_bytes;
    decoded_bytes += double(n) * info.sample->mean_encoded_bytes * info.sample->inflation;
  }
  in.dataset_items = items;
  in.encoded_item_bytes = items ? encoded_bytes / double(items) : 0;
  in.inflation = encoded_bytes > 0 ? decoded_bytes / encoded_bytes : 1;
  in.storage_bytes_per_s = overrides_.storage_bytes_per_s > 0 ? overrides_.storage_bytes_per_s
                           : read_seconds > 0                 ? read_bytes / read_seconds
                                                              : 0;
  if (remote_ != nullptr) {
    auto pick = [](auto override_value, auto measured) {
      return override_value > 0 ? override_value : measured;
    };
    in.remote_bytes_per_s = pick(overrides_.remote_bytes_per_s, node_.remote_bytes_per_s);
    in.remote_capacity_bytes = pick(overrides_.remote_capacity_bytes, node_.remote_capacity_bytes);
    in.nic_bytes_per_s = pick(overrides_.nic_bytes_per_s, node_.nic_bytes_per_s);
    in.remote_max_value_bytes = overrides_.remote_max_value_bytes;
    in.fixed_remote_form = overrides_.remote_form;
  }
  return in;
}

PlannerInputsSnapshot CachePlanner::InputsSnapshotLocked() const {
  const cache::PlannerInputs in = plan_ ? plan_inputs_ : InputsLocked();
  auto measured = [](double override_value) {
    return override_value > 0 ? "override" : "measured";
  };
  PlannerInputsSnapshot s;
  s.storage_bytes_per_s = {in.storage_bytes_per_s, measured(overrides_.storage_bytes_per_s)};
  s.decode_augment_per_core_per_s = {in.decode_augment_per_core_per_s,
                                     measured(overrides_.decode_augment_per_core_per_s)};
  s.augment_per_core_per_s = {in.augment_per_core_per_s,
                              measured(overrides_.augment_per_core_per_s)};
  s.cores = {double(in.cores), overrides_.cores > 0 ? "override" : "worker threads"};
  s.memory_bytes_per_s = {in.memory_bytes_per_s, measured(overrides_.memory_bytes_per_s)};
  s.jobs_consumption_per_s = {in.jobs_consumption_per_s, "unbounded"};
  s.dataset_items = {double(in.dataset_items), "datasets"};
  s.encoded_item_bytes = {in.encoded_item_bytes, "datasets"};
  s.inflation = {in.inflation, "measured"};
  s.augmented_item_bytes = {in.augmented_item_bytes, jobs_.empty() ? "default" : "jobs"};
  s.identical_pipeline_jobs = {double(in.identical_pipeline_jobs), "jobs"};
  s.augmented_reuse_limit = {double(in.augmented_reuse_limit), "cache"};
  s.cache_bytes = {double(in.cache_bytes), "cache"};
  if (remote_ != nullptr) {
    s.remote_bytes_per_s = {in.remote_bytes_per_s, measured(overrides_.remote_bytes_per_s)};
    s.remote_capacity_bytes = {double(in.remote_capacity_bytes),
                               overrides_.remote_capacity_bytes > 0 ? "override" : "servers"};
    s.nic_bytes_per_s = {in.nic_bytes_per_s, overrides_.nic_bytes_per_s > 0 ? "override"
                                             : in.nic_bytes_per_s > 0       ? "link speed"
                                                                      : "unknown (unbounded)"};
  }
  return s;
}

PlanSnapshot CachePlanner::Snapshot() const {
  MutexLock lock(&mu_);
  PlanSnapshot out;
  out.planner = overrides_.split ? "admin split" : "model-driven";
  out.inputs = InputsSnapshotLocked();
  out.probe_seconds = node_.probe_seconds;
  for (const auto& [key, info] : datasets_) {
    PlanDatasetSnapshot& d = out.datasets.emplace_back();
    d.root = info.reader->dataset->root().string();
    d.sampled = info.sample.has_value();
    if (info.sample) {
      d.items = info.sample->items;
      d.mean_encoded_bytes = info.sample->mean_encoded_bytes;
      d.inflation = info.sample->inflation;
      d.files_sampled = info.sample->files_sampled;
      d.storage_bytes_per_s =
          info.sample->read_seconds > 0 ? info.sample->bytes_read / info.sample->read_seconds : 0.0;
      d.sample_source = info.sample_source;
    } else {
      d.error = info.sample_error.empty() ? "not sampled yet" : info.sample_error;
    }
  }
  out.plans_made = plans_made_;
  out.split = SnapshotOf(cache_->split());
  if (remote_ != nullptr) {
    out.remote_form = std::string(RemoteFormName(remote_->write_form()));
    out.remote_form_source =
        overrides_.remote_form != cache::RemoteTierForm::kNone ? "admin" : "planner";
  }
  if (plan_) {
    out.plan = AppliedPlanSnapshot{plan_->predicted_items_per_s, SnapshotOf(plan_->rates),
                                   SnapshotOf(plan_->fractions)};
  }
  return out;
}

CacheSnapshot CachePlanner::SnapshotCache() const {
  const cache::CacheStats stats = cache_->Stats();
  CacheSnapshot out;
  out.cache_bytes = stats.cache_bytes;
  out.eviction = std::string(cache_->encoded().policy_name());
  out.split = SnapshotOf(stats.split);
  out.split_source = overrides_.split ? "admin" : "planner";
  out.encoded = SnapshotOf(stats.encoded);
  out.decoded = SnapshotOf(stats.decoded);
  out.augmented.tier = SnapshotOf(stats.augmented.tier);
  out.augmented.retired = stats.augmented.retired;
  out.augmented.replaced = stats.augmented.replaced;
  out.augmented.reuse_limit = cache_->augmented().reuse_limit();
  if (stats.decoded_arena) {
    const cache::ArenaStats& a = *stats.decoded_arena;
    out.decoded_arena =
        ArenaSnapshot{a.capacity_bytes,  a.populated_bytes, CachePrefaulter::Target(stats),
                      a.allocated_bytes, a.blocks,          a.refused};
  }
  out.keys_with_demand = stats.keys_with_demand;
  out.total_demand = stats.total_demand;
  {
    MutexLock lock(&mu_);
    out.planner_inputs = InputsSnapshotLocked();
  }
  return out;
}

}  // namespace galley
