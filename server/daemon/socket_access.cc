#include "server/daemon/socket_access.h"

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace galley {

Status SetSocketAccess(const std::string& path, const std::string& group, uint32_t mode) {
  if (!group.empty()) {
    const struct group* entry = ::getgrnam(group.c_str());
    if (entry == nullptr) {
      return Status::InvalidArgument("socket_group: this node has no group '" + group + "'");
    }
    if (::chown(path.c_str(), static_cast<uid_t>(-1), entry->gr_gid) != 0) {
      return Status::PermissionDenied("socket_group: cannot give " + path + " to group '" + group +
                                      "': " + std::strerror(errno) +
                                      " (galleyd must run as root or as a member of it)");
    }
  }
  if (::chmod(path.c_str(), static_cast<mode_t>(mode)) != 0) {
    return Status::PermissionDenied("socket_mode: cannot chmod " + path + ": " +
                                    std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace galley
