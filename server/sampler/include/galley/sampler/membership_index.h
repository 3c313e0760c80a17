// MembershipIndex: the items a dataset's jobs still need this epoch, grouped
// by which jobs need them.
//
// Every job gets a slot (0..63) and every item a membership mask: the slots
// whose remaining set still holds it. Items with equal masks form an *atom*
// (a dense array plus each item's position in it), so a job's remaining set
// is the union of the atoms whose mask has its bit, a uniform pick over any
// union of atoms is exact in O(atoms), and removing an item from some jobs'
// sets moves it, in O(1), to the atom of the jobs that still need it — which
// is all "compensation" for a masked job amounts to. The index also keeps the
// pairwise overlaps |S_a ∩ S_b| current, so the coupling can pick partners
// without scanning items.
//
// Costs: AddJob O(items + atoms·slots), RemoveJob O(items of the smaller
// side of each merge + atoms), Take O(|members|·|receivers|). Memory: 8 bytes
// per item id up to the largest id seen, plus 4 bytes per (item, atom) entry.
//
// Not thread-safe; owned by one SamplingPolicy.
#ifndef GALLEY_SERVER_SAMPLER_MEMBERSHIP_INDEX_H_
#define GALLEY_SERVER_SAMPLER_MEMBERSHIP_INDEX_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "galley/sampler/sampling_policy.h"
#include "galley/sampler/uniform_random.h"
#include "galley/status.h"

namespace galley {

using SlotMask = uint64_t;

inline SlotMask SlotBit(int slot) { return SlotMask{1} << slot; }

class MembershipIndex {
 public:
  static constexpr uint32_t kNoAtom = UINT32_MAX;

  MembershipIndex();
  MembershipIndex(const MembershipIndex&) = delete;
  MembershipIndex& operator=(const MembershipIndex&) = delete;

  // Gives `job` a slot holding `items`. Fails without side effects on a
  // duplicate id, a known job, or when all slots are taken.
  Result<int> AddJob(JobId job, std::span<const ItemId> items);
  // Drops the job's slot and its remaining set; false if unknown.
  bool RemoveJob(JobId job);

  // -1 when `job` has no slot.
  int SlotOf(JobId job) const;
  JobId JobAt(int slot) const { return slot_job_[slot]; }
  SlotMask occupied() const { return occupied_; }

  size_t Remaining(int slot) const { return overlap_[slot][slot]; }
  // |S_a ∩ S_b| over the remaining sets.
  size_t Overlap(int a, int b) const { return overlap_[a][b]; }

  // Non-empty atoms, in no particular order; indices are valid until the next
  // mutation.
  size_t atom_count() const { return live_.size(); }
  SlotMask atom_members(size_t i) const { return atoms_[live_[i]].members; }
  size_t atom_size(size_t i) const { return atoms_[live_[i]].items.size(); }
  ItemId atom_item(size_t i, size_t k) const { return atoms_[live_[i]].items[k]; }

  // The slots that still need `item` (0 if none).
  SlotMask MembersOf(ItemId item) const;

  // Exactly uniform over the items needed by `slot` and by none of `exclude`
  // (whose count the caller knows: `count`, which must be positive).
  ItemId UniformPick(int slot, SlotMask exclude, size_t count, UniformRandom& random) const;

  // Removes `item` from the remaining sets of `slots`, all of which must still
  // need it.
  void Take(ItemId item, SlotMask slots);

 private:
  struct Atom {
    SlotMask members = 0;
    std::vector<ItemId> items;
  };

  uint32_t AtomFor(SlotMask members);  // finds or creates
  void ReleaseIfEmpty(uint32_t atom);
  void Retire(uint32_t atom);  // off the live list, index reusable; map untouched
  void Detach(ItemId item);    // removes from its atom, keeps atom_of_ stale
  void Attach(ItemId item, uint32_t atom);
  void ClearSlot(int slot);  // moves every item off `slot`
  void RecountOverlaps(int slot);

  std::vector<Atom> atoms_;
  std::vector<uint32_t> free_atoms_;
  std::vector<uint32_t> live_;           // non-empty atoms
  std::vector<uint32_t> live_position_;  // atom -> index in live_
  std::unordered_map<SlotMask, uint32_t> atom_by_members_;
  std::vector<uint32_t> atom_of_;   // item -> atom, kNoAtom if no job needs it
  std::vector<uint32_t> position_;  // item -> index in its atom
  std::array<JobId, kMaxJobsPerDataset> slot_job_{};
  SlotMask occupied_ = 0;
  std::array<std::array<size_t, kMaxJobsPerDataset>, kMaxJobsPerDataset> overlap_{};
};

}  // namespace galley

#endif  // GALLEY_SERVER_SAMPLER_MEMBERSHIP_INDEX_H_
