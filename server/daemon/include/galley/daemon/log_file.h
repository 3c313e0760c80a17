// OpenLogFile: galleyd's log file (log_file, --log-file), opened so that no
// other local user can choose what it writes into, swap the file under it,
// or write lines of their own into it: the checks of sshd's StrictModes.
//
// galleyd often runs as root, and its log names datasets and uids. A path
// another user controls would let them point root's appends at a file of
// their choosing (a symlink or a hard link to /etc/...), forge or read the
// log (a file they own, or one anyone may write), or stop galleyd's start
// (a FIFO nobody reads). So the path is walked from / one name at a time,
// each folder opened relative to the last and checked as it is crossed, and
// the file is opened in the last folder by name (O_NOFOLLOW, O_NONBLOCK):
// what was checked is what is written to.
//
// Refused, each with a message that names the path, says why and what to do:
//   - the file: a symlink; anything but a regular file (a FIFO, a device, a
//     folder); owned by another uid than galleyd's (effective) one; writable
//     by group or others; more than one hard link;
//   - its folder: owned by another uid than root or galleyd's; writable by
//     its group unless root owns it (an admin group's folder such as
//     Ubuntu's /var/log, 0775 root:syslog, is accepted); writable by others,
//     sticky or not (others can plant names in /tmp);
//   - a folder above it: as its folder, except that a sticky folder others
//     may write (/tmp) may be crossed to a name root or galleyd's user owns,
//     since the sticky bit keeps others from renaming or removing that name.
// A symlink among the folders is followed when it lies in a folder that
// passed (only root or galleyd's user could have put it there); the walk goes
// on from its target, which is checked in turn.
//
// Absent, the file is created mode 0640 (less the umask) with O_EXCL, so a
// name planted between the check and the creation is met, not written
// through. The file is never truncated. Not checked: ACLs and mandatory
// access control (SELinux, AppArmor).
//
// Stateless; safe from any thread.
#ifndef GALLEY_SERVER_DAEMON_LOG_FILE_H_
#define GALLEY_SERVER_DAEMON_LOG_FILE_H_

#include <string>

#include "galley/status.h"
#include "galley/unique_fd.h"

namespace galley {

// The log file at `path` (absolute), open for appending, blocking writes,
// close-on-exec. InvalidArgument "log_file PATH: WHY; WHAT TO DO" when the
// file or a folder on its way is refused, or it cannot be opened.
Result<UniqueFd> OpenLogFile(const std::string& path);

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_LOG_FILE_H_
