// SetSocketAccess: who may connect to galleyd's control socket; and
// GroupIdByName, the group lookup it and the config share.
//
// Connecting to a Unix socket needs write permission on its file, so the
// file's group and mode decide which local users reach the daemon
// (DaemonOptions::socket_group, socket_mode). Called once, from
// ControlServer::Start, right after bind.
#ifndef GALLEY_SERVER_DAEMON_SOCKET_ACCESS_H_
#define GALLEY_SERVER_DAEMON_SOCKET_ACCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "galley/status.h"

namespace galley {

// Gives the file at `path` the group `group` ("" keeps galleyd's own) and
// the permission bits `mode`. PermissionDenied naming the key when galleyd
// may not (it must be root or a member of the group).
Status SetSocketAccess(const std::string& path, const std::string& group, uint32_t mode);

// The id of the group named `name`, or nullopt when the node has none.
// Safe from any thread (getgrnam_r: getgrnam's result is a static buffer
// another thread's lookup overwrites).
std::optional<gid_t> GroupIdByName(const std::string& name);

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_SOCKET_ACCESS_H_
