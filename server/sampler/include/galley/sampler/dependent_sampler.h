// DependentSampler: dependent sampling (DSA) — the jobs' random draws are
// coupled so that jobs with overlapping remaining sets often receive the same
// item in the same round, while each job's next item stays exactly uniform
// over its own remaining set (docs/sampling.md has the proofs).
//
// Two couplings:
//  - kTree ("dsa", the default): ready jobs are taken in ascending remaining
//    count ℓ. The first draws uniformly. Each later job k picks as parent the
//    earlier job p with the largest overlap |S_p ∩ S_k| (chosen from the sizes
//    alone, never from the drawn items) and is maximally coupled to it: if p's
//    item x lies in S_k, k takes x with probability ℓ_p/ℓ_k; otherwise k draws
//    uniformly from S_k \ S_p. Every pair (p, k) joined by the tree shares with
//    probability |S_p ∩ S_k| / ℓ_k, the most two uniform draws can; overlaps of
//    any shape (A∩B, A∩C, B∩C) are shared, and on nested sets every pair, not
//    only neighbours, reaches that optimum.
//  - kChain ("dsa-chain"): Joader's chain. The part common to all undecided
//    jobs is offered to them in ascending order, the joiners being a prefix;
//    the others go on conditioned on "not in it"; when nothing is common the
//    smallest job draws alone. Overlaps that are not common to a suffix of the
//    chain are not coupled. Kept to measure what the tree gains.
//
// A round costs O(m² + m·K) for m ready jobs and K atoms (distinct
// membership patterns, see MembershipIndex), independent of the item count.
//
// OpportunisticSampler ("ods") derives from it and edits its decisions.
//
// Not thread-safe, like every SamplingPolicy.
#ifndef GALLEY_SERVER_SAMPLER_DEPENDENT_SAMPLER_H_
#define GALLEY_SERVER_SAMPLER_DEPENDENT_SAMPLER_H_

#include <vector>

#include "galley/sampler/membership_sampler.h"

namespace galley {

class DependentSampler : public MembershipSampler {
 public:
  enum class Coupling { kTree, kChain };

  DependentSampler(Coupling coupling, uint64_t seed)
      : MembershipSampler(seed), coupling_(coupling) {}

  std::string_view name() const override {
    return SamplingPolicyNameOf(coupling_ == Coupling::kTree ? SamplingPolicyKind::kDsa
                                                             : SamplingPolicyKind::kDsaChain);
  }

 protected:
  void Decide(std::span<const int> ready, std::array<ItemId, kMaxJobsPerDataset>& chosen) override;

 private:
  void DecideTree(std::span<const int> ready, std::array<ItemId, kMaxJobsPerDataset>& chosen);
  void DecideChain(std::span<const int> ready, std::array<ItemId, kMaxJobsPerDataset>& chosen);

  const Coupling coupling_;
  std::vector<uint8_t> visited_;  // per live atom, reused by DecideChain
};

}  // namespace galley

#endif  // GALLEY_SERVER_SAMPLER_DEPENDENT_SAMPLER_H_
