// UserMemory: the bytes of galleyd's own memory that each user's requests
// make it hold, against each user's share (max_memory_per_uid): the
// listings a user asked for (a listing shared by several users' jobs is
// charged to the user whose job first asked for it) and the item lists of
// their jobs (each job's subset and the epochs a listed job's client sends).
// Rings are shared memory and have their own share (max_shm_per_uid).
//
// A charge is a UserMemory::Charge: it holds its bytes against its user
// until it is destroyed, so whatever owns the memory owns the charge and
// gives it back with the memory.
//
// Thread-safety: every method may be called from any thread (one internal
// mutex, a leaf: nothing is called under it). A Charge is used by one
// thread at a time; it must not outlive its UserMemory.
#ifndef GALLEY_SERVER_DAEMON_USER_MEMORY_H_
#define GALLEY_SERVER_DAEMON_USER_MEMORY_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "galley/mutex.h"
#include "galley/status.h"

namespace galley {

class UserMemory {
 public:
  // Bytes held for one user's requests; movable, gives them back when
  // destroyed.
  class Charge {
   public:
    Charge() = default;
    Charge(Charge&& other) noexcept { *this = std::move(other); }
    Charge& operator=(Charge&& other) noexcept;
    ~Charge() { Reset(); }
    Charge(const Charge&) = delete;
    Charge& operator=(const Charge&) = delete;

    uint64_t bytes() const { return bytes_; }
    // Holds `bytes` instead: more is charged as UserMemory::Take does
    // (ResourceExhausted, nothing changed, when over the share), less is
    // given back.
    Status Resize(uint64_t bytes, const std::string& what);
    // Gives the bytes back now.
    void Reset();

   private:
    friend class UserMemory;
    UserMemory* ledger_ = nullptr;
    uid_t uid_ = 0;
    uint64_t bytes_ = 0;
  };

  // `limit_per_uid` 0: no user may hold anything (callers pass a resolved
  // limit).
  explicit UserMemory(uint64_t limit_per_uid) : limit_(limit_per_uid) {}

  // A charge of `bytes` to `uid` for `what` (named in the refusal): Ok
  // unless the user would hold more than the limit, then ResourceExhausted
  // saying how much they hold and the limit.
  Result<Charge> Take(uid_t uid, uint64_t bytes, const std::string& what);
  // The bytes `uid` holds now.
  uint64_t held(uid_t uid) const;
  uint64_t limit() const;
  // A reloaded configuration's limit: later charges are held to it.
  void SetLimit(uint64_t limit_per_uid);

 private:
  Status Add(uid_t uid, uint64_t bytes, const std::string& what);
  void Remove(uid_t uid, uint64_t bytes);

  mutable Mutex mu_;
  uint64_t limit_ GUARDED_BY(mu_);
  std::map<uid_t, uint64_t> held_ GUARDED_BY(mu_);
};

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_USER_MEMORY_H_
