#include "server/sampler/sampling_policy.h"

#include "server/sampler/dependent_sampler.h"
#include "server/sampler/independent_sampler.h"
#include "server/sampler/lockstep_sampler.h"
#include "server/sampler/opportunistic_sampler.h"

namespace galley {

size_t Round::requests() const {
  size_t total = 0;
  for (const Delivery& delivery : deliveries) total += delivery.receivers.size();
  return total;
}

std::span<const SamplingPolicyName> SamplingPolicyNames() {
  static constexpr SamplingPolicyName kNames[] = {{"dsa", true},         {"dsa-chain", true},
                                                  {"independent", true}, {"lockstep", true},
                                                  {"ods", true},         {"sequential", false}};
  return kNames;
}

Result<std::unique_ptr<SamplingPolicy>> MakeSamplingPolicy(const SamplerOptions& options) {
  std::unique_ptr<SamplingPolicy> policy;
  if (options.policy == "dsa") {
    policy = std::make_unique<DependentSampler>(DependentSampler::Coupling::kTree, options.seed);
  } else if (options.policy == "dsa-chain") {
    policy = std::make_unique<DependentSampler>(DependentSampler::Coupling::kChain, options.seed);
  } else if (options.policy == "independent") {
    policy = std::make_unique<IndependentSampler>(options.seed);
  } else if (options.policy == "lockstep") {
    policy = std::make_unique<LockstepSampler>(options.seed);
  } else if (options.policy == "sequential") {
    policy = std::make_unique<LockstepSampler>(options.seed, /*shuffle=*/false);
  } else if (options.policy == "ods") {
    policy = std::make_unique<OpportunisticSampler>(options.seed, options.is_cached);
  } else {
    std::string expected;
    for (const SamplingPolicyName& known : SamplingPolicyNames()) {
      expected += (expected.empty() ? "" : ", ") + std::string(known.name);
    }
    return Status::InvalidArgument("unknown sampling policy '" + options.policy +
                                   "' (expected one of " + expected + ")");
  }
  return policy;
}

}  // namespace galley
