// Which galleyd a client may talk to (ClientOptions::service_uid).
//
// A client finds its daemon by a socket path, and whoever can write to the
// path's folder decides what answers there. So before a client sends
// anything it asks the kernel who serves the connection it will use (not a
// second one: the answer must hold for the bytes that follow). Stateless;
// safe from any thread.
#ifndef GALLEY_CLIENT_DAEMON_TRUST_H_
#define GALLEY_CLIENT_DAEMON_TRUST_H_

#include <string>

#include "galley/client.h"
#include "galley/status.h"
#include "wire/connection.h"

namespace galley::internal {

// The daemon serving `connection` (connected to `options.socket_path`) if
// it runs as this process's user, as root, or as `options.service_uid`;
// otherwise PermissionDenied naming the path, the uid serving it and what
// to do.
Result<DaemonProcess> CheckDaemonPeer(const wire::Connection& connection,
                                      const ClientOptions& options);

}  // namespace galley::internal

#endif  // GALLEY_CLIENT_DAEMON_TRUST_H_
