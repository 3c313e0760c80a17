#include "galley/sampler/dependent_sampler.h"

#include <algorithm>
#include <bit>

namespace galley {

void DependentSampler::Decide(std::span<const int> ready,
                              std::array<ItemId, kMaxJobsPerDataset>& chosen) {
  if (coupling_ == Coupling::kTree) {
    DecideTree(ready, chosen);
  } else {
    DecideChain(ready, chosen);
  }
}

void DependentSampler::DecideTree(std::span<const int> ready,
                                  std::array<ItemId, kMaxJobsPerDataset>& chosen) {
  for (size_t i = 0; i < ready.size(); ++i) {
    const int k = ready[i];
    const size_t lk = index_.Remaining(k);
    // The parent must be a function of the sizes only: choosing it by the
    // items already drawn would bias k towards them.
    int parent = -1;
    size_t shared = 0;
    for (size_t j = 0; j < i; ++j) {
      const size_t overlap = index_.Overlap(ready[j], k);
      if (overlap > 0 && overlap >= shared) {
        shared = overlap;
        parent = ready[j];
      }
    }
    if (parent < 0) {
      // Nobody earlier shares k's items: k draws alone, from its own stream.
      chosen[k] = index_.UniformPick(k, /*exclude=*/0, lk, AloneRandom(k));
      continue;
    }
    // Maximal coupling of two uniform draws with ℓ_parent <= ℓ_k: each item of
    // the overlap reaches k through the parent with probability
    // (1/ℓ_parent)·(ℓ_parent/ℓ_k) = 1/ℓ_k, and the rest of S_k is filled by
    // the fallback draw, which happens with probability 1 - shared/ℓ_k.
    // k also takes the parent's item when S_k == S_parent (lk == shared):
    // the coin would always land then.
    const ItemId candidate = chosen[parent];
    const bool coupled = (index_.MembersOf(candidate) & SlotBit(k)) != 0 &&
                         random_.Chance(index_.Remaining(parent), lk);
    if (coupled || lk <= shared) {
      chosen[k] = candidate;
    } else {
      chosen[k] = index_.UniformPick(k, SlotBit(parent), lk - shared, random_);
    }
  }
}

void DependentSampler::DecideChain(std::span<const int> ready,
                                   std::array<ItemId, kMaxJobsPerDataset>& chosen) {
  const size_t atoms = index_.atom_count();
  visited_.assign(atoms, 0);
  std::array<size_t, kMaxJobsPerDataset> available{};
  std::vector<int> undecided(ready.begin(), ready.end());
  for (int slot : undecided) available[slot] = index_.Remaining(slot);
  SlotMask undecided_mask = 0;
  for (int slot : undecided) undecided_mask |= SlotBit(slot);

  while (!undecided.empty()) {
    std::stable_sort(undecided.begin(), undecided.end(),
                     [&](int a, int b) { return available[a] < available[b]; });
    size_t common = 0;
    for (size_t a = 0; a < atoms; ++a) {
      if (!visited_[a] && (index_.atom_members(a) & undecided_mask) == undecided_mask) {
        common += index_.atom_size(a);
      }
    }
    const int first = undecided.front();
    if (common == 0) {
      // Nothing is needed by every undecided job: the smallest draws alone
      // from what it still has in play.
      uint64_t target = AloneRandom(first).Below(available[first]);
      for (size_t a = 0; a < atoms; ++a) {
        if (visited_[a] || (index_.atom_members(a) & SlotBit(first)) == 0) continue;
        if (target < index_.atom_size(a)) {
          chosen[first] = index_.atom_item(a, target);
          break;
        }
        target -= index_.atom_size(a);
      }
      undecided.erase(undecided.begin());
      undecided_mask &= ~SlotBit(first);
      continue;
    }
    // Joiners are a prefix: the smallest joins with probability
    // common/available, each next one with previous/own given the previous
    // joined, so job k joins with probability common/available_k.
    size_t joiners = 0;
    if (random_.Chance(common, available[first])) {
      joiners = 1;
      while (joiners < undecided.size() &&
             random_.Chance(available[undecided[joiners - 1]], available[undecided[joiners]])) {
        ++joiners;
      }
    }
    if (joiners > 0) {
      // A job deciding alone draws from its own stream (when it has one).
      UniformRandom& random = undecided.size() == 1 ? AloneRandom(first) : random_;
      uint64_t target = random.Below(common);
      ItemId item = 0;
      for (size_t a = 0; a < atoms; ++a) {
        if (visited_[a] || (index_.atom_members(a) & undecided_mask) != undecided_mask) continue;
        if (target < index_.atom_size(a)) {
          item = index_.atom_item(a, target);
          break;
        }
        target -= index_.atom_size(a);
      }
      for (size_t j = 0; j < joiners; ++j) chosen[undecided[j]] = item;
    }
    for (size_t a = 0; a < atoms; ++a) {
      if (!visited_[a] && (index_.atom_members(a) & undecided_mask) == undecided_mask) {
        visited_[a] = 1;
      }
    }
    for (size_t j = 0; j < joiners; ++j) undecided_mask &= ~SlotBit(undecided[j]);
    undecided.erase(undecided.begin(), undecided.begin() + static_cast<long>(joiners));
    for (int slot : undecided) available[slot] -= common;
  }
}

}  // namespace galley
