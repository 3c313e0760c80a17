#include "galley/scheduling/job_plan.h"

#include <algorithm>

#include "galley/sampler/distributed_split.h"

namespace galley {

uint64_t JobPlan::ShardSize() const {
  if (listed()) return spec.start_batch * spec.batch_size + spec.epoch_items->size();
  return DistributedSplit::Of(spec).ShardSize(subset.size());
}

uint64_t JobPlan::BatchesPerEpoch() const {
  const uint64_t b = spec.batch_size;
  const uint64_t size = ShardSize();
  return spec.drop_last ? size / b : (size + b - 1) / b;
}

uint64_t JobPlan::BatchTarget(uint64_t batch_index) const {
  const uint64_t b = spec.batch_size;
  const uint64_t batches = BatchesPerEpoch();
  if (batch_index >= batches) return 0;
  if (batch_index + 1 < batches || spec.drop_last) return b;
  return ShardSize() - (batches - 1) * b;
}

std::vector<ItemId> JobPlan::SplitItems(uint64_t epoch, bool resuming) const {
  std::vector<ItemId> items;
  if (spec.world_size <= 1) {
    items = subset;
  } else {
    items = DistributedSplit::Of(spec).Shard(subset, epoch, spec.rank);
    if (spec.shuffle) std::sort(items.begin(), items.end());  // the policy decides the order
  }
  if (resuming && epoch == spec.start_epoch && !spec.resume_consumed.empty()) {
    std::vector<uint64_t> consumed = spec.resume_consumed;
    std::sort(consumed.begin(), consumed.end());
    std::erase_if(items, [&](ItemId item) {
      return std::binary_search(consumed.begin(), consumed.end(), uint64_t{item});
    });
  }
  return items;
}

Result<std::vector<ItemId>> JobPlan::CheckEpochList(uint64_t epoch, std::span<const uint64_t> items,
                                                    uint64_t from) const {
  const uint64_t expected = ShardSize() - std::min(ShardSize(), from);
  if (items.size() != expected) {
    return Status::InvalidArgument(
        "epoch " + std::to_string(epoch) + " lists " + std::to_string(items.size()) +
        " items where the job expects " + std::to_string(expected) +
        " (every epoch of a job has as many items as the first it listed; open a new job for "
        "another length)");
  }
  std::vector<ItemId> list;
  list.reserve(items.size());
  for (uint64_t id : items) {
    if (id >= dataset->size()) {
      return Status::InvalidArgument("epoch " + std::to_string(epoch) + " lists item " +
                                     std::to_string(id) + " but the dataset has " +
                                     std::to_string(dataset->size()) + " items");
    }
    list.push_back(static_cast<ItemId>(id));
  }
  return list;
}

std::string AugmentationSignature(const image::TransformPipeline& pipeline, uint64_t seed) {
  return pipeline.Signature() + "#seed=" + std::to_string(seed);
}

}  // namespace galley
