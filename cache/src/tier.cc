#include "galley/cache/tier.h"

#include <utility>

namespace galley::cache {

Tier::Tier(std::string name, uint64_t budget_bytes, std::unique_ptr<EvictionPolicy> policy,
           DemandTracker* demand)
    : name_(std::move(name)),
      demand_(demand),
      policy_(std::move(policy)),
      budget_bytes_(budget_bytes) {
  if (demand_ != nullptr) demand_->Subscribe(this);
}

Tier::~Tier() {
  if (demand_ != nullptr) demand_->Unsubscribe(this);
}

BlobPtr Tier::Get(Key key) {
  MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  policy_->Touched(key);
  return it->second.blob;
}

bool Tier::Contains(Key key) const {
  MutexLock lock(&mu_);
  return entries_.contains(key);
}

bool Tier::Put(Key key, BlobPtr blob) {
  if (demand_ == nullptr) return Put(key, std::move(blob), 0);
  // The shard lock is held across the insert so that a demand change for
  // `key` either lands before (and is read here) or after (and re-ranks the
  // resident entry); it is never lost in between.
  return demand_->WithDemand(key, [&](uint32_t demand) {
    MutexLock lock(&mu_);
    return PutLocked(key, std::move(blob), demand);
  });
}

bool Tier::Put(Key key, BlobPtr blob, uint32_t demand) {
  MutexLock lock(&mu_);
  return PutLocked(key, std::move(blob), demand);
}

bool Tier::PutLocked(Key key, BlobPtr blob, uint32_t demand) {
  if (blob == nullptr) {
    ++stats_.rejects;
    return false;
  }
  if (entries_.contains(key)) return true;
  const uint64_t charge = ChargedBytes(*blob);
  if (charge > budget_bytes_ || !MakeRoomLocked(charge, demand)) {
    ++stats_.rejects;
    return false;
  }
  entries_.emplace(key, Entry{std::move(blob), charge});
  policy_->Add(key, charge, demand);
  bytes_ += charge;
  ++stats_.inserts;
  return true;
}

bool Tier::WouldAdmit(Key key, uint64_t charged_bytes) const {
  auto decide = [&](uint32_t demand) {
    MutexLock lock(&mu_);
    if (entries_.contains(key) || charged_bytes > budget_bytes_) return false;
    const uint64_t free_bytes = budget_bytes_ >= bytes_ ? budget_bytes_ - bytes_ : 0;
    if (charged_bytes <= free_bytes) return true;
    std::vector<Key> victims;
    return policy_->ChooseVictims(charged_bytes - free_bytes, demand, &victims);
  };
  // Under the key's demand lock, as Put reads it.
  return demand_ != nullptr ? demand_->WithDemand(key, decide) : decide(0);
}

bool Tier::MakeRoomLocked(uint64_t bytes_needed, std::optional<uint32_t> newcomer_demand) {
  const uint64_t free_bytes = budget_bytes_ >= bytes_ ? budget_bytes_ - bytes_ : 0;
  if (bytes_needed <= free_bytes) return true;
  victims_.clear();
  if (!policy_->ChooseVictims(bytes_needed - free_bytes, newcomer_demand, &victims_)) return false;
  EvictVictimsLocked();
  return true;
}

void Tier::EvictVictimsLocked() {
  for (Key victim : victims_) {
    auto it = entries_.find(victim);
    bytes_ -= it->second.charged_bytes;
    entries_.erase(it);
    policy_->Remove(victim);
    ++stats_.evictions;
  }
  victims_.clear();
}

bool Tier::Erase(Key key) {
  MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  bytes_ -= it->second.charged_bytes;
  entries_.erase(it);
  policy_->Remove(key);
  return true;
}

void Tier::SetDemand(Key key, uint32_t demand) {
  MutexLock lock(&mu_);
  policy_->DemandChanged(key, demand);
}

std::string_view Tier::policy_name() const {
  MutexLock lock(&mu_);
  return policy_->name();
}

void Tier::OnDemandChanged(Key key, uint32_t demand) { SetDemand(key, demand); }

void Tier::SetBudget(uint64_t budget_bytes) {
  MutexLock lock(&mu_);
  budget_bytes_ = budget_bytes;
  if (bytes_ <= budget_bytes_) return;
  // Forced: every resident is a candidate, so the excess can always be freed.
  victims_.clear();
  policy_->ChooseVictims(bytes_ - budget_bytes_, std::nullopt, &victims_);
  EvictVictimsLocked();
}

TierStats Tier::Stats() const {
  MutexLock lock(&mu_);
  TierStats stats = stats_;
  stats.bytes = bytes_;
  stats.entries = entries_.size();
  stats.budget_bytes = budget_bytes_;
  return stats;
}

uint64_t Tier::RecomputeChargedBytes() const {
  MutexLock lock(&mu_);
  uint64_t total = 0;
  for (const auto& [key, entry] : entries_) total += ChargedBytes(*entry.blob);
  return total;
}

}  // namespace galley::cache
