#include "galley/sampler/sampling_policy.h"

#include "galley/sampler/dependent_sampler.h"
#include "galley/sampler/independent_sampler.h"
#include "galley/sampler/lockstep_sampler.h"
#include "galley/sampler/opportunistic_sampler.h"

namespace galley {

size_t Round::requests() const {
  size_t total = 0;
  for (const Delivery& delivery : deliveries) total += delivery.receivers.size();
  return total;
}

Result<std::unique_ptr<SamplingPolicy>> MakeSamplingPolicy(const SamplerOptions& options) {
  const std::optional<SamplingPolicyKind> kind = ParseSamplingPolicy(options.policy);
  if (!kind) {
    std::string expected;
    for (const SamplingPolicyName& known : SamplingPolicyNames()) {
      expected += (expected.empty() ? "" : ", ") + std::string(known.name);
    }
    return Status::InvalidArgument("unknown sampling policy '" + options.policy +
                                   "' (expected one of " + expected + ")");
  }
  std::unique_ptr<SamplingPolicy> policy;
  switch (*kind) {
    case SamplingPolicyKind::kDsa:
      policy = std::make_unique<DependentSampler>(DependentSampler::Coupling::kTree, options.seed);
      break;
    case SamplingPolicyKind::kDsaChain:
      policy = std::make_unique<DependentSampler>(DependentSampler::Coupling::kChain, options.seed);
      break;
    case SamplingPolicyKind::kIndependent:
      policy = std::make_unique<IndependentSampler>(options.seed);
      break;
    case SamplingPolicyKind::kLockstep:
      policy = std::make_unique<LockstepSampler>(options.seed);
      break;
    case SamplingPolicyKind::kSequential:
      policy = std::make_unique<LockstepSampler>(options.seed, /*shuffle=*/false);
      break;
    case SamplingPolicyKind::kOds:
      policy = std::make_unique<OpportunisticSampler>(options.seed, options.is_cached);
      break;
  }
  return policy;
}

}  // namespace galley
