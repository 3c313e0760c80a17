// SamplingPolicy: decides, round after round, which item each job of one
// dataset receives next (docs/sampling.md, DESIGN §4).
//
// A job registers its remaining set for the current epoch; every round hands
// one item to every job that is ready and still has items, and groups the jobs
// that receive the same item into one Delivery so the item is read, decoded
// and prepared once for all of them. Each job receives every item of its set
// exactly once per epoch. With the "dsa", "dsa-chain" and "independent"
// policies the next item of a job is, at every step, uniform over that job's
// remaining items whatever the other jobs do, so each epoch is a uniformly
// random permutation.
//
// A job that is not ready (its batch ring is full) is masked: it receives
// nothing that round and its remaining set is unchanged, so an item delivered
// to the others that it still needs stays available to it (Joader's
// "compensation").
//
// Not thread-safe: one instance per dataset, owned and driven by the daemon's
// scheduler thread.
#ifndef GALLEY_SERVER_SAMPLER_SAMPLING_POLICY_H_
#define GALLEY_SERVER_SAMPLER_SAMPLING_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "galley/status.h"

namespace galley {

using ItemId = uint32_t;
using JobId = uint32_t;

// How many jobs one dataset's sampler tracks at once; AddJob beyond it
// answers ResourceExhausted. Membership is a 64-bit mask per item group.
inline constexpr size_t kMaxJobsPerDataset = 64;

// One item and the jobs that take it now (at least one).
struct Delivery {
  ItemId item = 0;
  std::vector<JobId> receivers;
};

// One sampler decision: every ready job with items left appears in exactly one
// delivery. deliveries.size() is the number of items to load this round.
struct Round {
  std::vector<Delivery> deliveries;
  size_t requests() const;  // receivers over all deliveries
};

// Says whether `job` can take an item this round. It must not depend on the
// sampler's own random choices (it cannot see them): the daemon answers from
// the job's batch ring.
using ReadyFn = std::function<bool(JobId)>;

class SamplingPolicy {
 public:
  virtual ~SamplingPolicy() = default;

  // Registers `job` with its remaining set `items` (distinct ids) for its
  // current epoch. A job that starts a new epoch is removed and added again.
  // InvalidArgument on a duplicate id or a job already registered;
  // ResourceExhausted past kMaxJobsPerDataset jobs.
  virtual Status AddJob(JobId job, std::span<const ItemId> items) = 0;

  // Forgets `job` and what it had left; unknown jobs are ignored. Any order,
  // any time.
  virtual void RemoveJob(JobId job) = 0;

  // Items `job` has not received yet this epoch (0 for an unknown job).
  virtual size_t Remaining(JobId job) const = 0;

  // Decides one round into `*round` (its buffers are reused). Returns false,
  // with no deliveries, when no ready job has items left.
  virtual bool Next(const ReadyFn& ready, Round* round) = 0;

  virtual std::string_view name() const = 0;
};

struct SamplerOptions {
  // "dsa" (default): dependent sampling over a coupling tree, shares
  //   overlaps of any shape; exactly uniform per job.
  // "dsa-chain": Joader's chain as published; shares only nested
  //   ("suffix") overlaps. Kept as the reference dsa improves on.
  // "independent": every job samples alone; coinciding items are merged.
  // "lockstep": one shared permutation per epoch number (CoorDL style);
  //   shares only between jobs that start together on identical subsets.
  std::string policy = "dsa";
  // Seeds the policy's random stream; equal seeds and equal call sequences
  // give equal decisions.
  uint64_t seed = 0;
};

// Builds the policy `options.policy` names; InvalidArgument for an unknown name.
Result<std::unique_ptr<SamplingPolicy>> MakeSamplingPolicy(const SamplerOptions& options);

}  // namespace galley

#endif  // GALLEY_SERVER_SAMPLER_SAMPLING_POLICY_H_
