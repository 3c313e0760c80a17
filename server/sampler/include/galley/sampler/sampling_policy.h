// SamplingPolicy: decides, round after round, which item each job of one
// dataset receives next (docs/sampling.md).
//
// A job registers its remaining set for the current epoch; every round hands
// one item to every job that is ready and still has items, and groups the jobs
// that receive the same item into one Delivery so the item is read, decoded
// and prepared once for all of them. Each job receives every item of its set
// exactly once per epoch. With the "dsa", "dsa-chain" and "independent"
// policies the next item of a job is, at every step, uniform over that job's
// remaining items whatever the other jobs do, so each epoch is a uniformly
// random permutation. "ods" keeps exactly-once but, by choice and within a
// per-job budget, prefers items the cache holds.
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
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "galley/ids.h"
#include "galley/sampling_policies.h"
#include "galley/status.h"

namespace galley {

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

// Says whether `item` of the policy's dataset is resident in some cache tier
// now. Only "ods" asks; it is called from Next.
using CachedFn = std::function<bool(ItemId)>;

// What a job asks of the policy for one epoch besides its items. Policies
// ignore the settings they have no use for.
struct JobSamplingOptions {
  // ods: the most of the epoch's draws that may be replaced by cached items,
  // as a fraction of the epoch's size in [0, 1]; the epoch's budget is
  // floor(fraction × items). 0 makes ods decide as dsa does; larger values
  // buy hit rate with a larger bias toward whatever the cache holds.
  double substitution_fraction = 0.1;
  // The job's own random stream for this epoch (the daemon derives it from
  // the job's seed and epoch). While the job is the only one registered with
  // the policy, from its AddJob on, every draw it makes uses this stream, so
  // its order is a pure function of this seed and its items. In a coupled
  // policy (dsa, dsa-chain, ods), from the moment a second job is
  // registered, every job's draws use the policy's stream until it
  // re-enters: equal seeds give equal streams, and a job's draw must never
  // reuse bits that shaped another job's history. Policies whose
  // OrdersFollowJobSeeds() is true keep each job on this stream whatever the
  // other jobs: "independent" (a job's draws and remaining set depend on its
  // own stream only), "lockstep" and "sequential". Unset: the policy's
  // stream always.
  std::optional<uint64_t> seed;
};

// How far a substituting policy (ods) has bent a job's current epoch.
struct SubstitutionStats {
  uint64_t substitutions = 0;  // draws replaced by a cached item this epoch
  uint64_t budget = 0;         // the most this epoch allows
};

class SamplingPolicy {
 public:
  virtual ~SamplingPolicy() = default;

  // Registers `job` with its remaining set `items` (distinct ids; only
  // "sequential" takes an order that repeats one) for its current epoch. A job that starts a new
  // epoch is removed and added again. InvalidArgument on a duplicate id, a job already registered
  // or an option out of range; ResourceExhausted past kMaxJobsPerDataset jobs.
  virtual Status AddJob(JobId job, std::span<const ItemId> items,
                        const JobSamplingOptions& options) = 0;
  // The same with default options.
  Status AddJob(JobId job, std::span<const ItemId> items) { return AddJob(job, items, {}); }

  // Forgets `job` and what it had left; unknown jobs are ignored. Any order,
  // any time.
  virtual void RemoveJob(JobId job) = 0;

  // Items `job` has not received yet this epoch (0 for an unknown job).
  virtual size_t Remaining(JobId job) const = 0;

  // Decides one round into `*round` (its buffers are reused). Returns false,
  // with no deliveries, when no ready job has items left.
  virtual bool Next(const ReadyFn& ready, Round* round) = 0;

  // Substitutions in `job`'s current epoch; zeros for an unknown job and for
  // policies that never substitute.
  virtual SubstitutionStats Substitutions(JobId /*job*/) const { return {}; }

  // True when each job's order is a function of its own seed
  // (JobSamplingOptions::seed) and items whatever other jobs are registered:
  // jobs with different seeds get different orders side by side.
  // "independent", "lockstep" and "sequential" (id order: no seed needed).
  // False for the coupled policies (dsa, dsa-chain, ods): with peers, every
  // job draws from the policy's stream, so jobs on the same items started
  // together receive one order whatever their seeds; that is how they load
  // each item once for all.
  virtual bool OrdersFollowJobSeeds() const { return false; }

  virtual std::string_view name() const = 0;
};

struct SamplerOptions {
  // A name from galley/sampling_policies.h:
  // "dsa" (default): dependent sampling over a coupling tree, shares
  //   overlaps of any shape; exactly uniform per job.
  // "dsa-chain": Joader's chain as published; shares only nested
  //   ("suffix") overlaps. Kept as the reference dsa improves on.
  // "independent": every job samples alone; coinciding items are merged.
  // "lockstep": one shared permutation per epoch number (CoorDL style);
  //   shares only between jobs that start together on identical subsets.
  // "ods": dsa, then a draw the cache does not hold is replaced by a cached
  //   item the job still needs, within the job's budget
  //   (JobSamplingOptions::substitution_fraction). Trades exact uniformity
  //   for hit rate; exactly-once still holds.
  // "sequential": every job walks its items in the order given to AddJob
  //   (not random), repeats included; jobs walking identical orders
  //   together share them.
  std::string policy{SamplingPolicyNameOf(kDefaultSamplingPolicy)};
  // Seeds the policy's random stream; equal seeds and equal call sequences
  // give equal decisions.
  uint64_t seed = 0;
  // ods: which items the cache holds. Unset: none, and ods decides exactly
  // as dsa does. Must not call back into the policy.
  CachedFn is_cached;
};

// Builds the policy `options.policy` names; InvalidArgument for an unknown name.
Result<std::unique_ptr<SamplingPolicy>> MakeSamplingPolicy(const SamplerOptions& options);
// MakeSamplingPolicy accepts the names of galley/sampling_policies.h
// (SamplingPolicyNames()).

}  // namespace galley

#endif  // GALLEY_SERVER_SAMPLER_SAMPLING_POLICY_H_
