// The fd wrapper moved to the base library (galley/unique_fd.h); this name
// stays for code not yet converted (server/daemon/control_server.*). Include
// galley/unique_fd.h in new code.
#ifndef GALLEY_WIRE_UNIQUE_FD_H_
#define GALLEY_WIRE_UNIQUE_FD_H_

#include "galley/unique_fd.h"

namespace galley::wire {
using ::galley::UniqueFd;
}  // namespace galley::wire

#endif  // GALLEY_WIRE_UNIQUE_FD_H_
