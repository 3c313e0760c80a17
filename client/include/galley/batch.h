// Batch: a lease on one published slot of a job's shared-memory ring.
//
// The tensor, item ids and labels are views into shared memory, valid for the
// life of the Batch. Destroying (or Release()-ing) a Batch hands the slot
// back to the daemon; that may happen on any thread. A Batch keeps the
// mapping alive, so it may outlive the Job it came from.
#ifndef GALLEY_BATCH_H_
#define GALLEY_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "galley/status.h"
#include "galley/tensor_format.h"

namespace galley {

namespace internal {
class JobChannel;
}

class Batch {
 public:
  Batch() = default;
  Batch(std::shared_ptr<internal::JobChannel> channel, uint32_t slot);
  Batch(Batch&& other) noexcept;
  Batch& operator=(Batch&& other) noexcept;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  ~Batch();

  bool valid() const { return channel_ != nullptr; }
  uint64_t epoch() const;
  uint64_t batch_index() const;  // within the epoch
  bool last_in_epoch() const;
  bool end_of_stream() const;
  uint32_t size() const;            // samples in this batch
  uint32_t skipped() const;         // samples that failed and were left out
  std::string first_error() const;  // path and reason of the first failure

  std::span<const uint64_t> item_ids() const;
  std::span<const int64_t> labels() const;
  // The values of sample `position`'s fields (JobInfo::fields), in order,
  // as views into shared memory. ProtocolError when the slot's field area
  // does not add up (the segment is not trusted); empty for a job without
  // fields.
  Result<std::vector<std::span<const uint8_t>>> fields(uint32_t position) const;
  size_t field_count() const;

  DType dtype() const;
  Layout layout() const;
  // [N, C, H, W] for NCHW, [N, H, W, C] for NHWC, with N = size().
  std::vector<int64_t> shape() const;
  void* data() const;
  size_t data_bytes() const;

  // Hands the slot back now; the views become invalid.
  void Release();

 private:
  std::shared_ptr<internal::JobChannel> channel_;
  uint32_t slot_ = 0;
};

}  // namespace galley

#endif  // GALLEY_BATCH_H_
