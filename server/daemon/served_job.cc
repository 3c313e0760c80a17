#include "galley/daemon/served_job.h"

#include <algorithm>

#include "galley/random.h"
#include "galley/sampler/distributed_split.h"
#include "galley/sampler/uniform_random.h"

namespace galley {

Status ServedJob::ListEpoch(uint64_t epoch, std::span<const uint64_t> items, uint64_t from) {
  const uint64_t expected = ShardSize() - std::min(ShardSize(), from);
  if (items.size() != expected) {
    return Status::InvalidArgument(
        "epoch " + std::to_string(epoch) + " lists " + std::to_string(items.size()) +
        " items where the job expects " + std::to_string(expected) +
        " (every epoch of a job has as many items as the first it listed; open a new job for "
        "another length)");
  }
  auto list = std::make_shared<std::vector<ItemId>>();
  list->reserve(items.size());
  for (uint64_t id : items) {
    if (id >= dataset->size()) {
      return Status::InvalidArgument("epoch " + std::to_string(epoch) + " lists item " +
                                     std::to_string(id) + " but the dataset has " +
                                     std::to_string(dataset->size()) + " items");
    }
    list->push_back(static_cast<ItemId>(id));
  }
  MutexLock lock(&listed_mu_);
  listed_epoch_ = epoch;
  listed_items_ = std::move(list);
  return Status::Ok();
}

bool ServedJob::HasEpochItems(uint64_t epoch) const {
  if (!listed()) return true;
  MutexLock lock(&listed_mu_);
  return listed_items_ != nullptr && listed_epoch_ == epoch;
}

std::vector<ItemId> ServedJob::EpochItems(uint64_t epoch, bool resuming) const {
  std::vector<ItemId> items;
  if (listed()) {
    MutexLock lock(&listed_mu_);
    if (listed_items_ != nullptr && listed_epoch_ == epoch) items = *listed_items_;
    return items;
  }
  if (spec.world_size <= 1) {
    items = subset;
  } else {
    items = DistributedSplit::Of(spec).Shard(subset, epoch, spec.rank);
    if (spec.shuffle) std::sort(items.begin(), items.end());  // the policy decides the order
  }
  if (resuming && epoch == spec.start_epoch && !spec.resume_consumed.empty()) {
    std::vector<uint64_t> consumed = spec.resume_consumed;
    std::sort(consumed.begin(), consumed.end());
    std::erase_if(items, [&](ItemId item) {
      return std::binary_search(consumed.begin(), consumed.end(), uint64_t{item});
    });
  }
  return items;
}

uint64_t ServedJob::ShardSize() const {
  if (listed()) return spec.start_batch * spec.batch_size + spec.epoch_items->size();
  return DistributedSplit::Of(spec).ShardSize(subset.size());
}

uint64_t ServedJob::BatchesPerEpoch() const {
  const uint64_t b = spec.batch_size;
  const uint64_t size = ShardSize();
  return spec.drop_last ? size / b : (size + b - 1) / b;
}

uint64_t ServedJob::BatchTarget(uint64_t batch_index) const {
  const uint64_t b = spec.batch_size;
  const uint64_t batches = BatchesPerEpoch();
  if (batch_index >= batches) return 0;
  if (batch_index + 1 < batches || spec.drop_last) return b;
  return ShardSize() - (batches - 1) * b;
}

ItemId ServedJob::Substitute(uint64_t epoch, ItemId failed, uint32_t attempt,
                             const std::function<bool(ItemId)>& known_to_fail) const {
  // A DDP shard costs a permutation of the subset to compute: keep the last
  // one, as failures come in runs within an epoch.
  // A listed job's substitutes come from its list of the epoch (the
  // subset, when that epoch's list has already been replaced).
  MutexLock lock(&substitute_mu_);
  const bool per_epoch = spec.world_size > 1 || listed();
  if (per_epoch && (substitute_epoch_ != epoch || substitute_shard_.empty())) {
    substitute_shard_ = EpochItems(epoch);
    substitute_epoch_ = epoch;
  }
  const std::vector<ItemId>& shard =
      per_epoch && !substitute_shard_.empty() ? substitute_shard_ : subset;
  if (shard.empty()) return failed;
  UniformRandom random(
      SplitMix64(spec.seed ^ SplitMix64(epoch ^ SplitMix64((uint64_t{failed} << 8) ^ attempt))));
  auto usable = [&](ItemId item) { return item != failed && !known_to_fail(item); };
  // Uniform over the usable items: rejection while they are plentiful (the
  // usual case: a few broken files), an exact scan otherwise.
  for (int tries = 0; tries < 64; ++tries) {
    const ItemId pick = shard[random.Below(shard.size())];
    if (usable(pick)) return pick;
  }
  std::vector<ItemId> candidates;
  for (ItemId item : shard) {
    if (usable(item)) candidates.push_back(item);
  }
  return candidates.empty() ? failed : candidates[random.Below(candidates.size())];
}

JobSnapshot ServedJob::Snapshot() const {
  JobSnapshot s;
  s.job_id = id;
  s.name = spec.name;
  s.dataset = dataset->root().string();
  s.owner_uid = owner_uid;
  s.owner_pid = owner_pid;
  s.policy = policy;
  s.batch_size = spec.batch_size;
  s.epoch_size = epoch_size;
  s.batches_per_epoch = BatchesPerEpoch();
  s.prefetch = spec.prefetch;
  s.segment_bytes = ring->geometry().segment_bytes;
  s.batches = counters.batches.load();
  s.batches_unread = counters.unread.load();
  s.samples = counters.samples.load();
  s.skipped = counters.skipped.load();
  s.epochs_completed = counters.epochs_completed.load();
  s.produce_seconds = counters.produce_ns.load() / 1e9;
  s.ring_full_seconds = counters.blocked_ns.load() / 1e9;
  s.peer_hold_seconds = counters.held_ns.load() / 1e9;
  s.peer_holds = counters.holds.load();
  s.consumer_wait_seconds = std::chrono::duration<double>(ring->ConsumerWait()).count();
  s.consumer_waits = ring->ConsumerWaits();
  s.uptime_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - opened_at).count();
  s.samples_per_second = s.uptime_seconds > 0 ? s.samples / s.uptime_seconds : 0.0;
  const DistributedSplit split = DistributedSplit::Of(spec);
  s.rank = spec.rank;
  s.world_size = spec.world_size;
  s.nodes = split.Nodes();
  s.node_rank = split.NodeOf(spec.rank);
  s.shard_seed = split.seed;
  return s;
}

}  // namespace galley
