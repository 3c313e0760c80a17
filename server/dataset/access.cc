#include "galley/dataset/access.h"

#include <acl/libacl.h>
#include <sys/acl.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <optional>

namespace galley {
namespace {

namespace fs = std::filesystem;

// The permission bits `mode` grants to one class (shift 6 owner, 3 group, 0
// other).
bool Grants(mode_t bits, int shift, AccessMode mode) {
  return ((bits >> shift) & static_cast<mode_t>(mode)) != 0;
}

// The access ACL's verdict, or nullopt when the file has no extended ACL (or
// it cannot be read), in which case the mode bits decide.
std::optional<bool> AclVerdict(const Credentials& who, const char* path, AccessMode mode) {
  // Cheap test first: most files carry no ACL, and acl_get_file would
  // synthesize one from the mode bits.
  if (::getxattr(path, "system.posix_acl_access", nullptr, 0) <= 0) return std::nullopt;
  acl_t acl = ::acl_get_file(path, ACL_TYPE_ACCESS);
  if (acl == nullptr) return false;  // present but unreadable: refuse
  const acl_perm_t want = mode == AccessMode::kRead ? ACL_READ : ACL_EXECUTE;
  std::optional<bool> user_entry, group_verdict;
  bool mask_grants = true, other_grants = false, group_matched = false;
  acl_entry_t entry;
  for (int which = ACL_FIRST_ENTRY; ::acl_get_entry(acl, which, &entry) == 1;
       which = ACL_NEXT_ENTRY) {
    acl_tag_t tag;
    acl_permset_t permset;
    if (::acl_get_tag_type(entry, &tag) != 0 || ::acl_get_permset(entry, &permset) != 0) continue;
    const bool grants = ::acl_get_perm(permset, want) == 1;
    switch (tag) {
      case ACL_USER: {
        auto* id = static_cast<uid_t*>(::acl_get_qualifier(entry));
        if (id != nullptr && *id == who.uid) user_entry = grants;
        ::acl_free(id);
        break;
      }
      case ACL_GROUP_OBJ:
      case ACL_GROUP: {
        bool member = false;
        if (tag == ACL_GROUP) {
          auto* id = static_cast<gid_t*>(::acl_get_qualifier(entry));
          member = id != nullptr && who.InGroup(*id);
          ::acl_free(id);
        } else {
          struct stat info {};
          member = ::stat(path, &info) == 0 && who.InGroup(info.st_gid);
        }
        if (member) {
          group_matched = true;
          if (grants) group_verdict = true;
        }
        break;
      }
      case ACL_MASK:
        mask_grants = grants;
        break;
      case ACL_OTHER:
        other_grants = grants;
        break;
      default:  // ACL_USER_OBJ: the caller handled the owner
        break;
    }
  }
  ::acl_free(acl);
  if (user_entry) return *user_entry && mask_grants;
  if (group_matched) return group_verdict.value_or(false) && mask_grants;
  return other_grants;
}

}  // namespace

bool Credentials::InGroup(gid_t group) const {
  return group == gid || std::find(groups.begin(), groups.end(), group) != groups.end();
}

bool MayAccess(const Credentials& who, const char* path, const struct stat& info, AccessMode mode) {
  if (who.uid == 0) return true;  // CAP_DAC_READ_SEARCH
  if (info.st_uid == who.uid) return Grants(info.st_mode, 6, mode);
  if (auto verdict = AclVerdict(who, path, mode)) return *verdict;
  if (who.InGroup(info.st_gid)) return Grants(info.st_mode, 3, mode);
  return Grants(info.st_mode, 0, mode);
}

Status AccessChecker::CheckDirectory(const fs::path& directory) {
  if (who_.uid == 0) return Status::Ok();
  const std::string key = directory.string();
  auto it = closed_.find(key);
  if (it == closed_.end()) {
    // The parent first, so the message names the outermost closed directory.
    std::string closed;
    if (directory.has_parent_path() && directory.parent_path() != directory) {
      if (Status parent = CheckDirectory(directory.parent_path()); !parent.ok()) {
        closed = closed_[directory.parent_path().string()];
      }
    }
    struct stat info {};
    if (closed.empty() && !(::stat(key.c_str(), &info) == 0 && S_ISDIR(info.st_mode) &&
                            MayAccess(who_, key.c_str(), info, AccessMode::kSearch))) {
      closed = key;
    }
    it = closed_.emplace(key, std::move(closed)).first;
  }
  if (it->second.empty()) return Status::Ok();
  return Status::PermissionDenied("uid " + std::to_string(who_.uid) + " may not enter directory " +
                                  it->second);
}

Status AccessChecker::CheckFile(const fs::path& file, const struct stat& info) {
  if (who_.uid == 0) return Status::Ok();
  GALLEY_RETURN_IF_ERROR(CheckDirectory(file.parent_path()));
  if (!MayAccess(who_, file.c_str(), info, AccessMode::kRead)) {
    return Status::PermissionDenied("uid " + std::to_string(who_.uid) + " may not read " +
                                    file.string());
  }
  return Status::Ok();
}

}  // namespace galley
