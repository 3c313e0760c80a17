#include "galley/daemon/log_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <deque>
#include <vector>

#include "galley/errno_text.h"
#include "galley/uid_text.h"

namespace galley {
namespace {

// The kernel's own bound on symlinks in one lookup (MAXSYMLINKS).
constexpr int kMaxSymlinks = 40;

// Appending, never blocking on the open (a FIFO put there in a race), never
// becoming the controlling terminal, never through a symlink at the name.
constexpr int kOpenFlags = O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;

constexpr const char* kChooseFolder = "choose a folder only root and galleyd's user can write";

Status Refused(const std::string& path, const std::string& why) {
  return Status::InvalidArgument("log_file " + path + ": " + why);
}

std::string ModeText(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// What a name is, for a refusal.
std::string KindText(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symlink";
  return "of an unknown kind";
}

// Root and galleyd's own user: who may own what the log passes through.
bool Trusted(uid_t uid) { return uid == 0 || uid == ::geteuid(); }

// `name` in `folder`, both as a refusal shows them.
std::string Join(const std::string& folder, const std::string& name) {
  return folder == "/" ? "/" + name : folder + "/" + name;
}

// The names of `path` in order, without empty ones and ".".
std::deque<std::string> Names(const std::string& path) {
  std::deque<std::string> names;
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find('/', begin);
    if (end == std::string::npos) end = path.size();
    std::string name = path.substr(begin, end - begin);
    if (!name.empty() && name != ".") names.push_back(std::move(name));
    begin = end + 1;
  }
  return names;
}

// A folder the walk has reached, open (O_PATH) and checked up to it.
struct Folder {
  UniqueFd fd;
  struct stat info {};
  std::string path;  // as the walk reached it, symlinks resolved
};

Result<Folder> OpenRoot(const std::string& log_path) {
  Folder root{UniqueFd(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)), {}, "/"};
  if (!root.fd.valid() || ::fstat(root.fd.get(), &root.info) != 0) {
    return Refused(log_path, "cannot open the folder /: " + ErrnoText(errno));
  }
  return root;
}

// What is wrong with `folder` for the log, or "". `crossed` is the entry
// the walk goes on to (null for the log's own folder, whose every name
// matters: a sticky bit protects only names someone else already owns).
std::string FolderProblem(const Folder& folder, const struct stat* crossed,
                          const std::string& crossed_path) {
  const struct stat& info = folder.info;
  if (!Trusted(info.st_uid)) {
    return "folder " + folder.path + " belongs to " + UidText(info.st_uid) +
           ", who could swap the log file; " + kChooseFolder;
  }
  // A group may write only a folder root owns: an admin group's, such as
  // Ubuntu's /var/log (0775 root:syslog).
  if ((info.st_mode & S_IWGRP) != 0 && info.st_uid != 0) {
    return "folder " + folder.path + " is writable by its group (mode " + ModeText(info.st_mode) +
           "); chmod g-w " + folder.path + ", or " + kChooseFolder;
  }
  if ((info.st_mode & S_IWOTH) == 0) return "";
  if (crossed == nullptr || (info.st_mode & S_ISVTX) == 0) {
    return "folder " + folder.path + " is writable by others (mode " + ModeText(info.st_mode) +
           "); " + kChooseFolder;
  }
  if (!Trusted(crossed->st_uid)) {
    return "folder " + folder.path + " is writable by others (mode " + ModeText(info.st_mode) +
           ") and " + crossed_path + " in it belongs to " + UidText(crossed->st_uid) + "; " +
           kChooseFolder;
  }
  return "";
}

// What is wrong with the opened log file, or "".
std::string FileProblem(const struct stat& info) {
  if (!S_ISREG(info.st_mode)) {
    return "is " + KindText(info.st_mode) + ", not a regular file; name a regular file";
  }
  if (info.st_uid != ::geteuid()) {
    return "belongs to " + UidText(info.st_uid) + " rather than galleyd's user, " +
           UidText(::geteuid()) +
           ", so its owner could read and forge the log; remove it (galleyd creates it) or "
           "chown it to galleyd's user";
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return "is writable by group or others (mode " + ModeText(info.st_mode) + "); chmod go-w it";
  }
  if (info.st_nlink != 1) {
    return "has " + std::to_string(info.st_nlink) +
           " hard links, so it may be another file under a second name; name a file of its own";
  }
  return "";
}

// The log file `name` in `folder` (checked), opened or created.
Result<UniqueFd> OpenIn(const Folder& folder, const std::string& name, const std::string& path) {
  UniqueFd file;
  // A name that appears or goes between the look and the open is looked at
  // again; one that keeps changing is refused.
  for (int attempt = 0; attempt < 3 && !file.valid(); ++attempt) {
    struct stat entry {};
    if (::fstatat(folder.fd.get(), name.c_str(), &entry, AT_SYMLINK_NOFOLLOW) == 0) {
      if (S_ISLNK(entry.st_mode)) return Refused(path, "is a symlink; name the file itself");
      // Checked before the open: opening a device may itself do something.
      if (!S_ISREG(entry.st_mode)) return Refused(path, FileProblem(entry));
      file.Reset(::openat(folder.fd.get(), name.c_str(), kOpenFlags));
    } else if (errno == ENOENT) {
      file.Reset(::openat(folder.fd.get(), name.c_str(), kOpenFlags | O_CREAT | O_EXCL, 0640));
    } else {
      return Refused(path, "cannot look at it: " + ErrnoText(errno));
    }
    if (file.valid()) break;
    const int error = errno;
    if (error == ENOENT || error == EEXIST) continue;
    if (error == ELOOP) return Refused(path, "is a symlink; name the file itself");
    if (error == ENXIO) return Refused(path, "is a FIFO, not a regular file; name a regular file");
    return Refused(path, "cannot open it: " + ErrnoText(error));
  }
  if (!file.valid()) return Refused(path, "changed each time galleyd opened it; try again");
  struct stat info {};
  if (::fstat(file.get(), &info) != 0) return Refused(path, "cannot stat it: " + ErrnoText(errno));
  if (std::string problem = FileProblem(info); !problem.empty()) return Refused(path, problem);
  // Writes block as on any log file (O_NONBLOCK was for the open only).
  const int flags = ::fcntl(file.get(), F_GETFL);
  if (flags < 0 || ::fcntl(file.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return Refused(path, "cannot set it up for writing: " + ErrnoText(errno));
  }
  return file;
}

}  // namespace

Result<UniqueFd> OpenLogFile(const std::string& path) {
  if (path.empty() || path.front() != '/') return Refused(path, "is not an absolute path");
  std::deque<std::string> names = Names(path);
  const std::string last = path.substr(path.rfind('/') + 1);
  if (last.empty() || last == "." || last == "..") {
    return Refused(path, "names a folder; name the file itself");
  }
  GALLEY_ASSIGN_OR_RETURN(Folder folder, OpenRoot(path));
  int symlinks = 0;
  // Every name before the file's own is a folder (or a symlink to one),
  // checked as the walk crosses it.
  while (names.size() > 1) {
    const std::string name = std::move(names.front());
    names.pop_front();
    const std::string entry_path = Join(folder.path, name);
    struct stat entry {};
    if (::fstatat(folder.fd.get(), name.c_str(), &entry, AT_SYMLINK_NOFOLLOW) != 0) {
      const int error = errno;
      return Refused(path, "folder " + entry_path + ": " + ErrnoText(error) +
                               (error == ENOENT ? "; create it first" : ""));
    }
    if (std::string problem = FolderProblem(folder, &entry, entry_path); !problem.empty()) {
      return Refused(path, problem);
    }
    if (S_ISLNK(entry.st_mode)) {
      if (++symlinks > kMaxSymlinks) return Refused(path, "has too many symlinks on its way");
      std::vector<char> target(static_cast<size_t>(entry.st_size) + 2);
      const ssize_t n = ::readlinkat(folder.fd.get(), name.c_str(), target.data(), target.size());
      if (n <= 0 || static_cast<size_t>(n) >= target.size()) {
        return Refused(path, "cannot read the symlink " + entry_path + "; try again");
      }
      const std::string text(target.data(), static_cast<size_t>(n));
      const std::deque<std::string> inner = Names(text);
      names.insert(names.begin(), inner.begin(), inner.end());
      if (text.front() == '/') {
        GALLEY_ASSIGN_OR_RETURN(folder, OpenRoot(path));
      }
      continue;
    }
    if (!S_ISDIR(entry.st_mode)) {
      return Refused(path, entry_path + " is " + KindText(entry.st_mode) + ", not a folder");
    }
    Folder next;
    next.fd.Reset(
        ::openat(folder.fd.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.fd.valid() || ::fstat(next.fd.get(), &next.info) != 0) {
      return Refused(path, "cannot open the folder " + entry_path + ": " + ErrnoText(errno));
    }
    // What was opened must be what was checked.
    if (next.info.st_dev != entry.st_dev || next.info.st_ino != entry.st_ino) {
      return Refused(path, "folder " + entry_path + " changed while galleyd checked it; try again");
    }
    if (name != "..") {
      next.path = entry_path;
    } else {
      const size_t slash = folder.path.rfind('/');
      next.path = slash == 0 || slash == std::string::npos ? "/" : folder.path.substr(0, slash);
    }
    folder = std::move(next);
  }
  if (std::string problem = FolderProblem(folder, nullptr, ""); !problem.empty()) {
    return Refused(path, problem);
  }
  return OpenIn(folder, names.front(), path);
}

}  // namespace galley
