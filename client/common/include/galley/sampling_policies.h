// The sampling policies galleyd knows, by the names jobs, flags, the config
// file and the Python package (galley.sampling_policies) use: the one list
// of them. docs/sampling.md says what each does; server/sampler builds them.
// Constant data and pure functions; safe from any thread.
#ifndef GALLEY_SAMPLING_POLICIES_H_
#define GALLEY_SAMPLING_POLICIES_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace galley {

enum class SamplingPolicyKind : uint8_t {
  kDsa,          // dependent sampling over a coupling tree (the default)
  kDsaChain,     // Joader's chain as published: shares nested overlaps only
  kIndependent,  // every job alone; coinciding items merged
  kLockstep,     // one shared permutation per epoch (CoorDL style)
  kOds,          // dsa preferring cached items, within a per-job budget
  kSequential,   // id order: what a job with shuffle=false uses
};

struct SamplingPolicyName {
  SamplingPolicyKind kind;
  std::string_view name;
  // A random order: a job with shuffle=true, the daemon's default policy and
  // a dataset's default may name it. Only "sequential" is not: it is the
  // order of shuffle=false and is never named.
  bool random_order;
};

inline constexpr SamplingPolicyName kSamplingPolicies[] = {
    {SamplingPolicyKind::kDsa, "dsa", true},
    {SamplingPolicyKind::kDsaChain, "dsa-chain", true},
    {SamplingPolicyKind::kIndependent, "independent", true},
    {SamplingPolicyKind::kLockstep, "lockstep", true},
    {SamplingPolicyKind::kOds, "ods", true},
    {SamplingPolicyKind::kSequential, "sequential", false},
};

inline constexpr SamplingPolicyKind kDefaultSamplingPolicy = SamplingPolicyKind::kDsa;

// The table as a range: for (const SamplingPolicyName& p : SamplingPolicyNames()).
constexpr std::span<const SamplingPolicyName> SamplingPolicyNames() { return kSamplingPolicies; }

constexpr std::string_view SamplingPolicyNameOf(SamplingPolicyKind kind) {
  for (const SamplingPolicyName& policy : kSamplingPolicies) {
    if (policy.kind == kind) return policy.name;
  }
  return "unknown";
}

// The policy `name` names, or nullopt for a name galley does not know.
constexpr std::optional<SamplingPolicyKind> ParseSamplingPolicy(std::string_view name) {
  for (const SamplingPolicyName& policy : kSamplingPolicies) {
    if (policy.name == name) return policy.kind;
  }
  return std::nullopt;
}
// Whether a job, a flag or the config may name `name` (a random order).
constexpr bool IsRandomOrderPolicy(std::string_view name) {
  for (const SamplingPolicyName& policy : kSamplingPolicies) {
    if (policy.name == name) return policy.random_order;
  }
  return false;
}

// The names a job, a flag or the config may give, in table order.
std::vector<std::string> RandomOrderPolicyNames();
// The same for messages: "dsa, dsa-chain, independent, lockstep or ods".
std::string RandomOrderPolicyList();

}  // namespace galley

#endif  // GALLEY_SAMPLING_POLICIES_H_
