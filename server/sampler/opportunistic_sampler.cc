#include "galley/sampler/opportunistic_sampler.h"

#include <bit>
#include <cmath>
#include <string>

namespace galley {

Status OpportunisticSampler::AddJob(JobId job, std::span<const ItemId> items,
                                    const JobSamplingOptions& options) {
  const double fraction = options.substitution_fraction;
  // Written so that NaN fails too.
  if (!(fraction >= 0.0 && fraction <= 1.0)) {
    return Status::InvalidArgument("substitution fraction of job " + std::to_string(job) +
                                   " must lie in [0, 1]");
  }
  GALLEY_RETURN_IF_ERROR(MembershipSampler::AddJob(job, items, options));
  const int slot = index_.SlotOf(job);
  budget_[slot] = static_cast<uint64_t>(std::floor(fraction * static_cast<double>(items.size())));
  substitutions_[slot] = 0;
  return Status::Ok();
}

SubstitutionStats OpportunisticSampler::Substitutions(JobId job) const {
  const int slot = index_.SlotOf(job);
  if (slot < 0) return {};
  return {substitutions_[slot], budget_[slot]};
}

bool OpportunisticSampler::HasBudget(SlotMask slots) const {
  for (SlotMask rest = slots; rest != 0; rest &= rest - 1) {
    const int slot = std::countr_zero(rest);
    if (substitutions_[slot] >= budget_[slot]) return false;
  }
  return true;
}

std::optional<ItemId> OpportunisticSampler::FindCached(SlotMask required) {
  const auto needed_by_all = [&](size_t atom) {
    return (index_.atom_members(atom) & required) == required;
  };
  size_t candidates = 0;
  for (size_t a = 0; a < index_.atom_count(); ++a) {
    if (needed_by_all(a)) candidates += index_.atom_size(a);
  }
  if (candidates == 0) return std::nullopt;

  if (candidates <= kScanLimit) {
    cached_candidates_.clear();
    for (size_t a = 0; a < index_.atom_count(); ++a) {
      if (!needed_by_all(a)) continue;
      for (size_t k = 0; k < index_.atom_size(a); ++k) {
        const ItemId item = index_.atom_item(a, k);
        if (is_cached_(item)) cached_candidates_.push_back(item);
      }
    }
    if (cached_candidates_.empty()) return std::nullopt;
    return cached_candidates_[random_.Below(cached_candidates_.size())];
  }

  // Rejection: each try is uniform over the candidates, so the first cached
  // one is uniform over the cached candidates.
  for (int attempt = 0; attempt < kRejectionTries; ++attempt) {
    uint64_t target = random_.Below(candidates);
    for (size_t a = 0; a < index_.atom_count(); ++a) {
      if (!needed_by_all(a)) continue;
      if (target < index_.atom_size(a)) {
        const ItemId item = index_.atom_item(a, target);
        if (is_cached_(item)) return item;
        break;
      }
      target -= index_.atom_size(a);
    }
  }
  return std::nullopt;
}

void OpportunisticSampler::Decide(std::span<const int> ready,
                                  std::array<ItemId, kMaxJobsPerDataset>& chosen) {
  DependentSampler::Decide(ready, chosen);
  if (!is_cached_) return;

  // The delivery groups dsa formed: jobs given the same item share its load.
  group_items_.clear();
  group_slots_.clear();
  for (int slot : ready) {
    size_t g = 0;
    while (g < group_items_.size() && group_items_[g] != chosen[slot]) ++g;
    if (g == group_items_.size()) {
      group_items_.push_back(chosen[slot]);
      group_slots_.push_back(0);
    }
    group_slots_[g] |= SlotBit(slot);
  }

  std::array<ItemId, kMaxJobsPerDataset> own{};
  for (size_t g = 0; g < group_items_.size(); ++g) {
    const SlotMask slots = group_slots_[g];
    if (!HasBudget(slots) || is_cached_(group_items_[g])) continue;
    std::optional<ItemId> shared = FindCached(slots);
    if (!shared && std::has_single_bit(slots)) continue;  // its own set was just searched
    bool everyone_found = true;
    if (!shared) {
      for (SlotMask rest = slots; rest != 0 && everyone_found; rest &= rest - 1) {
        const int slot = std::countr_zero(rest);
        const std::optional<ItemId> item = FindCached(SlotBit(slot));
        if (item) {
          own[slot] = *item;
        } else {
          everyone_found = false;
        }
      }
    }
    if (!everyone_found) continue;
    for (SlotMask rest = slots; rest != 0; rest &= rest - 1) {
      const int slot = std::countr_zero(rest);
      chosen[slot] = shared ? *shared : own[slot];
      ++substitutions_[slot];
    }
  }
}

}  // namespace galley
