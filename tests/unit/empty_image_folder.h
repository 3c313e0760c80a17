// Test support for the scheduler's and the job manager's unit tests, which
// plan items but never read them: an ImageFolder of empty files in a fresh
// temporary folder, and a job over every item of a dataset.
#ifndef GALLEY_TESTS_UNIT_EMPTY_IMAGE_FOLDER_H_
#define GALLEY_TESTS_UNIT_EMPTY_IMAGE_FOLDER_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "galley/dataset/dataset.h"
#include "galley/scheduling/served_job.h"

namespace galley::testing {

// `items` empty .jpg files in one class folder "a", under a temporary
// folder that is removed with this object, and that folder opened as a
// Dataset. Only the listing is real.
class EmptyImageFolder {
 public:
  EmptyImageFolder() = default;
  ~EmptyImageFolder() {
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }
  EmptyImageFolder(const EmptyImageFolder&) = delete;
  EmptyImageFolder& operator=(const EmptyImageFolder&) = delete;

  // Writes the folder and opens it as a dataset; a failure fails the test
  // (wrap the call in ASSERT_NO_FATAL_FAILURE).
  void Create(int items) {
    std::string pattern = (std::filesystem::temp_directory_path() / "galley_empty_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    std::filesystem::create_directories(root_ / "a");
    for (int i = 0; i < items; ++i) std::ofstream(root_ / "a" / (std::to_string(i) + ".jpg"));
    auto dataset = Dataset::Open(root_, {});
    ASSERT_TRUE(dataset.ok()) << dataset.status().ToString();
    dataset_ = *dataset;
  }

  const std::filesystem::path& root() const { return root_; }
  const std::shared_ptr<const Dataset>& dataset() const { return dataset_; }

 private:
  std::filesystem::path root_;
  std::shared_ptr<const Dataset> dataset_;
};

// The plan of a job with `policy` over every item of `dataset`, in batches
// of `batch_size`; the caller sets what its test is about.
inline JobPlan PlanOverAllItems(std::shared_ptr<const Dataset> dataset, uint32_t batch_size,
                                const std::string& policy) {
  JobPlan plan;
  plan.spec.batch_size = batch_size;
  for (ItemId i = 0; i < dataset->size(); ++i) plan.subset.push_back(i);
  plan.dataset = std::move(dataset);
  plan.policy = policy;
  return plan;
}

// The job `id` that `plan` describes, as the JobManager admits it.
inline std::shared_ptr<ServedJob> Served(uint64_t id, JobPlan plan) {
  auto job = std::make_shared<ServedJob>(std::make_shared<const JobPlan>(std::move(plan)));
  job->id = id;
  return job;
}

}  // namespace galley::testing

#endif  // GALLEY_TESTS_UNIT_EMPTY_IMAGE_FOLDER_H_
