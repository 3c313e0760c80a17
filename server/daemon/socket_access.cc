#include "galley/daemon/socket_access.h"

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "galley/errno_text.h"

namespace galley {

std::optional<gid_t> GroupIdByName(const std::string& name) {
  const long hint = ::sysconf(_SC_GETGR_R_SIZE_MAX);
  std::vector<char> buffer(hint > 0 ? static_cast<size_t>(hint) : 4096);
  while (true) {
    struct group entry {};
    struct group* found = nullptr;
    const int error = ::getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found);
    if (error == ERANGE && buffer.size() < (size_t{1} << 24)) {
      buffer.resize(buffer.size() * 2);  // a group with many members
      continue;
    }
    if (error != 0 || found == nullptr) return std::nullopt;
    return found->gr_gid;
  }
}

Status SetSocketAccess(const std::string& path, const std::string& group, uint32_t mode) {
  if (!group.empty()) {
    const std::optional<gid_t> gid = GroupIdByName(group);
    if (!gid) {
      return Status::InvalidArgument("socket_group: this node has no group '" + group + "'");
    }
    if (::chown(path.c_str(), static_cast<uid_t>(-1), *gid) != 0) {
      return Status::PermissionDenied("socket_group: cannot give " + path + " to group '" + group +
                                      "': " + ErrnoText(errno) +
                                      " (galleyd must run as root or as a member of it)");
    }
  }
  if (::chmod(path.c_str(), static_cast<mode_t>(mode)) != 0) {
    return Status::PermissionDenied("socket_mode: cannot chmod " + path + ": " + ErrnoText(errno));
  }
  return Status::Ok();
}

}  // namespace galley
