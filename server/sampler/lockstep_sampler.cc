#include "galley/sampler/lockstep_sampler.h"

#include <algorithm>
#include <string>

#include "galley/sampler/delivery_grouping.h"
#include "galley/sampler/uniform_random.h"

namespace galley {

Status LockstepSampler::AddJob(JobId job, std::span<const ItemId> items,
                               const JobSamplingOptions& options) {
  for (const JobOrder& existing : jobs_) {
    if (existing.job == job) {
      return Status::InvalidArgument("job " + std::to_string(job) + " is already registered");
    }
  }
  if (jobs_.size() >= kMaxJobsPerDataset) {
    return Status::ResourceExhausted("a dataset's sampler tracks at most " +
                                     std::to_string(kMaxJobsPerDataset) + " jobs");
  }
  JobOrder entry;
  entry.job = job;
  entry.order.assign(items.begin(), items.end());
  std::vector<ItemId> sorted;
  if (shuffle_) {
    // Only the walk of a given order may hold an item twice (a client's
    // list that repeats one).
    sorted = entry.order;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      return Status::InvalidArgument("the subset of job " + std::to_string(job) +
                                     " has a duplicate item");
    }
  }
  const uint64_t epoch = epochs_started_[job]++;
  if (shuffle_) {
    // Fisher–Yates with a stream fixed by the job's epoch seed (or, without
    // one, by the policy seed and the job's epoch count): equal sorted
    // subsets with equal seeds get equal orders.
    entry.order = std::move(sorted);
    UniformRandom random(options.seed
                             ? *options.seed
                             : seed_ ^ (epoch * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL));
    for (size_t i = entry.order.size(); i > 1; --i) {
      std::swap(entry.order[i - 1], entry.order[random.Below(i)]);
    }
  }
  jobs_.push_back(std::move(entry));
  return Status::Ok();
}

void LockstepSampler::RemoveJob(JobId job) {
  std::erase_if(jobs_, [job](const JobOrder& entry) { return entry.job == job; });
}

size_t LockstepSampler::Remaining(JobId job) const {
  for (const JobOrder& entry : jobs_) {
    if (entry.job == job) return entry.order.size() - entry.cursor;
  }
  return 0;
}

bool LockstepSampler::Next(const ReadyFn& ready, Round* round) {
  size_t count = 0;
  for (JobOrder& entry : jobs_) {
    if (entry.cursor == entry.order.size() || !ready(entry.job)) continue;
    AddReceiver(round, &count, entry.order[entry.cursor++], entry.job);
  }
  round->deliveries.resize(count);
  return count > 0;
}

}  // namespace galley
