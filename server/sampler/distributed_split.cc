#include "galley/sampler/distributed_split.h"

#include <utility>

#include "galley/random.h"
#include "galley/sampler/uniform_random.h"

namespace galley {

DistributedSplit DistributedSplit::Of(const JobSpec& spec) {
  DistributedSplit split;
  split.seed = spec.shard_seed.value_or(spec.seed);
  split.world_size = spec.world_size;
  split.local_world_size = spec.local_world_size;
  split.shuffle = spec.shuffle;
  split.drop_last = spec.shard_drop_last;
  return split;
}

uint32_t DistributedSplit::Nodes() const {
  const uint32_t local = local_world_size;
  if (local == 0 || world_size % local != 0) return 1;
  return world_size / local;
}

uint32_t DistributedSplit::NodeOf(uint32_t rank) const {
  return Nodes() == 1 ? 0 : rank / local_world_size;
}

uint32_t DistributedSplit::Slot(uint32_t rank) const {
  const uint32_t nodes = Nodes();
  // Without shuffling, DistributedSampler's rule exactly: evaluation code
  // reassembles the ranks' outputs by it.
  if (nodes == 1 || !shuffle) return rank;
  return rank / local_world_size + nodes * (rank % local_world_size);
}

uint64_t DistributedSplit::ShardSize(uint64_t n) const {
  const uint64_t w = world_size;
  if (w <= 1) return n;
  return drop_last ? n / w : (n + w - 1) / w;
}

std::vector<ItemId> DistributedSplit::Order(std::span<const ItemId> subset, uint64_t epoch) const {
  std::vector<ItemId> order(subset.begin(), subset.end());
  if (shuffle) {
    // Fisher–Yates from the last position down: position i - 1 takes an item
    // uniform over the first i. The seed formula is part of the split's
    // definition (tests/python/test_ddp_split.py recomputes it): never change it.
    UniformRandom random(SplitMix64(seed ^ SplitMix64(epoch + 0x5eed)));
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[random.Below(i)]);
  }
  return order;
}

std::vector<ItemId> DistributedSplit::Shard(std::span<const ItemId> subset, uint64_t epoch,
                                            uint32_t rank) const {
  if (world_size <= 1) return Order(subset, epoch);
  const std::vector<ItemId> order = Order(subset, epoch);
  std::vector<ItemId> items;
  if (order.empty()) return items;
  const uint64_t total = ShardSize(order.size()) * world_size;
  items.reserve(ShardSize(order.size()));
  for (uint64_t pos = Slot(rank); pos < total; pos += world_size) {
    items.push_back(order[pos % order.size()]);  // positions past n wrap around (padding)
  }
  return items;
}

}  // namespace galley
