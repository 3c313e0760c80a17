// Test support: a ServedJob over a whole dataset, with a batch ring of its
// own, as the JobManager builds one at a job's open: for tests that run the
// scheduler or the item pipeline without a daemon.
#ifndef GALLEY_TESTS_UNIT_SERVED_JOB_FOR_TEST_H_
#define GALLEY_TESTS_UNIT_SERVED_JOB_FOR_TEST_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "galley/dataset/dataset.h"
#include "galley/scheduling/served_job.h"
#include "wire/segment_layout.h"

namespace galley::testing {

struct ServedJobOptions {
  uint64_t id = 1;
  uint64_t seed = 11;
  uint32_t batch_size = 4;
  uint32_t slots = 4;  // the ring's (JobSpec::prefetch)
  uint32_t max_resolution = 0;
  // The transform pipeline's JSON; its samples are side x side.
  std::string ops = R"({"ops": [{"op": "RandomResizedCrop", "size": 32}]})";
  int side = 32;
  std::string policy = "dsa";
};

// Every item of `dataset`, once an epoch, with `options`.
inline std::shared_ptr<ServedJob> MakeServedJob(std::shared_ptr<const Dataset> dataset,
                                                const ServedJobOptions& options) {
  const ItemId items = dataset->size();
  auto plan = std::make_shared<JobPlan>();
  plan->spec.dataset = dataset->root().string();
  plan->spec.batch_size = options.batch_size;
  plan->spec.prefetch = options.slots;
  plan->spec.seed = options.seed;
  plan->spec.max_resolution = options.max_resolution;
  plan->dataset = std::move(dataset);
  plan->policy = options.policy;
  for (ItemId i = 0; i < items; ++i) plan->subset.push_back(i);
  plan->epoch_size = items;
  auto pipeline = image::TransformPipeline::FromJson(nlohmann::json::parse(options.ops));
  EXPECT_TRUE(pipeline.ok()) << pipeline.status().ToString();
  plan->pipeline = std::make_shared<const image::TransformPipeline>(std::move(pipeline).value());
  plan->augmentation_signature = AugmentationSignature(*plan->pipeline, options.seed);
  auto geometry =
      wire::ComputeGeometry(options.slots, options.batch_size, plan->pipeline->sample_bytes());
  EXPECT_TRUE(geometry.ok());
  plan->geometry = *geometry;
  TensorShape shape;
  shape.height = shape.width = options.side;
  plan->shape = shape;
  auto ring = BatchRing::Create(*geometry, shape, ::getuid());
  EXPECT_TRUE(ring.ok()) << ring.status().ToString();
  auto job = std::make_shared<ServedJob>(std::move(plan));
  job->id = options.id;
  job->ring = std::move(ring).value();
  return job;
}

}  // namespace galley::testing

#endif  // GALLEY_TESTS_UNIT_SERVED_JOB_FOR_TEST_H_
