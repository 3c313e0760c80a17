#include "galley/sampler/membership_index.h"

#include <algorithm>
#include <bit>
#include <string>

namespace galley {

namespace {

// Calls fn(slot) for every set bit of `mask`, lowest first.
template <typename Fn>
void ForEachSlot(SlotMask mask, Fn&& fn) {
  while (mask != 0) {
    fn(std::countr_zero(mask));
    mask &= mask - 1;
  }
}

}  // namespace

MembershipIndex::MembershipIndex() = default;

int MembershipIndex::SlotOf(JobId job) const {
  for (SlotMask rest = occupied_; rest != 0; rest &= rest - 1) {
    const int slot = std::countr_zero(rest);
    if (slot_job_[slot] == job) return slot;
  }
  return -1;
}

SlotMask MembershipIndex::MembersOf(ItemId item) const {
  if (item >= atom_of_.size() || atom_of_[item] == kNoAtom) return 0;
  return atoms_[atom_of_[item]].members;
}

Result<int> MembershipIndex::AddJob(JobId job, std::span<const ItemId> items) {
  if (SlotOf(job) >= 0) {
    return Status::InvalidArgument("job " + std::to_string(job) + " is already registered");
  }
  if (occupied_ == ~SlotMask{0}) {
    return Status::ResourceExhausted("a dataset's sampler tracks at most " +
                                     std::to_string(kMaxJobsPerDataset) + " jobs");
  }
  const int slot = std::countr_zero(~occupied_);
  const SlotMask bit = SlotBit(slot);

  ItemId largest = 0;
  for (ItemId item : items) largest = std::max(largest, item);
  if (!items.empty() && largest >= atom_of_.size()) {
    atom_of_.resize(size_t{largest} + 1, kNoAtom);
    position_.resize(size_t{largest} + 1, 0);
  }

  // Adding a slot maps every atom to exactly one other atom (members | bit),
  // so the destination is looked up once per source atom, not once per item.
  std::vector<uint32_t> destination_of(atoms_.size(), kNoAtom);
  uint32_t solo = kNoAtom;  // items no other job needs
  for (ItemId item : items) {
    const uint32_t source = atom_of_[item];
    uint32_t destination;
    if (source == kNoAtom) {
      if (solo == kNoAtom) solo = AtomFor(bit);
      destination = solo;
    } else {
      if ((atoms_[source].members & bit) != 0) {
        ClearSlot(slot);
        return Status::InvalidArgument("item " + std::to_string(item) +
                                       " appears twice in the subset of job " +
                                       std::to_string(job));
      }
      if (source >= destination_of.size()) destination_of.resize(atoms_.size(), kNoAtom);
      if (destination_of[source] == kNoAtom) {
        destination_of[source] = AtomFor(atoms_[source].members | bit);
      }
      destination = destination_of[source];
      Detach(item);
    }
    Attach(item, destination);
  }
  occupied_ |= bit;
  slot_job_[slot] = job;
  RecountOverlaps(slot);
  return slot;
}

bool MembershipIndex::RemoveJob(JobId job) {
  const int slot = SlotOf(job);
  if (slot < 0) return false;
  ClearSlot(slot);
  occupied_ &= ~SlotBit(slot);
  for (size_t other = 0; other < kMaxJobsPerDataset; ++other) {
    overlap_[slot][other] = 0;
    overlap_[other][slot] = 0;
  }
  return true;
}

ItemId MembershipIndex::UniformPick(int slot, SlotMask exclude, size_t count,
                                    UniformRandom& random) const {
  const SlotMask bit = SlotBit(slot);
  uint64_t target = random.Below(count);
  for (uint32_t atom : live_) {
    const Atom& a = atoms_[atom];
    if ((a.members & bit) == 0 || (a.members & exclude) != 0) continue;
    if (target < a.items.size()) return a.items[target];
    target -= a.items.size();
  }
  // Unreachable while `count` matches the index; the last eligible item keeps
  // a caller bug from reading out of bounds.
  for (auto it = live_.rbegin(); it != live_.rend(); ++it) {
    const Atom& a = atoms_[*it];
    if ((a.members & bit) != 0 && (a.members & exclude) == 0) return a.items.back();
  }
  return 0;
}

void MembershipIndex::Take(ItemId item, SlotMask slots) {
  const uint32_t source = atom_of_[item];
  const SlotMask members = atoms_[source].members;
  slots &= members;
  const SlotMask stay = members & ~slots;
  ForEachSlot(slots, [&](int p) {
    ForEachSlot(members, [&](int q) { --overlap_[p][q]; });
    ForEachSlot(stay, [&](int q) { --overlap_[q][p]; });
  });
  Detach(item);
  if (stay == 0) {
    atom_of_[item] = kNoAtom;
  } else {
    Attach(item, AtomFor(stay));
  }
}

uint32_t MembershipIndex::AtomFor(SlotMask members) {
  auto it = atom_by_members_.find(members);
  if (it != atom_by_members_.end()) return it->second;
  uint32_t atom;
  if (!free_atoms_.empty()) {
    atom = free_atoms_.back();
    free_atoms_.pop_back();
  } else {
    atom = static_cast<uint32_t>(atoms_.size());
    atoms_.emplace_back();
    live_position_.push_back(0);
  }
  atoms_[atom].members = members;
  live_position_[atom] = static_cast<uint32_t>(live_.size());
  live_.push_back(atom);
  atom_by_members_.emplace(members, atom);
  return atom;
}

void MembershipIndex::ReleaseIfEmpty(uint32_t atom) {
  if (!atoms_[atom].items.empty()) return;
  atom_by_members_.erase(atoms_[atom].members);
  Retire(atom);
}

void MembershipIndex::Retire(uint32_t atom) {
  const uint32_t moved = live_.back();
  live_[live_position_[atom]] = moved;
  live_position_[moved] = live_position_[atom];
  live_.pop_back();
  free_atoms_.push_back(atom);
}

void MembershipIndex::Detach(ItemId item) {
  const uint32_t atom = atom_of_[item];
  std::vector<ItemId>& items = atoms_[atom].items;
  const ItemId last = items.back();
  items[position_[item]] = last;
  position_[last] = position_[item];
  items.pop_back();
  ReleaseIfEmpty(atom);
}

void MembershipIndex::Attach(ItemId item, uint32_t atom) {
  position_[item] = static_cast<uint32_t>(atoms_[atom].items.size());
  atoms_[atom].items.push_back(item);
  atom_of_[item] = atom;
}

void MembershipIndex::ClearSlot(int slot) {
  const SlotMask bit = SlotBit(slot);
  std::vector<uint32_t> holding;
  for (uint32_t atom : live_) {
    if ((atoms_[atom].members & bit) != 0) holding.push_back(atom);
  }
  // Atoms holding the bit are touched only when their turn comes: merge
  // targets never hold it.
  for (uint32_t atom : holding) {
    const SlotMask from = atoms_[atom].members;
    const SlotMask to = from & ~bit;
    if (to == 0) {
      for (ItemId item : atoms_[atom].items) atom_of_[item] = kNoAtom;
      atoms_[atom].items.clear();
      ReleaseIfEmpty(atom);
      continue;
    }
    auto it = atom_by_members_.find(to);
    if (it == atom_by_members_.end()) {
      atom_by_members_.erase(from);
      atoms_[atom].members = to;
      atom_by_members_.emplace(to, atom);
      continue;
    }
    // Merge the smaller atom into the larger so the cost is the smaller size.
    uint32_t big = atom;
    uint32_t small = it->second;
    if (atoms_[small].items.size() > atoms_[big].items.size()) std::swap(big, small);
    for (ItemId item : atoms_[small].items) Attach(item, big);
    atoms_[small].items.clear();
    atom_by_members_.erase(from);
    atom_by_members_.erase(to);
    atoms_[big].members = to;
    atom_by_members_.emplace(to, big);
    Retire(small);
  }
}

void MembershipIndex::RecountOverlaps(int slot) {
  const SlotMask bit = SlotBit(slot);
  for (size_t other = 0; other < kMaxJobsPerDataset; ++other) overlap_[slot][other] = 0;
  for (uint32_t atom : live_) {
    const Atom& a = atoms_[atom];
    if ((a.members & bit) == 0) continue;
    ForEachSlot(a.members, [&](int q) { overlap_[slot][q] += a.items.size(); });
  }
  for (size_t other = 0; other < kMaxJobsPerDataset; ++other) {
    overlap_[other][slot] = overlap_[slot][other];
  }
}

}  // namespace galley
