#include "galley/daemon/served_job.h"

#include "galley/random.h"
#include "galley/sampler/distributed_split.h"
#include "galley/sampler/uniform_random.h"

namespace galley {

ServedJob::ServedJob(std::shared_ptr<const JobPlan> plan, std::vector<ItemId> start_list)
    : plan(std::move(plan)) {
  if (this->plan->listed() && !start_list.empty()) {
    listed_epoch_ = this->plan->spec.start_epoch;
    listed_items_ = std::make_shared<const std::vector<ItemId>>(std::move(start_list));
  }
}

Status ServedJob::ListEpoch(uint64_t epoch, std::span<const uint64_t> items, uint64_t from) {
  GALLEY_ASSIGN_OR_RETURN(std::vector<ItemId> list, plan->CheckEpochList(epoch, items, from));
  auto shared = std::make_shared<const std::vector<ItemId>>(std::move(list));
  MutexLock lock(&listed_mu_);
  listed_epoch_ = epoch;
  listed_items_ = std::move(shared);
  return Status::Ok();
}

bool ServedJob::HasEpochItems(uint64_t epoch) const {
  if (!plan->listed()) return true;
  MutexLock lock(&listed_mu_);
  return listed_items_ != nullptr && listed_epoch_ == epoch;
}

std::vector<ItemId> ServedJob::EpochItems(uint64_t epoch, bool resuming) const {
  if (!plan->listed()) return plan->SplitItems(epoch, resuming);
  std::vector<ItemId> items;
  MutexLock lock(&listed_mu_);
  if (listed_items_ != nullptr && listed_epoch_ == epoch) items = *listed_items_;
  return items;
}

ItemId ServedJob::Substitute(uint64_t epoch, ItemId failed, uint32_t attempt,
                             const std::function<bool(ItemId)>& known_to_fail) const {
  // A DDP shard costs a permutation of the subset to compute: keep the last
  // one, as failures come in runs within an epoch.
  // A listed job's substitutes come from its list of the epoch (the
  // subset, when that epoch's list has already been replaced).
  const JobSpec& spec = plan->spec;
  MutexLock lock(&substitute_mu_);
  const bool per_epoch = spec.world_size > 1 || plan->listed();
  if (per_epoch && (substitute_epoch_ != epoch || substitute_shard_.empty())) {
    substitute_shard_ = EpochItems(epoch);
    substitute_epoch_ = epoch;
  }
  const std::vector<ItemId>& shard =
      per_epoch && !substitute_shard_.empty() ? substitute_shard_ : plan->subset;
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
  const JobSpec& spec = plan->spec;
  JobSnapshot s;
  s.job_id = id;
  s.name = spec.name;
  s.dataset = plan->dataset->root().string();
  s.owner_uid = plan->owner_uid;
  s.owner_pid = plan->owner_pid;
  s.policy = plan->policy;
  s.batch_size = spec.batch_size;
  s.epoch_size = plan->epoch_size;
  s.batches_per_epoch = plan->BatchesPerEpoch();
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
  s.drawn_ahead = counters.drawn_ahead.load();
  s.drawn_ahead_peak = counters.drawn_ahead_peak.load();
  s.lag = counters.lag.load();
  s.lag_peak = counters.lag_peak.load();
  s.consumer_wait_seconds = std::chrono::duration<double>(ring->ConsumerWait()).count();
  s.consumer_waits = ring->ConsumerWaits();
  s.uptime_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - plan->opened_at).count();
  s.samples_per_second = s.uptime_seconds > 0 ? s.samples / s.uptime_seconds : 0.0;
  const DistributedSplit split = DistributedSplit::Of(spec);
  s.rank = spec.rank;
  s.world_size = spec.world_size;
  s.nodes = split.Nodes();
  s.node_rank = split.NodeOf(spec.rank);
  s.shard_seed = split.seed;
  s.credential_refreshes = counters.credential_refreshes.load();
  s.credential_refreshes_refused = counters.credential_refreshes_refused.load();
  return s;
}

}  // namespace galley
