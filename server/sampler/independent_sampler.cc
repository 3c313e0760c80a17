#include "galley/sampler/independent_sampler.h"

namespace galley {

Status IndependentSampler::AddJob(JobId job, std::span<const ItemId> items,
                                  const JobSamplingOptions& options) {
  GALLEY_RETURN_IF_ERROR(MembershipSampler::AddJob(job, items, options));
  if (options.seed) deck_[index_.SlotOf(job)].assign(items.begin(), items.end());
  return Status::Ok();
}

void IndependentSampler::RemoveJob(JobId job) {
  const int slot = index_.SlotOf(job);
  if (slot >= 0) {
    deck_[slot].clear();
    deck_[slot].shrink_to_fit();
  }
  MembershipSampler::RemoveJob(job);
}

void IndependentSampler::Decide(std::span<const int> ready,
                                std::array<ItemId, kMaxJobsPerDataset>& chosen) {
  for (int slot : ready) {
    std::vector<ItemId>& deck = deck_[slot];
    if (deck.empty()) {
      chosen[slot] =
          index_.UniformPick(slot, /*exclude=*/0, index_.Remaining(slot), AloneRandom(slot));
      continue;
    }
    const size_t pick = AloneRandom(slot).Below(deck.size());
    chosen[slot] = deck[pick];
    deck[pick] = deck.back();
    deck.pop_back();
  }
}

}  // namespace galley
