// SystemdNotify: tells the service manager about galleyd's state (readiness,
// reloading, stopping) when it was started as a systemd Type=notify service.
//
// The protocol of sd_notify(3): one datagram of newline-separated
// VARIABLE=value lines to the AF_UNIX socket named by $NOTIFY_SOCKET (an
// abstract name when it starts with '@'). It is small enough to speak here,
// which keeps libsystemd out of a binary the wheel bundles. Without
// $NOTIFY_SOCKET every call does nothing. Stateless and thread-safe.
#ifndef GALLEY_SERVER_DAEMON_SYSTEMD_NOTIFY_H_
#define GALLEY_SERVER_DAEMON_SYSTEMD_NOTIFY_H_

#include <string>

#include "galley/status.h"

namespace galley {

// Sends `state` ("READY=1\nSTATUS=serving", ...) to $NOTIFY_SOCKET. OK when
// sent or when no socket is set; otherwise why not (worth a log line only:
// the daemon works the same without a service manager).
Status NotifyServiceManager(const std::string& state);

// The messages galleyd sends, as sd_notify(3) documents them.
std::string ReadyMessage(const std::string& status);  // READY=1, STATUS=
std::string ReloadingMessage();                       // RELOADING=1, MONOTONIC_USEC=
std::string StoppingMessage();                        // STOPPING=1

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_SYSTEMD_NOTIFY_H_
