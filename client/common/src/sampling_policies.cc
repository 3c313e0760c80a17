#include "galley/sampling_policies.h"

namespace galley {

std::vector<std::string> RandomOrderPolicyNames() {
  std::vector<std::string> names;
  for (const SamplingPolicyName& policy : kSamplingPolicies) {
    if (policy.random_order) names.emplace_back(policy.name);
  }
  return names;
}

std::string RandomOrderPolicyList() {
  const std::vector<std::string> names = RandomOrderPolicyNames();
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) list += i + 1 == names.size() ? " or " : ", ";
    list += names[i];
  }
  return list;
}

}  // namespace galley
