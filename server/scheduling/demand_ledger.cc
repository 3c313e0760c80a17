#include "galley/scheduling/demand_ledger.h"

#include "galley/cache/blob.h"

namespace galley {

void DemandLedger::Enter(JobId job, uint32_t dataset_index, size_t dataset_size,
                         std::span<const ItemId> items, std::span<const ItemId> repeats) {
  if (tracker_ == nullptr) return;
  if (deferring_) {
    deferred_.push_back(Change{.kind = Change::Kind::kEnter,
                               .job = job,
                               .dataset_index = dataset_index,
                               .dataset_size = dataset_size,
                               .items = {items.begin(), items.end()},
                               .repeats = {repeats.begin(), repeats.end()}});
    return;
  }
  EnterNow(job, dataset_index, dataset_size, items, repeats);
}

void DemandLedger::Consume(JobId job, ItemId item) {
  if (tracker_ == nullptr) return;
  if (deferring_) {
    deferred_.push_back(Change{.kind = Change::Kind::kConsume, .job = job, .item = item});
    return;
  }
  ConsumeNow(job, item);
}

void DemandLedger::Leave(JobId job) {
  if (tracker_ == nullptr) return;
  if (deferring_) {
    deferred_.push_back(Change{.kind = Change::Kind::kLeave, .job = job});
    return;
  }
  LeaveNow(job);
}

void DemandLedger::ApplyDeferred() {
  deferring_ = false;
  for (const Change& change : deferred_) {
    switch (change.kind) {
      case Change::Kind::kEnter:
        EnterNow(change.job, change.dataset_index, change.dataset_size, change.items,
                 change.repeats);
        break;
      case Change::Kind::kConsume:
        ConsumeNow(change.job, change.item);
        break;
      case Change::Kind::kLeave:
        LeaveNow(change.job);
        break;
    }
  }
  deferred_.clear();
}

void DemandLedger::EnterNow(JobId job, uint32_t dataset_index, size_t dataset_size,
                            std::span<const ItemId> items, std::span<const ItemId> repeats) {
  LeaveNow(job);
  if (items.empty()) return;
  JobDemand& demand = jobs_[job];
  demand.dataset_index = dataset_index;
  demand.undelivered.assign(dataset_size, false);
  std::vector<cache::Key> keys;
  keys.reserve(items.size() + repeats.size());
  for (std::span<const ItemId> part : {items, repeats}) {
    for (ItemId item : part) {
      keys.push_back(cache::MakeKey(dataset_index, item));
      if (demand.undelivered[item]) {
        demand.undelivered_again[item]++;
      } else {
        demand.undelivered[item] = true;
      }
    }
  }
  demand.outstanding = keys.size();
  tracker_->AddDemand(keys);
}

void DemandLedger::ConsumeNow(JobId job, ItemId item) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  JobDemand& demand = it->second;
  if (item >= demand.undelivered.size() || !demand.undelivered[item]) return;
  if (auto again = demand.undelivered_again.find(item); again != demand.undelivered_again.end()) {
    if (--again->second == 0) demand.undelivered_again.erase(again);
  } else {
    demand.undelivered[item] = false;
  }
  demand.outstanding--;
  tracker_->ConsumeDemand(cache::MakeKey(demand.dataset_index, item));
}

void DemandLedger::LeaveNow(JobId job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  const JobDemand& demand = it->second;
  if (demand.outstanding > 0) {
    std::vector<cache::Key> keys;
    keys.reserve(demand.outstanding);
    for (ItemId item = 0; item < demand.undelivered.size(); ++item) {
      if (demand.undelivered[item]) keys.push_back(cache::MakeKey(demand.dataset_index, item));
    }
    for (const auto& [item, copies] : demand.undelivered_again) {
      keys.insert(keys.end(), copies, cache::MakeKey(demand.dataset_index, item));
    }
    tracker_->DropDemand(keys);
  }
  jobs_.erase(it);
}

uint64_t DemandLedger::Outstanding(JobId job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : it->second.outstanding;
}

}  // namespace galley
