// The JobManager as the owner of a job's life cycle, with recording fakes as
// its observers: every observer hears open, seek, its consumer's events and
// close in the order it was given; a refused opening is taken back from
// those told before and refuses the job; a refused seek is the seek's answer
// and numbers nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "galley/daemon/dataset_registry.h"
#include "galley/daemon/job_manager.h"
#include "galley/scheduling/job_lifecycle_observer.h"
#include "tests/unit/empty_image_folder.h"

namespace galley {
namespace {

// Writes each event it hears to a log shared by all observers, as
// "<name> <event> <job>[ <epoch> <generation>]", and refuses what it is told to.
class RecordingObserver final : public JobLifecycleObserver {
 public:
  RecordingObserver(std::string name, std::vector<std::string>* log)
      : name_(std::move(name)), log_(log) {}

  Status OnJobOpened(const std::shared_ptr<ServedJob>& job) override {
    log_->push_back(name_ + " opened " + std::to_string(job->id));
    return refuse_open_;
  }
  Status OnJobSought(ServedJob& job, const JobSeek& seek) override {
    log_->push_back(name_ + " sought " + std::to_string(job.id) + " " + std::to_string(seek.epoch) +
                    " " + std::to_string(seek.generation));
    return refuse_seek_;
  }
  void OnConsumerReady(JobId job_id) override {
    log_->push_back(name_ + " ready " + std::to_string(job_id));
  }
  void OnSlotReleased(JobId job_id) override {
    log_->push_back(name_ + " released " + std::to_string(job_id));
  }
  void OnJobClosed(JobId job_id) override {
    log_->push_back(name_ + " closed " + std::to_string(job_id));
  }

  Status refuse_open_ = Status::Ok();
  Status refuse_seek_ = Status::Ok();

 private:
  const std::string name_;
  std::vector<std::string>* const log_;
};

class JobLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Nothing reads the images: the transform names its output size.
    ASSERT_NO_FATAL_FAILURE(folder_.Create(4));
    options_.max_shm_total = uint64_t{64} << 20;
    datasets_ = std::make_unique<DatasetRegistry>(DatasetRegistryOptions::From(options_));
    jobs_ = std::make_unique<JobManager>(JobManagerOptions::From(options_),
                                         std::vector<JobLifecycleObserver*>{&first_, &second_},
                                         datasets_.get(), nullptr);
  }
  void TearDown() override { jobs_.reset(); }

  JobSpec Spec() const {
    JobSpec spec;
    spec.dataset = folder_.root().string();
    spec.batch_size = 2;
    spec.prefetch = 1;
    spec.transform_json = R"({"ops":[{"op":"Resize","size":[8,8]}]})";
    return spec;
  }
  static wire::PeerCredentials Myself() {
    return wire::PeerCredentials{::getpid(), ::geteuid(), ::getegid(), {}};
  }

  testing::EmptyImageFolder folder_;
  DaemonOptions options_;
  std::vector<std::string> log_;
  RecordingObserver first_{"first", &log_};
  RecordingObserver second_{"second", &log_};
  std::unique_ptr<DatasetRegistry> datasets_;
  std::unique_ptr<JobManager> jobs_;
};

TEST_F(JobLifecycleTest, EveryObserverHearsEachEventInTheGivenOrder) {
  auto job = jobs_->Open(Spec(), Myself(), nullptr);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const std::string id = std::to_string((*job)->id);
  auto generation = jobs_->Seek((*job)->id, 3);
  ASSERT_TRUE(generation.ok()) << generation.status().ToString();
  EXPECT_EQ(*generation, 1u);
  generation = jobs_->Seek((*job)->id, 4);
  ASSERT_TRUE(generation.ok()) << generation.status().ToString();
  EXPECT_EQ(*generation, 2u);
  jobs_->Close((*job)->id, Status::Cancelled("done"));
  jobs_->Close((*job)->id, Status::Cancelled("again"));  // heard once
  EXPECT_EQ(log_,
            (std::vector<std::string>{"first opened " + id, "second opened " + id,
                                      "first sought " + id + " 3 1", "second sought " + id + " 3 1",
                                      "first sought " + id + " 4 2", "second sought " + id + " 4 2",
                                      "first closed " + id, "second closed " + id}));
  EXPECT_EQ(jobs_->Seek((*job)->id, 5).status().code(), StatusCode::kNotFound);
}

// What a job's connection hears of its consumer goes to the JobManager,
// which passes it to every observer, in order, between open and close.
TEST_F(JobLifecycleTest, TheConsumersEventsReachEveryObserverThroughTheOwner) {
  auto job = jobs_->Open(Spec(), Myself(), nullptr);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const std::string id = std::to_string((*job)->id);
  jobs_->ConsumerReady((*job)->id);
  jobs_->SlotReleased((*job)->id);
  jobs_->SlotReleased((*job)->id);
  jobs_->Close((*job)->id, Status::Cancelled("done"));
  EXPECT_EQ(log_, (std::vector<std::string>{"first opened " + id, "second opened " + id,
                                            "first ready " + id, "second ready " + id,
                                            "first released " + id, "second released " + id,
                                            "first released " + id, "second released " + id,
                                            "first closed " + id, "second closed " + id}));
}

TEST_F(JobLifecycleTest, ARefusedOpeningIsTakenBackFromThoseToldBefore) {
  second_.refuse_open_ = Status::InvalidArgument("unknown policy");
  auto job = jobs_->Open(Spec(), Myself(), nullptr);
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message(), "unknown policy");
  ASSERT_EQ(log_.size(), 3u);
  EXPECT_EQ(log_[0].rfind("first opened ", 0), 0u);
  EXPECT_EQ(log_[1].rfind("second opened ", 0), 0u);
  EXPECT_EQ(log_[2].rfind("first closed ", 0), 0u) << "the refuser hears no close";
  const JobManagerCounters counters = jobs_->counters();
  EXPECT_EQ(counters.jobs, 0u);
  EXPECT_EQ(counters.jobs_refused, 1u);
  EXPECT_EQ(counters.shm_bytes, 0u) << "the admission is given back";
}

TEST_F(JobLifecycleTest, ARefusedSeekIsTheAnswerAndNumbersNothing) {
  auto job = jobs_->Open(Spec(), Myself(), nullptr);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const std::string id = std::to_string((*job)->id);
  log_.clear();
  first_.refuse_seek_ = Status::InvalidArgument("epoch 9 is past the job's last epoch");
  auto refused = jobs_->Seek((*job)->id, 9);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(log_, (std::vector<std::string>{"first sought " + id + " 9 1"}))
      << "the observers after the refusal hear nothing";
  first_.refuse_seek_ = Status::Ok();
  auto generation = jobs_->Seek((*job)->id, 1);
  ASSERT_TRUE(generation.ok()) << generation.status().ToString();
  EXPECT_EQ(*generation, 1u) << "the refused seek took no generation";
  jobs_->Close((*job)->id, Status::Cancelled("done"));
}

}  // namespace
}  // namespace galley
