// FrameBudget: how many bytes of large frames a process may hold at once.
//
// galleyd reads frames from every peer; one frame may be 16 MiB, so a few
// dozen peers sending large frames at once could make the daemon hold
// gigabytes. A Connection given a budget charges each frame over
// kFreeBytes against it for as long as the Frame lives; a frame that does
// not fit is refused (ResourceExhausted) before its payload is read. Small
// frames, which are all a well-behaved client sends, are never charged.
//
// Thread-safety: every method may be called from any thread.
#ifndef GALLEY_CLIENT_WIRE_FRAME_BUDGET_H_
#define GALLEY_CLIENT_WIRE_FRAME_BUDGET_H_

#include <atomic>
#include <cstdint>
#include <memory>

namespace galley::wire {

class FrameBudget {
 public:
  // Frames up to this size are free.
  static constexpr uint64_t kFreeBytes = 64 * 1024;

  explicit FrameBudget(uint64_t limit_bytes) : limit_(limit_bytes) {}

  // Gives back its bytes when destroyed.
  class Lease {
   public:
    Lease(FrameBudget* budget, uint64_t bytes) : budget_(budget), bytes_(bytes) {}
    ~Lease() { budget_->in_use_.fetch_sub(bytes_); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

   private:
    FrameBudget* budget_;
    uint64_t bytes_;
  };

  // A lease on `bytes`, or null when they would exceed the limit.
  std::unique_ptr<Lease> TryTake(uint64_t bytes) {
    uint64_t used = in_use_.load();
    do {
      if (used + bytes > limit_) return nullptr;
    } while (!in_use_.compare_exchange_weak(used, used + bytes));
    return std::make_unique<Lease>(this, bytes);
  }

  uint64_t limit() const { return limit_; }
  uint64_t in_use() const { return in_use_.load(); }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> in_use_{0};
};

}  // namespace galley::wire

#endif  // GALLEY_CLIENT_WIRE_FRAME_BUDGET_H_
