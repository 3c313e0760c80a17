#include "galley/cache/augmented_tier.h"

#include <algorithm>
#include <utility>

namespace galley::cache {

AugmentedTier::AugmentedTier(uint64_t budget_bytes, size_t reuse_limit,
                             std::unique_ptr<EvictionPolicy> policy, DemandTracker* demand)
    : reuse_limit_(reuse_limit),
      demand_(demand),
      policy_(std::move(policy)),
      budget_bytes_(budget_bytes) {
  if (demand_ != nullptr) demand_->Subscribe(this);
}

AugmentedTier::~AugmentedTier() {
  if (demand_ != nullptr) demand_->Unsubscribe(this);
}

uint64_t AugmentedTier::ChargeFor(const Blob& blob, std::string_view signature) const {
  return ChargedBytes(blob) + signature.size() + sizeof(JobId) * (reuse_limit_ + 1);
}

BlobPtr AugmentedTier::Get(Key key, std::string_view signature, JobId job, uint64_t epoch) {
  MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    std::vector<Entry>& entries = it->second;
    for (size_t i = 0; i < entries.size(); ++i) {
      Entry& entry = entries[i];
      if (entry.signature != signature) continue;
      if (entry.epoch != epoch ||
          std::find(entry.takers.begin(), entry.takers.end(), job) != entry.takers.end()) {
        break;  // one entry per signature: nothing else can match
      }
      BlobPtr blob = entry.blob;
      entry.takers.push_back(job);
      ++entry.serves;
      ++stats_.tier.hits;
      policy_->Touched(entry.id);
      if (entry.serves >= reuse_limit_) {
        RemoveLocked(key, i);
        ++stats_.retired;
      }
      return blob;
    }
  }
  ++stats_.tier.misses;
  return nullptr;
}

bool AugmentedTier::Put(Key key, std::string_view signature, JobId producer, uint64_t epoch,
                        BlobPtr blob) {
  if (demand_ == nullptr) {
    MutexLock lock(&mu_);
    return PutLocked(key, signature, producer, epoch, std::move(blob), 0);
  }
  // Same reasoning as Tier::Put: no demand change may fall between the read
  // and the insert.
  return demand_->WithDemand(key, [&](uint32_t demand) {
    MutexLock lock(&mu_);
    return PutLocked(key, signature, producer, epoch, std::move(blob), demand);
  });
}

bool AugmentedTier::PutLocked(Key key, std::string_view signature, JobId producer, uint64_t epoch,
                              BlobPtr blob, uint32_t demand) {
  if (blob == nullptr || reuse_limit_ == 0) {
    ++stats_.tier.rejects;
    return false;
  }
  auto existing = entries_.find(key);
  if (existing != entries_.end()) {
    std::vector<Entry>& entries = existing->second;
    for (size_t i = 0; i < entries.size(); ++i) {
      Entry& entry = entries[i];
      if (entry.signature != signature) continue;
      if (entry.epoch == epoch) {
        // Another job already produced this sample; `producer` has its own
        // copy, so it must not be served this one later.
        if (std::find(entry.takers.begin(), entry.takers.end(), producer) == entry.takers.end() &&
            entry.takers.size() < entry.takers.capacity()) {
          entry.takers.push_back(producer);
        }
        return true;
      }
      RemoveLocked(key, i);
      ++stats_.replaced;
      break;
    }
  }
  const uint64_t charge = ChargeFor(*blob, signature);
  if (charge > budget_bytes_ || !MakeRoomLocked(charge, demand)) {
    ++stats_.tier.rejects;
    return false;
  }
  Entry entry{next_id_++, std::string(signature), epoch, {}, 0, std::move(blob), charge};
  entry.takers.reserve(reuse_limit_ + 1);
  entry.takers.push_back(producer);
  policy_->Add(entry.id, charge, demand);
  owner_.emplace(entry.id, key);
  entries_[key].push_back(std::move(entry));
  bytes_ += charge;
  ++entry_count_;
  ++stats_.tier.inserts;
  return true;
}

bool AugmentedTier::MakeRoomLocked(uint64_t bytes_needed, std::optional<uint32_t> newcomer_demand) {
  const uint64_t free_bytes = budget_bytes_ >= bytes_ ? budget_bytes_ - bytes_ : 0;
  if (bytes_needed <= free_bytes) return true;
  victims_.clear();
  if (!policy_->ChooseVictims(bytes_needed - free_bytes, newcomer_demand, &victims_)) return false;
  for (EntryId victim : victims_) {
    const Key key = owner_.at(victim);
    std::vector<Entry>& entries = entries_.at(key);
    auto it = std::find_if(entries.begin(), entries.end(),
                           [victim](const Entry& e) { return e.id == victim; });
    RemoveLocked(key, static_cast<size_t>(it - entries.begin()));
    ++stats_.tier.evictions;
  }
  victims_.clear();
  return true;
}

void AugmentedTier::RemoveLocked(Key key, size_t index) {
  auto it = entries_.find(key);
  std::vector<Entry>& entries = it->second;
  Entry& entry = entries[index];
  bytes_ -= entry.charged_bytes;
  --entry_count_;
  policy_->Remove(entry.id);
  owner_.erase(entry.id);
  if (index + 1 != entries.size()) entries[index] = std::move(entries.back());
  entries.pop_back();
  if (entries.empty()) entries_.erase(it);
}

size_t AugmentedTier::Erase(Key key) {
  MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return 0;
  const size_t count = it->second.size();
  for (size_t i = count; i-- > 0;) RemoveLocked(key, i);
  return count;
}

void AugmentedTier::SetBudget(uint64_t budget_bytes) {
  MutexLock lock(&mu_);
  budget_bytes_ = budget_bytes;
  if (bytes_ <= budget_bytes_) return;
  // Nothing is free, so this frees exactly the excess; forced, every resident
  // is a candidate and it cannot fail.
  MakeRoomLocked(bytes_ - budget_bytes_, std::nullopt);
}

void AugmentedTier::OnDemandChanged(Key key, uint32_t demand) {
  MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  for (const Entry& entry : it->second) policy_->DemandChanged(entry.id, demand);
}

AugmentedTierStats AugmentedTier::Stats() const {
  MutexLock lock(&mu_);
  AugmentedTierStats stats = stats_;
  stats.tier.bytes = bytes_;
  stats.tier.entries = entry_count_;
  stats.tier.budget_bytes = budget_bytes_;
  return stats;
}

uint64_t AugmentedTier::RecomputeChargedBytes() const {
  MutexLock lock(&mu_);
  uint64_t total = 0;
  for (const auto& [key, entries] : entries_) {
    for (const Entry& entry : entries) total += ChargeFor(*entry.blob, entry.signature);
  }
  return total;
}

}  // namespace galley::cache
