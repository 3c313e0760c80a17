// Mutex, SharedMutex, their scoped locks, and CondVar: std::mutex,
// std::shared_mutex and std::condition_variable with thread-safety
// annotations (galley/thread_annotations.h), so clang's -Wthread-safety
// checks every GUARDED_BY field and every REQUIRES/EXCLUDES contract.
// libstdc++'s own types carry no annotations, so code that locks them is
// invisible to the analysis; galley code locks these instead.
//
// Same semantics and cost as the std types they wrap (everything inlines).
// Mutex and SharedMutex are not recursive: locking one twice on a thread
// deadlocks, which the analysis reports where it can see both locks.
//
//   class Counter {
//    public:
//     void Add(int n) EXCLUDES(mu_) { MutexLock lock(&mu_); total_ += n; }
//    private:
//     Mutex mu_;
//     int total_ GUARDED_BY(mu_) = 0;
//   };
#ifndef GALLEY_MUTEX_H_
#define GALLEY_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "galley/thread_annotations.h"

namespace galley {

class CondVar;

// An exclusive lock. Prefer MutexLock to calling Lock/Unlock by hand.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // True, with the lock held, when it was free.
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // For code the analysis cannot follow (a callback run under the lock):
  // states that the caller holds it. Not checked at run time.
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` from construction to destruction.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A readers-writer lock: many holders in shared mode, or one in exclusive.
class CAPABILITY("shared mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  void ReaderLock() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void ReaderUnlock() RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds `mu` exclusively from construction to destruction.
class SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~WriterLock() RELEASE() { mu_->Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// Holds `mu` in shared mode from construction to destruction.
class SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex* mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_->ReaderLock(); }
  ~ReaderLock() RELEASE() { mu_->ReaderUnlock(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// A condition variable waited on with a galley::Mutex held. Waits may wake
// spuriously: callers loop on their condition, which the analysis then sees
// read under the lock (a predicate lambda would be analysed without it).
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases `mu`, waits for a signal, and takes `mu` again.
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // `mu` stays held, owned by the caller's scope
  }
  // As Wait, giving up at `deadline`; false when it passed without a signal.
  template <typename Clock, typename Duration>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool signalled = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return signalled;
  }
  // As Wait, giving up after `timeout`; false when it passed without a signal.
  template <typename Rep, typename Period>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout) REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + timeout);
  }

  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace galley

#endif  // GALLEY_MUTEX_H_
