// What galleyd does when it runs out of file descriptors: a read, a listing
// or an accept that finds no descriptor free (EMFILE: the process's limit;
// ENFILE: the system's) is never a missing file. It becomes a
// ResourceExhausted that says so, and it is counted process-wide, so the
// job sees an error naming the cause and the operator sees a counter
// (galleyctl status and /metrics) instead of samples quietly going missing.
//
// Thread-safety: free functions; the counter is an atomic.
#ifndef GALLEY_SERVER_DATASET_DESCRIPTOR_EXHAUSTION_H_
#define GALLEY_SERVER_DATASET_DESCRIPTOR_EXHAUSTION_H_

#include <cstdint>
#include <string>

#include "galley/status.h"

namespace galley {

// Whether `error` (an errno value) means no descriptor was free.
bool IsOutOfDescriptors(int error);

// Counts one exhaustion and returns the ResourceExhausted a caller reports:
// `what` is what could not be opened (a path, "a connection").
Status OutOfDescriptors(const std::string& what, int error);

// Counts one exhaustion without building a status (an accept that failed).
void CountOutOfDescriptors();

// Exhaustions counted since the process started.
uint64_t DescriptorExhaustions();

// The process's descriptors now: how many are open (-1 when they cannot be
// counted, which itself may mean none is free) and the soft limit
// (RLIMIT_NOFILE; 0 when unknown).
struct DescriptorUsage {
  int64_t open = -1;
  uint64_t limit = 0;
};
DescriptorUsage CurrentDescriptorUsage();

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_DESCRIPTOR_EXHAUSTION_H_
