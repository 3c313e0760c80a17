// Job subsets that the sampler tests and the policy simulator
// (bench/sampler_sim.cc) both replay: id ranges, random subsets of a universe,
// and three subsets whose pairwise overlaps all differ.
//
// Every function is pure apart from the random stream it is handed, which it
// advances deterministically, so equal seeds give equal subsets.
#ifndef GALLEY_TESTS_UNIT_SAMPLER_WORKLOADS_H_
#define GALLEY_TESTS_UNIT_SAMPLER_WORKLOADS_H_

#include <algorithm>
#include <initializer_list>
#include <numeric>
#include <random>
#include <vector>

#include "galley/sampler/sampling_policy.h"

namespace galley {

// The ids begin, begin + 1, ..., end - 1.
inline std::vector<ItemId> ItemRange(ItemId begin, ItemId end) {
  std::vector<ItemId> items(end - begin);
  std::iota(items.begin(), items.end(), begin);
  return items;
}

// `size` distinct ids drawn uniformly from [0, universe), in random order.
inline std::vector<ItemId> RandomSubset(std::mt19937_64& random, ItemId universe, ItemId size) {
  std::vector<ItemId> items = ItemRange(0, universe);
  std::shuffle(items.begin(), items.end(), random);
  items.resize(size);
  return items;
}

// `jobs` subsets drawn one after another as RandomSubset does.
inline std::vector<std::vector<ItemId>> RandomSubsets(std::mt19937_64& random, int jobs,
                                                      ItemId universe, ItemId size) {
  std::vector<std::vector<ItemId>> subsets;
  for (int j = 0; j < jobs; ++j) subsets.push_back(RandomSubset(random, universe, size));
  return subsets;
}

// Three subsets A, B, C with A ∩ B, A ∩ C and B ∩ C all different and none
// nested, the shape on which the coupling tree ("dsa") shares more than
// Joader's chain: atoms AB 3000, AC 2000, BC 1000, ABC 500, and 1000 private
// ids each, numbered consecutively in that order (9500 ids).
inline std::vector<std::vector<ItemId>> PairwiseOverlapSubsets() {
  std::vector<std::vector<ItemId>> subsets(3);
  ItemId next = 0;
  auto atom = [&](ItemId size, std::initializer_list<int> members) {
    for (ItemId i = 0; i < size; ++i, ++next) {
      for (int job : members) subsets[job].push_back(next);
    }
  };
  atom(3000, {0, 1});
  atom(2000, {0, 2});
  atom(1000, {1, 2});
  atom(500, {0, 1, 2});
  atom(1000, {0});
  atom(1000, {1});
  atom(1000, {2});
  return subsets;
}

}  // namespace galley

#endif  // GALLEY_TESTS_UNIT_SAMPLER_WORKLOADS_H_
