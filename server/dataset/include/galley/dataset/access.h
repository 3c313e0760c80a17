// Read access as another user would have it.
//
// galleyd reads every file with its own identity, but serves a job only what
// the job's user could read: the daemon decides, from a file's owner, group,
// mode bits and POSIX access ACL, whether the peer's uid and groups (from
// SO_PEERCRED and SO_PEERGROUPS) may read it, the way the kernel's
// permission check does (acl(5), "Access check algorithm"): the owner entry
// for the owner; a named-user entry, masked; the owning group and named
// groups, masked, granting if any entry that matches one of the user's
// groups grants; otherwise "other". uid 0 reads and searches everything, as
// CAP_DAC_READ_SEARCH allows. Directories need search (x) permission on the
// whole path from '/'.
//
// Not modelled: Linux security modules (SELinux, AppArmor), capabilities
// other than root's, and network file systems whose server decides
// differently from the mode bits; document a dataset's access with mode bits
// and ACLs.
//
// Thread-safety: free functions, safe from any thread. AccessChecker is for
// one thread.
#ifndef GALLEY_SERVER_DATASET_ACCESS_H_
#define GALLEY_SERVER_DATASET_ACCESS_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include "galley/status.h"

namespace galley {

// Who asks: a peer's uid, primary gid and supplementary groups.
struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary, in any order

  bool InGroup(gid_t group) const;
};

enum class AccessMode { kRead = 4, kSearch = 1 };

// Whether `who` may read (or, for a directory, search) the object `info`
// describes; `path` is read for its access ACL when it has one.
bool MayAccess(const Credentials& who, const char* path, const struct stat& info, AccessMode mode);

// Decides, for one user, whether paths may be read, remembering the
// directories already decided (a dataset's files share few directories).
class AccessChecker {
 public:
  explicit AccessChecker(const Credentials& who) : who_(who) {}

  // PermissionDenied naming the first directory from '/' to `directory`
  // (included) that the user may not search.
  Status CheckDirectory(const std::filesystem::path& directory);
  // PermissionDenied when the user may not search every directory leading
  // to `file` or may not read `file`, whose stat is `info`.
  Status CheckFile(const std::filesystem::path& file, const struct stat& info);

 private:
  Credentials who_;
  // Directory -> the closed directory on its path ("" when searchable).
  std::unordered_map<std::string, std::string> closed_;
};

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_ACCESS_H_
