#include "galley/sampler/membership_sampler.h"

#include <algorithm>
#include <bit>

#include "galley/sampler/delivery_grouping.h"

namespace galley {

Status MembershipSampler::AddJob(JobId job, std::span<const ItemId> items,
                                 const JobSamplingOptions& options) {
  const bool alone = index_.occupied() == 0;
  Result<int> slot = index_.AddJob(job, items);
  if (!slot.ok()) return slot.status();
  if (OrdersFollowJobSeeds()) {
    // Every job draws alone from its own remaining set, which only its own
    // draws shrink: its stream shapes nothing but its own order.
    if (options.seed) own_random_[*slot].emplace(*options.seed);
    return Status::Ok();
  }
  // A coupled job keeps its own stream only while it has been alone since
  // it entered its epoch: once two jobs are registered, every draw uses the
  // policy's stream for the rest of their epochs. Own streams are equal for
  // equal seeds, so a draw from one must never follow a history that
  // another job's draws from the same bits have shaped.
  for (auto& own : own_random_) own.reset();
  if (alone && options.seed) own_random_[*slot].emplace(*options.seed);
  return Status::Ok();
}

void MembershipSampler::RemoveJob(JobId job) {
  const int slot = index_.SlotOf(job);
  if (slot >= 0) own_random_[slot].reset();
  index_.RemoveJob(job);
}

size_t MembershipSampler::Remaining(JobId job) const {
  const int slot = index_.SlotOf(job);
  return slot < 0 ? 0 : index_.Remaining(slot);
}

bool MembershipSampler::Next(const ReadyFn& ready, Round* round) {
  ready_slots_.clear();
  for (SlotMask rest = index_.occupied(); rest != 0; rest &= rest - 1) {
    const int slot = std::countr_zero(rest);
    if (index_.Remaining(slot) > 0 && ready(index_.JobAt(slot))) ready_slots_.push_back(slot);
  }
  if (ready_slots_.empty()) {
    round->deliveries.clear();
    return false;
  }
  std::sort(ready_slots_.begin(), ready_slots_.end(), [this](int a, int b) {
    const size_t la = index_.Remaining(a);
    const size_t lb = index_.Remaining(b);
    return la != lb ? la < lb : a < b;
  });
  Decide(ready_slots_, chosen_);

  // Group equal choices; there are at most as many deliveries as ready slots.
  std::fill_n(receivers_.begin(), ready_slots_.size(), SlotMask{0});
  size_t count = 0;
  for (int slot : ready_slots_) {
    const size_t d = AddReceiver(round, &count, chosen_[slot], index_.JobAt(slot));
    receivers_[d] |= SlotBit(slot);
  }
  round->deliveries.resize(count);
  for (size_t d = 0; d < count; ++d) index_.Take(round->deliveries[d].item, receivers_[d]);
  return true;
}

}  // namespace galley
