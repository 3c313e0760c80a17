// Scheduler: decides which items go to which jobs and when, in waves.
//
// One thread. Each wave it claims a free ring slot for every job that has
// one, asks each dataset's SamplingPolicy for rounds until those slots'
// batches are full (a job without a free slot is masked), runs the wave's
// items through the ItemPipeline (read + decode once per item, one transform
// per receiving job) and publishes the slots. It sleeps on a condition
// variable when no job can take a batch.
//
// AddJob/RemoveJob/Seek/Wake/Describe may be called from any thread; they
// take mu_. Production state is changed only under mu_ by the scheduler
// thread or by Seek.
#ifndef GALLEY_SERVER_DAEMON_SCHEDULER_H_
#define GALLEY_SERVER_DAEMON_SCHEDULER_H_

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>

#include "server/daemon/item_pipeline.h"
#include "server/daemon/served_job.h"
#include "server/sampler/sampling_policy.h"

namespace galley {

// The jobs on one dataset that share one sampling policy instance.
struct SamplerGroup {
  std::string dataset;
  std::string policy_name;
  std::unique_ptr<SamplingPolicy> policy;
  size_t jobs = 0;
  uint64_t requests = 0;  // item deliveries to jobs
  uint64_t loads = 0;     // distinct item preparations (rounds)
};

struct SchedulerOptions {
  uint64_t sampler_seed = 0;  // seeds each dataset's sampler (mixed with the dataset)
};

class Scheduler {
 public:
  Scheduler(SchedulerOptions options, ItemPipeline* pipeline);
  ~Scheduler();  // stops the thread

  void Start();
  void Stop();

  // Registers a job; InvalidArgument if its policy is unknown.
  Status AddJob(std::shared_ptr<ServedJob> job);
  // Forgets a job (closed or its client died). Safe to call twice.
  void RemoveJob(uint64_t job_id);
  // Restarts a job at the beginning of `epoch`; returns the new generation.
  Result<uint64_t> Seek(uint64_t job_id, uint64_t epoch);
  // A slot was released, or something else changed: look again.
  void Wake();

  nlohmann::json Describe() const;

 private:
  struct Production {
    std::shared_ptr<ServedJob> job;
    SamplerGroup* group = nullptr;
    uint64_t epoch = 0;
    uint64_t batch_index = 0;
    uint64_t generation = 0;
    bool in_sampler = false;
    bool finished = false;
  };

  void Loop();
  // Plans a wave under mu_; returns false if no job can take a batch.
  bool PlanWave(std::vector<std::unique_ptr<SlotPlan>>* plans, std::vector<ItemTask>* tasks);
  void Publish(SlotPlan& plan);
  void LeaveSampler(Production& p);

  const SchedulerOptions options_;
  ItemPipeline* const pipeline_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                                             // GUARDED_BY(mu_)
  bool dirty_ = false;                                            // GUARDED_BY(mu_)
  std::map<uint64_t, Production> jobs_;                           // GUARDED_BY(mu_)
  std::map<std::pair<const Dataset*, std::string>, std::unique_ptr<SamplerGroup>> groups_;  // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_SCHEDULER_H_
