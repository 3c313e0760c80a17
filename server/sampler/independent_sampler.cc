#include "server/sampler/independent_sampler.h"

namespace galley {

void IndependentSampler::Decide(std::span<const int> ready,
                                std::array<ItemId, kMaxJobsPerDataset>& chosen) {
  for (int slot : ready) {
    chosen[slot] =
        index_.UniformPick(slot, /*exclude=*/0, index_.Remaining(slot), AloneRandom(slot));
  }
}

}  // namespace galley
