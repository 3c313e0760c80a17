// LockstepSampler: every job follows one shared permutation (CoorDL style).
//
// A job's n-th epoch (the n-th AddJob of that job id) is its subset sorted by
// id and shuffled by a stream that depends only on the policy seed and n. Two
// jobs on identical subsets in the same epoch number therefore walk the same
// order, and while they are ready together they receive each item in the same
// round and it is loaded once. Nothing else is shared: a job that starts later,
// falls behind (masked while the others go on), or has a different subset
// follows its own order, and equal items meet only by chance. Each epoch is
// still a uniformly random permutation of the job's subset, but it is the same
// permutation for every job of that epoch number, so jobs are not independent.
//
// Not thread-safe, like every SamplingPolicy.
#ifndef GALLEY_SERVER_SAMPLER_LOCKSTEP_SAMPLER_H_
#define GALLEY_SERVER_SAMPLER_LOCKSTEP_SAMPLER_H_

#include <unordered_map>
#include <vector>

#include "galley/sampler/sampling_policy.h"

namespace galley {

class LockstepSampler final : public SamplingPolicy {
 public:
  // shuffle = false: the "sequential" policy — each job walks its items in
  // the order AddJob gave them, so jobs given equal orders share. That order
  // may hold an item more than once (each copy is delivered at its place);
  // every other policy refuses duplicates.
  explicit LockstepSampler(uint64_t seed, bool shuffle = true) : seed_(seed), shuffle_(shuffle) {}

  using SamplingPolicy::AddJob;
  Status AddJob(JobId job, std::span<const ItemId> items,
                const JobSamplingOptions& options) override;
  void RemoveJob(JobId job) override;
  size_t Remaining(JobId job) const override;
  bool Next(const ReadyFn& ready, Round* round) override;
  bool OrdersFollowJobSeeds() const override { return true; }
  std::string_view name() const override {
    return SamplingPolicyNameOf(shuffle_ ? SamplingPolicyKind::kLockstep
                                         : SamplingPolicyKind::kSequential);
  }

 private:
  struct JobOrder {
    JobId job = 0;
    std::vector<ItemId> order;
    size_t cursor = 0;
  };

  const uint64_t seed_;
  const bool shuffle_;
  std::vector<JobOrder> jobs_;                          // in registration order
  std::unordered_map<JobId, uint64_t> epochs_started_;  // AddJob calls per job id
};

}  // namespace galley

#endif  // GALLEY_SERVER_SAMPLER_LOCKSTEP_SAMPLER_H_
