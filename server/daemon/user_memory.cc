#include "galley/daemon/user_memory.h"

namespace galley {

UserMemory::Charge& UserMemory::Charge::operator=(Charge&& other) noexcept {
  if (this != &other) {
    Reset();
    ledger_ = other.ledger_;
    uid_ = other.uid_;
    bytes_ = other.bytes_;
    other.ledger_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

Status UserMemory::Charge::Resize(uint64_t bytes, const std::string& what) {
  if (ledger_ == nullptr) return Status::Internal("resizing an empty memory charge");
  if (bytes > bytes_) {
    GALLEY_RETURN_IF_ERROR(ledger_->Add(uid_, bytes - bytes_, what));
  } else {
    ledger_->Remove(uid_, bytes_ - bytes);
  }
  bytes_ = bytes;
  return Status::Ok();
}

void UserMemory::Charge::Reset() {
  if (ledger_ != nullptr && bytes_ > 0) ledger_->Remove(uid_, bytes_);
  ledger_ = nullptr;
  bytes_ = 0;
}

Result<UserMemory::Charge> UserMemory::Take(uid_t uid, uint64_t bytes, const std::string& what) {
  GALLEY_RETURN_IF_ERROR(Add(uid, bytes, what));
  Charge charge;
  charge.ledger_ = this;
  charge.uid_ = uid;
  charge.bytes_ = bytes;
  return charge;
}

Status UserMemory::Add(uid_t uid, uint64_t bytes, const std::string& what) {
  MutexLock lock(&mu_);
  uint64_t& held = held_[uid];
  if (held + bytes > limit_) {
    const uint64_t before = held;
    if (held == 0) held_.erase(uid);
    return Status::ResourceExhausted(
        what + " would take " + std::to_string(bytes) + " bytes of galleyd's memory, and uid " +
        std::to_string(uid) + " holds " + std::to_string(before) +
        " (listings and item lists), over the limit max_memory_per_uid (" + std::to_string(limit_) +
        "); end a job, or ask the node's operator to raise it");
  }
  held += bytes;
  return Status::Ok();
}

void UserMemory::Remove(uid_t uid, uint64_t bytes) {
  MutexLock lock(&mu_);
  auto it = held_.find(uid);
  if (it == held_.end()) return;
  it->second -= std::min(it->second, bytes);
  if (it->second == 0) held_.erase(it);
}

uint64_t UserMemory::held(uid_t uid) const {
  MutexLock lock(&mu_);
  auto it = held_.find(uid);
  return it == held_.end() ? 0 : it->second;
}

uint64_t UserMemory::limit() const {
  MutexLock lock(&mu_);
  return limit_;
}

void UserMemory::SetLimit(uint64_t limit_per_uid) {
  MutexLock lock(&mu_);
  limit_ = limit_per_uid;
}

}  // namespace galley
