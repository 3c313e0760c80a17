#include "galley/daemon/job_manager.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>

#include "galley/daemon/shard_datasets.h"
#include "galley/daemon/socket_access.h"
#include "galley/image/decoder.h"
#include "galley/image/max_resolution.h"
#include "galley/sampler/sampling_policy.h"
#include "wire/messages.h"

namespace galley {
namespace {

using nlohmann::json;

// Checks a job's classes, ranges and ids against its dataset and selects its
// items.
Result<std::vector<ItemId>> SelectSubset(const JobSpec& spec, const Dataset& dataset) {
  // A listed job may be served any item in a later epoch: its access is
  // checked for the whole dataset.
  if (spec.epoch_items) return dataset.Select({});
  SubsetSpec subset;
  subset.classes = spec.classes;
  for (const auto& [begin, end] : spec.id_ranges) {
    if (end > dataset.size()) {
      return Status::InvalidArgument("id range ends at " + std::to_string(end) +
                                     " but the dataset has " + std::to_string(dataset.size()) +
                                     " items");
    }
    subset.ranges.emplace_back(static_cast<ItemId>(begin), static_cast<ItemId>(end));
  }
  for (uint64_t id : spec.ids) {
    if (id >= dataset.size()) {
      return Status::InvalidArgument("item id " + std::to_string(id) +
                                     " is out of range (dataset has " +
                                     std::to_string(dataset.size()) + " items)");
    }
    subset.ids.push_back(static_cast<ItemId>(id));
  }
  return dataset.Select(subset);
}

// The policy a job runs: its own, "sequential" without shuffle, else the
// dataset's or the daemon's default.
Result<std::string> ChoosePolicy(const JobSpec& spec, const Dataset& dataset,
                                 const JobLimits& limits) {
  if (!spec.shuffle) {
    // The sequential order is a policy of its own: jobs that walk it together
    // share their items.
    if (!spec.policy.empty() && spec.policy != "sequential") {
      return Status::InvalidArgument("policy '" + spec.policy +
                                     "' decides a random order; a job with shuffle=false uses "
                                     "the sequential order (leave the policy empty)");
    }
    return std::string("sequential");
  }
  if (spec.policy == "sequential") {
    return Status::InvalidArgument("policy 'sequential' needs shuffle=false");
  }
  if (!spec.policy.empty()) return spec.policy;
  auto configured = limits.dataset_policies.find(dataset.root().string());
  return configured != limits.dataset_policies.end() ? configured->second : limits.default_policy;
}

// The job's transform, with transform=None resolved to the first image's
// size.
Result<image::TransformPipeline> BuildTransform(const JobSpec& spec, const JobPlan& plan) {
  auto transform = json::parse(spec.transform_json, nullptr, false);
  if (transform.is_discarded()) return Status::InvalidArgument("transform is not valid JSON");
  if (spec.native_size) {
    // torch's transform=None: the first image's size is the batch's; a
    // full-size CenterCrop passes same-size images through unchanged.
    if (!transform.is_object() || !transform.value("ops", json::array()).empty()) {
      return Status::InvalidArgument("native_size takes a transform without ops");
    }
    GALLEY_ASSIGN_OR_RETURN(auto bytes, plan.dataset->Read(plan.subset.front()));
    auto header = image::ReadHeader(bytes);
    if (!header.ok()) {
      return Status::InvalidArgument("transform=None takes the first image's size, but " +
                                     plan.dataset->path(plan.subset.front()).string() +
                                     " cannot be read: " + header.status().message());
    }
    const image::ImageSize size =
        image::MaxResolutionSize(header->width, header->height, spec.max_resolution);
    transform["ops"] = json::array({{{"op", "CenterCrop"}, {"size", {size.height, size.width}}}});
  }
  return image::TransformPipeline::FromJson(transform);
}

}  // namespace

JobLimits JobLimits::From(const DaemonOptions& o) {
  JobLimits l;
  l.max_jobs = o.max_jobs;
  // A node-wide daemon keeps half of the node for the other users; a
  // personal one has a single user, who may have all of it.
  const uint32_t share_divisor = o.owner_only ? 1 : 2;
  l.max_jobs_per_uid = o.max_jobs_per_uid != 0 ? o.max_jobs_per_uid
                                               : std::max<uint32_t>(1, o.max_jobs / share_divisor);
  l.max_shm_total = o.max_shm_total;
  l.max_shm_per_uid = o.max_shm_per_uid != 0
                          ? o.max_shm_per_uid
                          : std::max<uint64_t>(1, o.max_shm_total / share_divisor);
  l.max_shm_per_job = o.max_shm_per_job;
  // By default a user's listings and item lists may hold as much of
  // galleyd's memory as their rings may hold of shared memory.
  l.max_memory_per_uid = o.max_memory_per_uid != 0 ? o.max_memory_per_uid : l.max_shm_per_uid;
  l.max_connections_per_uid =
      o.max_connections_per_uid != 0 ? o.max_connections_per_uid : l.max_jobs_per_uid + 8;
  l.max_prefetch = o.max_prefetch;
  l.max_batch_size = o.max_batch_size;
  l.default_policy = o.default_policy;
  l.dataset_policies = o.dataset_policies;
  return l;
}

JobManagerOptions JobManagerOptions::From(const DaemonOptions& options) {
  JobManagerOptions o;
  o.limits = JobLimits::From(options);
  o.admin_group = options.admin_group;
  return o;
}

JobManager::JobManager(const JobManagerOptions& options,
                       std::vector<JobLifecycleObserver*> observers, DatasetRegistry* datasets,
                       DrainedCallback drained, UserMemory* memory)
    : observers_(std::move(observers)),
      datasets_(datasets),
      memory_(memory),
      drained_(std::move(drained)),
      limits_(options.limits) {
  if (!options.admin_group.empty()) {
    if (const std::optional<gid_t> gid = GroupIdByName(options.admin_group)) {
      admin_gid_ = *gid;
    } else {
      spdlog::warn("admin_group '{}' does not exist; only root and galleyd's user are admins",
                   options.admin_group);
    }
  }
}

JobManager::~JobManager() { CloseAll(Status::Cancelled("galleyd is shutting down")); }

JobManager::Admission::~Admission() { manager_->Release(*this); }

bool JobManager::IsAdmin(const wire::PeerCredentials& peer) const {
  if (peer.uid == 0 || peer.uid == ::geteuid()) return true;
  if (admin_gid_ == static_cast<gid_t>(-1)) return false;
  return peer.gid == admin_gid_ ||
         std::find(peer.groups.begin(), peer.groups.end(), admin_gid_) != peer.groups.end();
}

void JobManager::Reload(const JobLimits& limits) {
  MutexLock lock(&mu_);
  limits_ = limits;
}

JobLimits JobManager::limits() const {
  MutexLock lock(&mu_);
  return limits_;
}

Status JobManager::AdmitConnection(uid_t uid) {
  MutexLock lock(&mu_);
  UidUsage& usage = uid_usage_[uid];
  if (usage.connections >= limits_.max_connections_per_uid) {
    return Status::ResourceExhausted("uid " + std::to_string(uid) + " has " +
                                     std::to_string(usage.connections) +
                                     " connections open, the limit max_connections_per_uid (" +
                                     std::to_string(limits_.max_connections_per_uid) + ")");
  }
  usage.connections++;
  return Status::Ok();
}

void JobManager::ReleaseConnection(uid_t uid) {
  MutexLock lock(&mu_);
  uid_usage_[uid].connections--;
}

Result<std::unique_ptr<JobManager::Admission>> JobManager::Admit(
    uid_t uid, uint64_t shm_bytes, std::pair<const Dataset*, std::string> sampler) {
  MutexLock lock(&mu_);
  const JobLimits& l = limits_;
  UidUsage& usage = uid_usage_[uid];
  const std::string who = "uid " + std::to_string(uid);
  if (draining_) {
    return Status::Unavailable(
        "galleyd is draining: it takes no new jobs and exits when the running ones end");
  }
  if (admitted_jobs_ >= l.max_jobs) {
    return Status::ResourceExhausted("galleyd already serves " + std::to_string(admitted_jobs_) +
                                     " jobs, the limit max_jobs (" + std::to_string(l.max_jobs) +
                                     ")");
  }
  if (usage.jobs >= l.max_jobs_per_uid) {
    return Status::ResourceExhausted(who + " already has " + std::to_string(usage.jobs) +
                                     " jobs, the limit max_jobs_per_uid (" +
                                     std::to_string(l.max_jobs_per_uid) + ")");
  }
  const size_t sharing = sampler_jobs_[sampler];
  if (sharing >= kMaxJobsPerDataset) {
    return Status::ResourceExhausted(
        std::to_string(sharing) + " jobs already read this dataset with policy '" + sampler.second +
        "', the most one sampler tracks (" + std::to_string(kMaxJobsPerDataset) +
        "); use another policy or wait for one to end");
  }
  if (shm_in_use_ + shm_bytes > l.max_shm_total) {
    return Status::ResourceExhausted("the job needs " + std::to_string(shm_bytes) +
                                     " bytes of shared memory and " + std::to_string(shm_in_use_) +
                                     " are in use, over the limit max_shm_total (" +
                                     std::to_string(l.max_shm_total) + ")");
  }
  if (usage.shm_bytes + shm_bytes > l.max_shm_per_uid) {
    return Status::ResourceExhausted(who + " would hold " +
                                     std::to_string(usage.shm_bytes + shm_bytes) +
                                     " bytes of shared memory, over the limit max_shm_per_uid (" +
                                     std::to_string(l.max_shm_per_uid) + ")");
  }
  admitted_jobs_++;
  usage.jobs++;
  usage.shm_bytes += shm_bytes;
  sampler_jobs_[sampler]++;
  shm_in_use_ += shm_bytes;
  return std::make_unique<Admission>(this, uid, shm_bytes, std::move(sampler));
}

void JobManager::Release(const Admission& a) {
  MutexLock lock(&mu_);
  UidUsage& usage = uid_usage_[a.uid_];
  admitted_jobs_--;
  usage.jobs--;
  usage.shm_bytes -= a.shm_bytes_;
  if (--sampler_jobs_[a.sampler_] == 0) sampler_jobs_.erase(a.sampler_);
  shm_in_use_ -= a.shm_bytes_;
}

void JobManager::ReleaseIfUnread(const Dataset& dataset) {
  {
    MutexLock lock(&mu_);
    for (const auto& [id, record] : jobs_) {
      if (record.job->plan->dataset.get() == &dataset) return;
    }
  }
  // The listing stays for the next job; its descriptors need not. A job
  // that opens it meanwhile opens them again as it reads.
  dataset.ReleaseDescriptors();
}

Status JobManager::Refused(const Status& why) {
  MutexLock lock(&mu_);
  jobs_refused_++;
  return why;
}

Result<std::shared_ptr<ServedJob>> JobManager::Build(const JobSpec& spec,
                                                     const wire::PeerCredentials& peer,
                                                     const JobLimits& limits, uint64_t* shm_bytes,
                                                     ListingStop* stop) {
  if (spec.batch_size > limits.max_batch_size) {
    return Status::ResourceExhausted("batch_size " + std::to_string(spec.batch_size) +
                                     " exceeds the daemon's limit of " +
                                     std::to_string(limits.max_batch_size));
  }
  if (spec.prefetch > limits.max_prefetch) {
    return Status::ResourceExhausted("prefetch " + std::to_string(spec.prefetch) +
                                     " exceeds the daemon's limit of " +
                                     std::to_string(limits.max_prefetch));
  }
  // Filled here and nowhere else: from the ServedJob on, it is const.
  auto plan = std::make_shared<JobPlan>();
  plan->spec = spec;
  plan->owner_uid = peer.uid;
  plan->owner_pid = peer.pid;
  const Credentials who{peer.uid, peer.gid, peer.groups};
  GALLEY_ASSIGN_OR_RETURN(
      auto opened,
      datasets_->Open(
          spec, who, [&spec](const Dataset& dataset) { return SelectSubset(spec, dataset); },
          stop));
  plan->dataset = std::move(opened.dataset);
  plan->dataset_index = opened.index;
  plan->subset = std::move(opened.subset);
  GALLEY_RETURN_IF_ERROR(CheckShardJob(*plan->dataset, spec));
  GALLEY_ASSIGN_OR_RETURN(plan->field_map, JobFieldMap(*plan->dataset, spec));
  // Class names travel to the client as JSON text; a folder whose name is
  // not UTF-8 (Latin-1, say) is refused here, naming it, rather than
  // renamed silently.
  for (const auto& name : plan->dataset->classes()) {
    if (!wire::IsValidUtf8(name)) {
      return Status::InvalidArgument(
          "dataset " + wire::EscapeBytes(plan->dataset->root().string()) + " has a class folder '" +
          wire::EscapeBytes(name) +
          "' whose name is not valid UTF-8; rename it (for example with convmv) to use it "
          "with galley");
    }
  }
  GALLEY_ASSIGN_OR_RETURN(plan->policy, ChoosePolicy(spec, *plan->dataset, limits));
  const uint64_t n = plan->subset.size();
  plan->epoch_size = n == 0 ? 0 : plan->ShardSize();
  std::vector<ItemId> start_list;
  if (plan->listed()) {
    // Item ids are 32-bit: no epoch reaches 2^32 positions.
    if (spec.start_batch > (uint64_t{1} << 32)) {
      return Status::InvalidArgument("'start_batch' is past any epoch's end");
    }
    if (plan->epoch_size == 0) return Status::InvalidArgument("'epoch_items' lists no items");
    GALLEY_ASSIGN_OR_RETURN(start_list, plan->CheckEpochList(spec.start_epoch, *spec.epoch_items,
                                                             spec.start_batch * spec.batch_size));
  } else if (plan->epoch_size == 0) {
    return Status::InvalidArgument("rank " + std::to_string(spec.rank) + " of " +
                                   std::to_string(spec.world_size) +
                                   " gets no items from a subset of " + std::to_string(n));
  }
  GALLEY_ASSIGN_OR_RETURN(auto pipeline, BuildTransform(spec, *plan));
  plan->pipeline = std::make_shared<const image::TransformPipeline>(std::move(pipeline));
  plan->augmentation_signature = AugmentationSignature(*plan->pipeline, spec.seed);
  // prefetch = batches prepared ahead of the one the consumer holds, so the
  // ring has one slot more: prefetch=1 double-buffers instead of deadlocking.
  GALLEY_ASSIGN_OR_RETURN(
      auto geometry, wire::ComputeGeometry(spec.prefetch + 1, spec.batch_size,
                                           plan->pipeline->sample_bytes(), FieldAreaBytes(spec)));
  if (geometry.segment_bytes > limits.max_shm_per_job) {
    return Status::ResourceExhausted("the job needs " + std::to_string(geometry.segment_bytes) +
                                     " bytes of shared memory ((prefetch + 1) x batch_size x "
                                     "sample size), over the per-job limit of " +
                                     std::to_string(limits.max_shm_per_job) +
                                     "; lower prefetch or batch_size");
  }
  *shm_bytes = geometry.segment_bytes;
  TensorShape shape;
  shape.height = static_cast<uint32_t>(plan->pipeline->output_height());
  shape.width = static_cast<uint32_t>(plan->pipeline->output_width());
  shape.dtype = plan->pipeline->dtype() == image::DType::kUInt8 ? wire::ElementType::kUInt8
                                                                : wire::ElementType::kFloat32;
  shape.layout = plan->pipeline->layout() == image::Layout::kNCHW ? wire::TensorLayout::kNCHW
                                                                  : wire::TensorLayout::kNHWC;
  plan->shape = shape;
  plan->geometry = geometry;
  return std::make_shared<ServedJob>(std::move(plan), std::move(start_list));
}

Result<std::shared_ptr<ServedJob>> JobManager::Open(const JobSpec& spec,
                                                    const wire::PeerCredentials& peer,
                                                    std::function<void(const Status&)> cancel,
                                                    ListingStop* stop) {
  {
    MutexLock lock(&mu_);
    if (draining_) {
      jobs_refused_++;
      return Status::Unavailable(
          "galleyd is draining: it takes no new jobs and exits when the running ones end");
    }
  }
  const JobLimits limits = this->limits();
  uint64_t shm_bytes = 0;
  auto built = Build(spec, peer, limits, &shm_bytes, stop);
  if (!built.ok()) return Refused(built.status());
  std::shared_ptr<ServedJob> job = *built;
  // Building may have read the first item (transform=None), opening a
  // descriptor that a refused job must not leave behind.
  auto refuse_built = [&](const Status& why) {
    ReleaseIfUnread(*job->plan->dataset);
    return Refused(why);
  };
  UserMemory::Charge memory;
  if (memory_ != nullptr) {
    const uint64_t listed = spec.epoch_items ? spec.epoch_items->size() : 0;
    auto charge = memory_->Take(peer.uid, ItemListBytes(*job, listed), "the job's item lists");
    if (!charge.ok()) return refuse_built(charge.status());
    memory = std::move(charge).value();
  }
  auto admission = Admit(peer.uid, shm_bytes, {job->plan->dataset.get(), job->plan->policy});
  if (!admission.ok()) return refuse_built(admission.status());
  {
    MutexLock lock(&mu_);
    job->id = next_job_id_++;
  }
  auto ring = BatchRing::Create(job->plan->geometry, job->plan->shape, peer.uid);
  if (!ring.ok()) return refuse_built(ring.status());  // the admission is given back here
  job->ring = std::move(ring).value();
  if (Status s = AnnounceOpened(job); !s.ok()) return refuse_built(s);
  MutexLock lock(&mu_);
  jobs_[job->id] =
      Record{job, std::move(admission).value(), std::move(cancel), 0, std::move(memory)};
  jobs_opened_++;
  return job;
}

Result<uint64_t> JobManager::Seek(JobId job_id, uint64_t epoch,
                                  const std::vector<uint64_t>* items) {
  std::shared_ptr<ServedJob> job;
  JobSeek seek{.epoch = epoch, .items = items};
  {
    MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return Status::NotFound("no such job");
    job = it->second.job;
    seek.generation = it->second.generation + 1;
    // A new list is charged before anyone keeps it; the charge stays at the
    // largest list the job has sent.
    UserMemory::Charge& memory = it->second.memory;
    if (items != nullptr && memory_ != nullptr) {
      const uint64_t bytes = ItemListBytes(*job, items->size());
      if (bytes > memory.bytes()) GALLEY_RETURN_IF_ERROR(memory.Resize(bytes, "the epoch's list"));
    }
  }
  for (JobLifecycleObserver* observer : observers_) {
    GALLEY_RETURN_IF_ERROR(observer->OnJobSought(*job, seek));
  }
  MutexLock lock(&mu_);
  if (auto it = jobs_.find(job_id); it != jobs_.end()) it->second.generation = seek.generation;
  return seek.generation;
}

uint64_t JobManager::ItemListBytes(const ServedJob& job, uint64_t listed) {
  return sizeof(ItemId) * job.plan->subset.size() + kBytesPerListedItem * listed;
}

Status JobManager::AnnounceOpened(const std::shared_ptr<ServedJob>& job) {
  for (size_t told = 0; told < observers_.size(); ++told) {
    if (Status s = observers_[told]->OnJobOpened(job); !s.ok()) {
      while (told > 0) observers_[--told]->OnJobClosed(job->id);
      return s;
    }
  }
  return Status::Ok();
}

void JobManager::AnnounceClosed(JobId job_id) {
  for (JobLifecycleObserver* observer : observers_) observer->OnJobClosed(job_id);
}

void JobManager::ConsumerReady(JobId job_id) const {
  for (JobLifecycleObserver* observer : observers_) observer->OnConsumerReady(job_id);
}

void JobManager::SlotReleased(JobId job_id) const {
  for (JobLifecycleObserver* observer : observers_) observer->OnSlotReleased(job_id);
}

void JobManager::Close(uint64_t job_id, const Status& why) {
  Record record;
  bool drained = false;
  {
    MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return;
    record = std::move(it->second);
    jobs_.erase(it);
    drained = draining_ && jobs_.empty();
  }
  ReleaseIfUnread(*record.job->plan->dataset);
  AnnounceClosed(job_id);
  record.job->ring->Close(why);
  spdlog::info("job {} ({}) ended: {}", job_id, record.job->plan->spec.name, why.ToString());
  record.admission.reset();  // takes mu_: outside the block above
  if (drained && drained_) {
    spdlog::info("drained: the last job ended");
    drained_();
  }
}

Status JobManager::Cancel(uint64_t job_id, const wire::PeerCredentials& by) {
  const Status why = Status::Cancelled("cancelled by uid " + std::to_string(by.uid) +
                                       " (galleyctl cancel " + std::to_string(job_id) + ")");
  {
    MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end() || (it->second.job->plan->owner_uid != by.uid && !IsAdmin(by))) {
      return Status::NotFound("no job " + std::to_string(job_id) + " of yours");
    }
    // The ring first, so the client reads this reason rather than that of
    // the disconnect that follows. Under mu_: the record, hence the
    // connection `cancel` writes to, is alive until Close erases it; the
    // ring's Close and `cancel` never block nor call back.
    it->second.job->ring->Close(why);
    if (it->second.cancel) it->second.cancel(why);
  }
  spdlog::info("job {}: {}", job_id, why.message());
  Close(job_id, why);
  return Status::Ok();
}

Status JobManager::Drain(const wire::PeerCredentials& by) {
  if (!IsAdmin(by)) {
    return Status::PermissionDenied("only root, galleyd's user or admin_group may drain galleyd");
  }
  bool idle = false;
  {
    MutexLock lock(&mu_);
    if (draining_) return Status::Ok();
    draining_ = true;
    idle = jobs_.empty();
    spdlog::info("draining at the request of uid {}: {} jobs still running", by.uid, jobs_.size());
  }
  if (idle && drained_) drained_();
  return Status::Ok();
}

std::vector<std::shared_ptr<ServedJob>> JobManager::Jobs(uid_t uid, bool all) const {
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<ServedJob>> out;
  for (const auto& [id, record] : jobs_) {
    if (all || record.job->plan->owner_uid == uid) out.push_back(record.job);
  }
  return out;
}

JobManagerCounters JobManager::counters() const {
  MutexLock lock(&mu_);
  return {jobs_.size(), jobs_opened_, jobs_refused_, shm_in_use_, draining_};
}

void JobManager::CloseAll(const Status& reason) {
  std::vector<uint64_t> ids;
  {
    MutexLock lock(&mu_);
    for (const auto& [id, record] : jobs_) ids.push_back(id);
  }
  for (uint64_t id : ids) Close(id, reason);
}

}  // namespace galley
