// DistributedSplit: which items each rank of a DDP job receives in an epoch.
//
// torch's DistributedSampler, computed with galley's own portable generator
// (xoshiro256** seeded through SplitMix64, Fisher–Yates with Lemire's exact
// bounded integers; galley/random.h), so every rank on every node, under any
// daemon, standard library or compiler, computes the same shards from
// (subset, seed, epoch, world size). Every epoch the subset is permuted,
// padded by wrapping around to ceil(n / world_size) · world_size positions
// (or cut to floor(n / world_size) · world_size), and the rank in slot q
// keeps positions q, q + world_size, ...
//
// Slots are node-major when the job's node layout is known (ranks numbered
// node by node, local_world_size ranks per node, as torchrun numbers them):
// rank r on node g = r / L with local rank j = r % L takes slot g + N·j, with
// N = world_size / L nodes. Node g then keeps exactly the positions ≡ g
// (mod N): a set that depends on the seed, the epoch and N only, so DDP jobs
// that share the split's seed and run on the same nodes (the same node rank
// on each host) load the same items on each node, whatever their number of
// ranks per node (docs/sampling.md §9). With one node, one rank per node or
// shuffle off, the slot is the rank, as in DistributedSampler (evaluation
// code that reassembles the ranks' outputs relies on its rule).
//
// A plain value; its functions are pure and safe from any thread.
#ifndef GALLEY_SERVER_SAMPLER_DISTRIBUTED_SPLIT_H_
#define GALLEY_SERVER_SAMPLER_DISTRIBUTED_SPLIT_H_

#include <cstdint>
#include <span>
#include <vector>

#include "galley/ids.h"
#include "galley/job_spec.h"

namespace galley {

struct DistributedSplit {
  uint64_t seed = 0;  // JobSpec::shard_seed, or JobSpec::seed when that is unset
  uint32_t world_size = 1;
  uint32_t local_world_size = 0;  // ranks per node; 0 = not known (slot = rank)
  bool shuffle = true;            // false: the identity permutation
  bool drop_last = false;         // cut to the floor instead of padding

  // The split a job's spec asks for.
  static DistributedSplit Of(const JobSpec& spec);

  // Nodes of the layout: world_size / local_world_size (1 when unknown).
  uint32_t Nodes() const;
  // The node rank of `rank` (0 when the layout is unknown).
  uint32_t NodeOf(uint32_t rank) const;
  // The position class `rank` keeps: g + N·j on a known layout when
  // shuffling, else rank.
  uint32_t Slot(uint32_t rank) const;
  // Items per rank for a subset of n: n, or ceil / floor(n / world_size).
  uint64_t ShardSize(uint64_t n) const;
  // The epoch's permutation of `subset` (identity when !shuffle).
  std::vector<ItemId> Order(std::span<const ItemId> subset, uint64_t epoch) const;
  // `rank`'s items of `epoch`, in split order (positions past n wrap around:
  // the padding repeats the permutation's first items).
  std::vector<ItemId> Shard(std::span<const ItemId> subset, uint64_t epoch, uint32_t rank) const;
};

}  // namespace galley

#endif  // GALLEY_SERVER_SAMPLER_DISTRIBUTED_SPLIT_H_
