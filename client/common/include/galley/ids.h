// The ids galley's libraries pass between each other.
//
// ItemId: a sample's position in its dataset's listing (stable while the
// dataset is unchanged); at most 2^32 samples per dataset. JobId: a job as
// galleyd numbers it (JobInfo::job_id on the wire), never reused while the
// daemon runs.
#ifndef GALLEY_IDS_H_
#define GALLEY_IDS_H_

#include <cstdint>

namespace galley {

using ItemId = uint32_t;
using JobId = uint64_t;

}  // namespace galley

#endif  // GALLEY_IDS_H_
