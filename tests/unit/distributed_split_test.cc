// DistributedSplit across nodes: the shards of every layout are disjoint and
// complete, a node's items depend on the split's seed, the epoch and the
// number of nodes only (node-affine shards), jobs that share a shard_seed get
// the same shards whatever their own seeds, and each job's partition is
// uniformly random (chi-square over many epochs and seeds). The exact values
// are pinned against an independent implementation in
// tests/python/test_ddp_split.py.
#include "galley/sampler/distributed_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "galley/sampler/uniformity_statistics.h"

namespace galley {
namespace {

std::vector<ItemId> Iota(uint32_t n) {
  std::vector<ItemId> items(n);
  std::iota(items.begin(), items.end(), 0);
  return items;
}

DistributedSplit Split(uint64_t seed, uint32_t world, uint32_t local, bool drop_last = false) {
  DistributedSplit split;
  split.seed = seed;
  split.world_size = world;
  split.local_world_size = local;
  split.drop_last = drop_last;
  return split;
}

std::set<ItemId> NodeItems(const DistributedSplit& split, std::span<const ItemId> subset,
                           uint64_t epoch, uint32_t node) {
  std::set<ItemId> items;
  const uint32_t local = split.local_world_size == 0 ? split.world_size : split.local_world_size;
  for (uint32_t j = 0; j < local; ++j) {
    const uint32_t rank = node * local + j;
    for (ItemId item : split.Shard(subset, epoch, rank)) items.insert(item);
  }
  return items;
}

TEST(DistributedSplitLayoutTest, SlotsAreABijectionAndNodeMajor) {
  for (uint32_t local : {0u, 1u, 2u, 3u, 4u, 12u}) {
    const DistributedSplit split = Split(1, 12, local);
    std::set<uint32_t> slots;
    for (uint32_t rank = 0; rank < 12; ++rank) {
      const uint32_t slot = split.Slot(rank);
      ASSERT_LT(slot, 12u);
      slots.insert(slot);
      // Node g keeps the slots ≡ g (mod N), so the positions ≡ g (mod N).
      EXPECT_EQ(slot % split.Nodes(), split.NodeOf(rank)) << "local " << local << " rank " << rank;
    }
    EXPECT_EQ(slots.size(), 12u) << "local " << local;
  }
  // One node or one rank per node: the slot is the rank (DistributedSampler).
  for (uint32_t rank = 0; rank < 12; ++rank) {
    EXPECT_EQ(Split(1, 12, 0).Slot(rank), rank);
    EXPECT_EQ(Split(1, 12, 1).Slot(rank), rank);
    EXPECT_EQ(Split(1, 12, 12).Slot(rank), rank);
  }
  // Without shuffling, DistributedSampler's rule whatever the layout.
  DistributedSplit in_order = Split(1, 12, 4);
  in_order.shuffle = false;
  for (uint32_t rank = 0; rank < 12; ++rank) EXPECT_EQ(in_order.Slot(rank), rank);
  EXPECT_EQ(Split(1, 12, 4).Nodes(), 3u);
  EXPECT_EQ(Split(1, 12, 4).NodeOf(9), 2u);
  EXPECT_EQ(Split(1, 12, 4).Slot(9), 2u + 3u * 1u);
}

TEST(DistributedSplitLayoutTest, ShardsAreDisjointAndCompleteAcrossNodes) {
  for (uint32_t n : {1u, 7u, 24u, 25u, 61u}) {
    for (auto [world, local] : {std::pair{2u, 1u}, {4u, 2u}, {6u, 3u}, {6u, 2u}, {8u, 4u}}) {
      for (bool drop : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << "n=" << n << " world=" << world << " local=" << local << " drop=" << drop);
        const DistributedSplit split = Split(9, world, local, drop);
        const auto subset = Iota(n);
        for (uint64_t epoch : {0u, 1u, 5u}) {
          const std::vector<ItemId> order = split.Order(subset, epoch);
          const uint64_t shard = split.ShardSize(n);
          std::map<ItemId, int> times;
          for (uint32_t rank = 0; rank < world; ++rank) {
            const auto items = split.Shard(subset, epoch, rank);
            ASSERT_EQ(items.size(), shard);
            std::set<ItemId> distinct(items.begin(), items.end());
            EXPECT_EQ(distinct.size(), items.size()) << "rank " << rank << " repeats an item";
            for (ItemId item : items) times[item]++;
          }
          const uint64_t positions = shard * world;
          // Exactly once per epoch, apart from the padding's repeats of the
          // permutation's first items (or the floor's left-out last ones).
          for (uint64_t pos = 0; pos < n; ++pos) {
            int expected = 0;
            for (uint64_t p = pos; p < positions; p += n) ++expected;
            EXPECT_EQ(times[order[pos]], expected) << "position " << pos;
          }
          // Each node holds the positions ≡ its node rank (mod nodes).
          const uint32_t nodes = split.Nodes();
          for (uint32_t node = 0; node < nodes; ++node) {
            std::set<ItemId> expected;
            for (uint64_t pos = node; pos < positions; pos += nodes)
              expected.insert(order[pos % n]);
            EXPECT_EQ(NodeItems(split, subset, epoch, node), expected) << "node " << node;
          }
        }
      }
    }
  }
}

TEST(DistributedSplitLayoutTest, JobsOnTheSameNodesShareEachNodesItems) {
  // Three jobs on the same two nodes and one seed for the split: 2 x 2,
  // 2 x 4 and 2 x 1 ranks (48 items, no padding). Each node loads the same
  // items for all of them, and the shards of the job with more ranks per
  // node nest in those of the job with fewer, which the node's sampler
  // shares in full (docs/sampling.md §3.2).
  const auto subset = Iota(48);
  const DistributedSplit two = Split(42, 4, 2), four = Split(42, 8, 4), one = Split(42, 2, 1);
  for (uint64_t epoch = 0; epoch < 4; ++epoch) {
    for (uint32_t node = 0; node < 2; ++node) {
      const auto items = NodeItems(two, subset, epoch, node);
      EXPECT_EQ(items.size(), 24u);
      EXPECT_EQ(NodeItems(four, subset, epoch, node), items);
      EXPECT_EQ(NodeItems(one, subset, epoch, node), items);
      for (uint32_t j = 0; j < 4; ++j) {
        const auto fine = four.Shard(subset, epoch, node * 4 + j);
        const auto coarse = two.Shard(subset, epoch, node * 2 + j % 2);
        for (ItemId item : fine) {
          EXPECT_NE(std::find(coarse.begin(), coarse.end(), item), coarse.end());
        }
      }
    }
    // Another epoch, another partition; another seed, another partition.
    EXPECT_NE(NodeItems(two, subset, epoch, 0), NodeItems(two, subset, epoch + 1, 0));
    EXPECT_NE(NodeItems(two, subset, epoch, 0), NodeItems(Split(43, 4, 2), subset, epoch, 0));
  }
}

TEST(DistributedSplitLayoutTest, TheSplitSeedIsTheShardSeedElseTheSeed) {
  JobSpec a, b;
  a.seed = 1;
  b.seed = 2;
  a.world_size = b.world_size = 4;
  a.local_world_size = b.local_world_size = 2;
  EXPECT_EQ(DistributedSplit::Of(a).seed, 1u);
  const auto subset = Iota(40);
  EXPECT_NE(DistributedSplit::Of(a).Shard(subset, 3, 1),
            DistributedSplit::Of(b).Shard(subset, 3, 1));
  a.shard_seed = b.shard_seed = 7;
  for (uint32_t rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(DistributedSplit::Of(a).Shard(subset, 3, rank),
              DistributedSplit::Of(b).Shard(subset, 3, rank));
  }
  // shard_seed = s is the split of seed = s.
  JobSpec c = a;
  c.shard_seed.reset();
  c.seed = 7;
  EXPECT_EQ(DistributedSplit::Of(c).Shard(subset, 3, 2),
            DistributedSplit::Of(a).Shard(subset, 3, 2));
}

// Pearson's statistic of a table of counts against equal expectations.
double Pearson(const std::vector<uint64_t>& counts, double expected) {
  double statistic = 0;
  for (uint64_t c : counts) statistic += (double(c) - expected) * (double(c) - expected) / expected;
  return statistic;
}

struct PartitionPValues {
  double slot = 0, node = 0, mates = 0;
};

// The uniformity tests of a partition of n = 24 items over 2 nodes x 2 ranks,
// 4,000 epochs: shard(epoch, rank) gives the rank's items. For a uniformly
// random balanced partition one epoch's item x slot indicator table has
// covariance (1/W)·n/(n-1)·(Π_n ⊗ Π_W), so Pearson's statistic over
// E epochs against E/W per cell is n/(n-1)·χ²((n-1)(W-1)) (the same for the
// item x node table with 2 columns). The pair test asks whether item 0's
// shard-mates are uniform over the other n - 1 items: each epoch draws m - 1
// of them without replacement, so the statistic is (1 - q)(n-1)/(n-2)·χ²(n-2)
// with q = (m-1)/(n-1).
template <typename ShardFn>
PartitionPValues PartitionTests(ShardFn&& shard) {
  constexpr uint32_t n = 24, world = 4, local = 2, m = n / world, epochs = 4000;
  std::vector<uint64_t> by_slot(n * world, 0), by_node(n * 2, 0), mates(n - 1, 0);
  for (uint64_t epoch = 0; epoch < epochs; ++epoch) {
    for (uint32_t rank = 0; rank < world; ++rank) {
      const std::vector<ItemId> items = shard(epoch, rank);
      EXPECT_EQ(items.size(), m);
      for (ItemId item : items) {
        by_slot[item * world + rank]++;
        by_node[item * 2 + rank / local]++;
      }
      if (std::find(items.begin(), items.end(), 0u) != items.end()) {
        for (ItemId item : items) {
          if (item != 0) mates[item - 1]++;
        }
      }
    }
  }
  const double scale = double(n - 1) / n;
  const double q = double(m - 1) / (n - 1);
  PartitionPValues p;
  p.slot = ChiSquareUpperTail(scale * Pearson(by_slot, double(epochs) / world),
                              double(n - 1) * (world - 1));
  p.node = ChiSquareUpperTail(scale * Pearson(by_node, double(epochs) / 2), double(n - 1));
  p.mates = ChiSquareUpperTail(
      double(n - 2) / ((n - 1) * (1 - q)) * Pearson(mates, double(epochs) * q), n - 2);
  return p;
}

TEST(DistributedSplitLayoutTest, EachRanksShardIsAUniformlyRandomSubset) {
  // 40 seeds x 100 epochs: every rank's shard, and every node's items, are
  // uniformly random subsets, and together a uniformly random partition.
  const auto subset = Iota(24);
  const PartitionPValues p = PartitionTests([&](uint64_t epoch, uint32_t rank) {
    return Split((epoch / 100) * 0x9e37 + 11, 4, 2).Shard(subset, epoch % 100, rank);
  });
  // Three tests at 1e-4 each: a false alarm once in 3,000 runs.
  EXPECT_GT(p.slot, 1e-4);
  EXPECT_GT(p.node, 1e-4);
  EXPECT_GT(p.mates, 1e-4);
  RecordProperty("p_slot", std::to_string(p.slot));
  RecordProperty("p_node", std::to_string(p.node));
  RecordProperty("p_mates", std::to_string(p.mates));
}

TEST(DistributedSplitLayoutTest, TheStatisticsSeeASplitThatIsNotUniform) {
  // The same tests reject a split that is only almost uniform: the identity
  // order rotated by a random offset puts every item in every slot and on
  // every node equally often, but keeps items ≡ (mod 4) together.
  const auto subset = Iota(24);
  const PartitionPValues p = PartitionTests([&](uint64_t epoch, uint32_t rank) {
    const auto order = Split(epoch, 1, 0).Order(subset, 0);  // a random offset: order[0]
    std::vector<ItemId> items;
    for (uint32_t pos = rank; pos < 24; pos += 4) items.push_back((pos + order[0]) % 24);
    return items;
  });
  EXPECT_GT(p.slot, 1e-4);
  EXPECT_LT(p.mates, 1e-10);
}

}  // namespace
}  // namespace galley
