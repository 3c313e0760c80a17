// IndependentSampler: the baseline policy. Every ready job draws its next item
// uniformly from its own remaining set, with no regard for the others; when two
// draws happen to coincide the item is loaded once for both.
//
// Not thread-safe, like every SamplingPolicy.
#ifndef GALLEY_SERVER_SAMPLER_INDEPENDENT_SAMPLER_H_
#define GALLEY_SERVER_SAMPLER_INDEPENDENT_SAMPLER_H_

#include "server/sampler/membership_sampler.h"

namespace galley {

class IndependentSampler final : public MembershipSampler {
 public:
  explicit IndependentSampler(uint64_t seed) : MembershipSampler(seed) {}
  std::string_view name() const override {
    return SamplingPolicyNameOf(SamplingPolicyKind::kIndependent);
  }

 protected:
  void Decide(std::span<const int> ready, std::array<ItemId, kMaxJobsPerDataset>& chosen) override;
};

}  // namespace galley

#endif  // GALLEY_SERVER_SAMPLER_INDEPENDENT_SAMPLER_H_
