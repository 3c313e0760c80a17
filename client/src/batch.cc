#include "galley/batch.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "job_channel.h"
#include "wire/field_record.h"

namespace galley {

Batch::Batch(std::shared_ptr<internal::JobChannel> channel, uint32_t slot)
    : channel_(std::move(channel)), slot_(slot) {}

Batch::Batch(Batch&& other) noexcept : channel_(std::move(other.channel_)), slot_(other.slot_) {}

Batch& Batch::operator=(Batch&& other) noexcept {
  if (this != &other) {
    Release();
    channel_ = std::move(other.channel_);
    slot_ = other.slot_;
  }
  return *this;
}

Batch::~Batch() { Release(); }

void Batch::Release() {
  if (channel_) {
    channel_->ReleaseSlot(slot_);
    channel_.reset();
  }
}

uint64_t Batch::epoch() const { return channel_->slot(slot_)->epoch; }
uint64_t Batch::batch_index() const { return channel_->slot(slot_)->batch_index; }
bool Batch::last_in_epoch() const { return channel_->slot(slot_)->flags & wire::kLastInEpoch; }
bool Batch::end_of_stream() const { return channel_->slot(slot_)->flags & wire::kEndOfStream; }
uint32_t Batch::size() const {
  // Checked when the slot was leased; bounded again since the daemon, which
  // shares the page, could change it after.
  return std::min(channel_->slot(slot_)->sample_count, channel_->geometry().batch_capacity);
}
uint32_t Batch::skipped() const { return channel_->slot(slot_)->skipped_count; }

std::string Batch::first_error() const {
  const char* text = channel_->slot(slot_)->first_error;
  return std::string(text, strnlen(text, wire::kMaxErrorText));
}

std::span<const uint64_t> Batch::item_ids() const {
  return {wire::SlotItemIds(channel_->slot(slot_)), size()};
}

std::span<const int64_t> Batch::labels() const {
  return {wire::SlotLabels(channel_->slot(slot_), channel_->geometry()), size()};
}

Result<std::vector<std::span<const uint8_t>>> Batch::fields(uint32_t position) const {
  const wire::SegmentGeometry& g = channel_->geometry();
  const size_t count = channel_->info().fields.size();
  if (count == 0 || g.field_bytes == 0) return std::vector<std::span<const uint8_t>>();
  if (position >= size()) {
    return Status::InvalidArgument("no sample " + std::to_string(position) + " in the batch");
  }
  GALLEY_ASSIGN_OR_RETURN(auto record, wire::SlotFieldRecord(channel_->slot(slot_), g, position));
  return wire::SplitFieldRecord(record, count);
}

size_t Batch::field_count() const { return channel_->info().fields.size(); }

DType Batch::dtype() const { return channel_->info().dtype; }
Layout Batch::layout() const { return channel_->info().layout; }

std::vector<int64_t> Batch::shape() const {
  std::vector<int64_t> dims{static_cast<int64_t>(size())};
  const auto& sample = channel_->info().sample_shape;
  dims.insert(dims.end(), sample.begin(), sample.end());
  return dims;
}

void* Batch::data() const { return wire::SlotTensor(channel_->slot(slot_), channel_->geometry()); }
size_t Batch::data_bytes() const { return size() * channel_->geometry().sample_bytes; }

}  // namespace galley
