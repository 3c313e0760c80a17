// RemoteCredentials: the user and password galleyd gives the remote cache
// tier's servers (SASL PLAIN for memcached), and the key that signs the
// values it stores there, read from a file only galleyd may read.
//
// The file is TOML with exactly three keys:
//   username = "galley"
//   password = "..."
//   mac_key = "<64 hex digits or more>"   # openssl rand -hex 32
// mac_key is the deployment's: every node that shares the servers names the
// same one, and only they hold it, so a value whose MAC is right was written
// by one of them (remote_value.h). It must be at least kMinMacKeyBytes bytes.
// The file must be a regular file (not a symlink) owned by galleyd's
// effective user, with no permission bits for group or others (chmod 600):
// a secret other users could read would let them read and poison every
// node's cache. Anything else is refused with a message saying what to
// change.
//
// A free function without shared state: thread-safe.
#ifndef GALLEY_SERVER_REMOTE_REMOTE_CREDENTIALS_H_
#define GALLEY_SERVER_REMOTE_REMOTE_CREDENTIALS_H_

#include <string>

#include "galley/status.h"

namespace galley {

// The shortest mac_key accepted: 256 bits, HMAC-SHA256's own strength.
inline constexpr size_t kMinMacKeyBytes = 32;

struct RemoteCredentials {
  std::string username;
  std::string password;
  std::string mac_key;  // the key's bytes (the file holds them in hex)
};

// InvalidArgument, naming the file, for a file that cannot be read, is not
// private to galleyd, or does not hold the three keys, or whose mac_key is
// not hex or is too short.
Result<RemoteCredentials> ReadRemoteCredentials(const std::string& path);

}  // namespace galley

#endif  // GALLEY_SERVER_REMOTE_REMOTE_CREDENTIALS_H_
