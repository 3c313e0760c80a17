// RemoteCredentials: the user and password galleyd gives the remote cache
// tier's servers (SASL PLAIN for memcached), read from a file only galleyd
// may read.
//
// The file is TOML with exactly two keys:
//   username = "galley"
//   password = "..."
// It must be a regular file (not a symlink) owned by galleyd's effective
// user, with no permission bits for group or others (chmod 600): a secret
// other users could read would let them read and poison every node's
// cache. Anything else is refused with a message saying what to change.
//
// A free function without shared state: thread-safe.
#ifndef GALLEY_SERVER_DAEMON_REMOTE_CREDENTIALS_H_
#define GALLEY_SERVER_DAEMON_REMOTE_CREDENTIALS_H_

#include <string>

#include "galley/status.h"

namespace galley {

struct RemoteCredentials {
  std::string username;
  std::string password;
};

// InvalidArgument, naming the file, for a file that cannot be read, is not
// private to galleyd, or does not hold the two keys.
Result<RemoteCredentials> ReadRemoteCredentials(const std::string& path);

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_REMOTE_CREDENTIALS_H_
