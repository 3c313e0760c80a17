// SetSocketAccess: who may connect to galleyd's control socket.
//
// Connecting to a Unix socket needs write permission on its file, so the
// file's group and mode decide which local users reach the daemon
// (DaemonOptions::socket_group, socket_mode). Called once, from
// ControlServer::Start, right after bind.
#ifndef GALLEY_SERVER_DAEMON_SOCKET_ACCESS_H_
#define GALLEY_SERVER_DAEMON_SOCKET_ACCESS_H_

#include <cstdint>
#include <string>

#include "galley/status.h"

namespace galley {

// Gives the file at `path` the group `group` ("" keeps galleyd's own) and
// the permission bits `mode`. PermissionDenied naming the key when galleyd
// may not (it must be root or a member of the group).
Status SetSocketAccess(const std::string& path, const std::string& group, uint32_t mode);

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_SOCKET_ACCESS_H_
