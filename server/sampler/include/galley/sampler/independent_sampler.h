// IndependentSampler: the baseline policy. Every ready job draws its next item
// uniformly from its own remaining set, with no regard for the others; when two
// draws happen to coincide the item is loaded once for both. Each job draws
// from its own seeded stream (JobSamplingOptions::seed) whatever the other
// jobs, so its order is a function of its seed: jobs with different seeds
// get unrelated orders side by side, and jobs with equal seeds on the same
// items get the same order, which is loaded once for all.
//
// Not thread-safe, like every SamplingPolicy.
#ifndef GALLEY_SERVER_SAMPLER_INDEPENDENT_SAMPLER_H_
#define GALLEY_SERVER_SAMPLER_INDEPENDENT_SAMPLER_H_

#include <array>
#include <vector>

#include "galley/sampler/membership_sampler.h"

namespace galley {

class IndependentSampler final : public MembershipSampler {
 public:
  explicit IndependentSampler(uint64_t seed) : MembershipSampler(seed) {}
  using MembershipSampler::AddJob;
  Status AddJob(JobId job, std::span<const ItemId> items,
                const JobSamplingOptions& options) override;
  void RemoveJob(JobId job) override;
  bool OrdersFollowJobSeeds() const override { return true; }
  std::string_view name() const override {
    return SamplingPolicyNameOf(SamplingPolicyKind::kIndependent);
  }

 protected:
  void Decide(std::span<const int> ready, std::array<ItemId, kMaxJobsPerDataset>& chosen) override;

 private:
  // A seeded job's remaining items, in its own array: a pick from the
  // index's atoms maps a random number to an item through the other jobs'
  // memberships, so it would follow them. The array starts in AddJob's
  // order and loses each pick by a swap with its last item, as a lone job's
  // atom does, so a job's order is the one it gets alone. It equals the
  // job's remaining set in the index: only the job's own picks shrink it.
  std::array<std::vector<ItemId>, kMaxJobsPerDataset> deck_;
};

}  // namespace galley

#endif  // GALLEY_SERVER_SAMPLER_INDEPENDENT_SAMPLER_H_
