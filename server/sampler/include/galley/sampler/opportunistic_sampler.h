// OpportunisticSampler ("ods"): dependent sampling that prefers what the
// cache already holds (Seneca's opportunistic data sampling on top of DSA;
// docs/sampling.md §8).
//
// Every round the dsa tree decides first. Then each delivery group — the
// ready jobs that dsa gave the same item x — is looked at as a whole. If x is
// in no cache tier, every job of the group has substitution budget left, and
// a cached replacement can be found, the group receives the replacement
// instead of x:
//  - preferably one item y, uniform over the cached items that every job of
//    the group still needs, so the group keeps sharing one delivery;
//  - otherwise each job its own item, uniform over the cached items of its
//    remaining set — but only if every job of the group finds one, because x
//    is loaded anyway as soon as one of them keeps it, and a partial
//    substitution would spend budget and bend orders for no saved load.
// x stays in the remaining sets, so each job still receives every item of its
// epoch exactly once. Each substitution costs each receiving job one unit of
// its budget, floor(substitution_fraction × epoch size) per epoch.
//
// What is given up: a job's next item is no longer uniform over its remaining
// set — cached items come earlier than they would. The bias is bounded by the
// budget: at most that fraction of an epoch's positions is decided by the
// cache; all other draws are dsa's. With nothing cached, or everything, or a
// zero budget, ods makes no substitution and each epoch is uniform.
//
// Finding a cached item: the candidate set (the items every job of the group
// needs) is scanned exactly when it has at most kScanLimit items; a larger
// one is sampled by rejection, up to kRejectionTries uniform draws tested
// against the cache. A success is exactly uniform over the cached candidates;
// when fewer than about 1 in 16 candidates are cached the search may fail
// (probability (1 - cached fraction)^64) and the round keeps dsa's choice,
// which only lowers the bias. A round costs dsa's plus at most
// kRejectionTries · O(atoms) per uncached group.
//
// Not thread-safe, like every SamplingPolicy. The is-cached predicate is
// called from Next only.
#ifndef GALLEY_SERVER_SAMPLER_OPPORTUNISTIC_SAMPLER_H_
#define GALLEY_SERVER_SAMPLER_OPPORTUNISTIC_SAMPLER_H_

#include <array>
#include <optional>
#include <vector>

#include "galley/sampler/dependent_sampler.h"

namespace galley {

class OpportunisticSampler final : public DependentSampler {
 public:
  // Candidate sets up to this size are scanned; larger ones sampled.
  static constexpr size_t kScanLimit = 256;
  static constexpr int kRejectionTries = 64;

  // `is_cached` may be empty: nothing is cached, and the policy decides
  // exactly as dsa with the same seed.
  OpportunisticSampler(uint64_t seed, CachedFn is_cached)
      : DependentSampler(Coupling::kTree, seed), is_cached_(std::move(is_cached)) {}

  using SamplingPolicy::AddJob;
  // As SamplingPolicy::AddJob; InvalidArgument unless
  // 0 <= options.substitution_fraction <= 1.
  Status AddJob(JobId job, std::span<const ItemId> items,
                const JobSamplingOptions& options) override;
  SubstitutionStats Substitutions(JobId job) const override;
  std::string_view name() const override { return SamplingPolicyNameOf(SamplingPolicyKind::kOds); }

 protected:
  void Decide(std::span<const int> ready, std::array<ItemId, kMaxJobsPerDataset>& chosen) override;

 private:
  // A uniformly chosen cached item needed by every slot of `required`, or
  // nothing when none is found.
  std::optional<ItemId> FindCached(SlotMask required);
  bool HasBudget(SlotMask slots) const;

  const CachedFn is_cached_;
  std::array<uint64_t, kMaxJobsPerDataset> budget_{};         // per slot, this epoch
  std::array<uint64_t, kMaxJobsPerDataset> substitutions_{};  // per slot, this epoch
  std::vector<ItemId> group_items_;                           // reused by Decide
  std::vector<SlotMask> group_slots_;                         // reused by Decide
  std::vector<ItemId> cached_candidates_;                     // reused by FindCached
};

}  // namespace galley

#endif  // GALLEY_SERVER_SAMPLER_OPPORTUNISTIC_SAMPLER_H_
