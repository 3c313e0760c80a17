// MembershipSampler: the part every item-tracking policy shares — job
// registration in a MembershipIndex, collecting the ready jobs of a round,
// grouping equal choices into deliveries and taking the delivered items out
// of the receivers' remaining sets.
//
// A policy derives from it and implements Decide: given the ready slots, pick
// one item for each. Whatever Decide picks is delivered and removed; masked
// jobs are never passed to Decide, so their remaining sets only shrink by what
// they themselves receive. The opportunistic policy ("ods") works at this
// seam: it lets DependentSampler decide, then replaces some chosen items by
// cached ones from the same jobs' remaining sets before they are delivered.
//
// Not thread-safe, like every SamplingPolicy.
#ifndef GALLEY_SERVER_SAMPLER_MEMBERSHIP_SAMPLER_H_
#define GALLEY_SERVER_SAMPLER_MEMBERSHIP_SAMPLER_H_

#include <array>
#include <optional>
#include <span>

#include "galley/sampler/membership_index.h"
#include "galley/sampler/sampling_policy.h"
#include "galley/sampler/uniform_random.h"

namespace galley {

class MembershipSampler : public SamplingPolicy {
 public:
  explicit MembershipSampler(uint64_t seed) : random_(seed) {}

  using SamplingPolicy::AddJob;
  Status AddJob(JobId job, std::span<const ItemId> items,
                const JobSamplingOptions& options) override;
  void RemoveJob(JobId job) override;
  size_t Remaining(JobId job) const override;
  bool Next(const ReadyFn& ready, Round* round) override;

  const MembershipIndex& index() const { return index_; }

 protected:
  // Fills chosen[slot] for every slot in `ready` (slots with items left, in
  // ascending remaining count, ties by slot). Each chosen item must still be
  // needed by its slot.
  virtual void Decide(std::span<const int> ready,
                      std::array<ItemId, kMaxJobsPerDataset>& chosen) = 0;

  // The stream for a draw `slot` makes alone: its own when AddJob gave a
  // seed (JobSamplingOptions::seed), the policy's otherwise.
  UniformRandom& AloneRandom(int slot) { return own_random_[slot] ? *own_random_[slot] : random_; }

  MembershipIndex index_;
  UniformRandom random_;

 private:
  std::vector<int> ready_slots_;                     // reused across rounds
  std::array<ItemId, kMaxJobsPerDataset> chosen_{};  // reused across rounds
  std::array<SlotMask, kMaxJobsPerDataset> receivers_{};
  std::array<std::optional<UniformRandom>, kMaxJobsPerDataset> own_random_;  // per slot
};

}  // namespace galley

#endif  // GALLEY_SERVER_SAMPLER_MEMBERSHIP_SAMPLER_H_
