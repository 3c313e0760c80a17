// Grouping of one round's choices into deliveries, for the policies that build
// a Round themselves: the jobs that receive the same item share one Delivery,
// so the item is loaded once for all of them.
//
// A round is rebuilt in place: its first `count` deliveries are this round's,
// the ones after them are buffers left by an earlier round and are reused, so
// a steady round allocates nothing. The caller resizes the round to `count`
// when it has added every receiver.
//
// Not thread-safe; works on the caller's Round only.
#ifndef GALLEY_SERVER_SAMPLER_DELIVERY_GROUPING_H_
#define GALLEY_SERVER_SAMPLER_DELIVERY_GROUPING_H_

#include <cstddef>

#include "galley/sampler/sampling_policy.h"

namespace galley {

// Adds `job` to the receivers of `item` among the first `*count` deliveries of
// `*round`, opening delivery `*count` for the item (and counting it) when none
// has it yet. Returns the index of that delivery. A round has at most
// kMaxJobsPerDataset receivers, so a scan beats a map.
inline size_t AddReceiver(Round* round, size_t* count, ItemId item, JobId job) {
  size_t d = 0;
  while (d < *count && round->deliveries[d].item != item) ++d;
  if (d == *count) {
    if (*count == round->deliveries.size()) round->deliveries.emplace_back();
    round->deliveries[d].item = item;
    round->deliveries[d].receivers.clear();
    ++*count;
  }
  round->deliveries[d].receivers.push_back(job);
  return d;
}

}  // namespace galley

#endif  // GALLEY_SERVER_SAMPLER_DELIVERY_GROUPING_H_
