// Test support: a real galleyd process on a temporary socket, and a small
// JPEG ImageFolder on disk. The daemon is always stopped (and the temporary
// directory removed) when the fixture goes away.
#ifndef GALLEY_TESTS_INTEGRATION_GALLEYD_PROCESS_H_
#define GALLEY_TESTS_INTEGRATION_GALLEYD_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace galley::testing {

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Writes `classes` x `per_class` JPEGs (random content, 40..120 px) into
// root/<class>/<n>.jpg; returns the paths in ImageFolder order.
std::vector<std::filesystem::path> WriteJpegFolder(const std::filesystem::path& root, int classes,
                                                   int per_class, unsigned seed = 1);

// A loopback TCP port that was free a moment ago.
uint16_t FreePort();

// A socket connected to 127.0.0.1:`port` whose reads give up after a
// minute (a bound on a hang only); -1 when nothing listens there.
int ConnectLoopback(uint16_t port);

// GET `path` from 127.0.0.1:`port`: the whole response (head and body), or
// "" when nothing answers (reads as ConnectLoopback's).
std::string HttpGet(uint16_t port, const std::string& path);

// A figure in kB from /proc/PID/status ("VmRSS", "VmHWM"); 0 when absent.
uint64_t ProcStatusKilobytes(pid_t pid, const std::string& field);

// Runs galleyd with `args` and returns its exit code (-1 if it was still
// running after 10 s and had to be killed).
int RunGalleydToExit(std::vector<std::string> args);

// The same, keeping what galleyd printed.
struct GalleydOutput {
  int code = -1;
  std::string out, err;
};
GalleydOutput RunGalleydForOutput(std::vector<std::string> args);

// galleyd's flags (argv[0] not included) for a test's daemon on `socket`:
// --log-level warn when `quiet`, shard indexes in a folder beside the
// socket (never the user's own cache), and unless `probe_and_prefault`,
// GalleydProcess::kQuickStartArgs; then `extra_args`. A flag `extra_args`
// names itself keeps the test's value (galleyd refuses a flag given twice).
// The real process and the in-process daemon (in_process_daemon.h) start
// from the same flags.
std::vector<std::string> TestDaemonFlags(const std::filesystem::path& socket,
                                         const std::vector<std::string>& extra_args,
                                         bool quiet = true, bool probe_and_prefault = false);

class GalleydProcess {
 public:
  // How the process is started besides its flags.
  struct Launch {
    std::vector<std::string> env;  // "NAME=value", set for galleyd only
    std::filesystem::path log;     // its stderr goes here (empty: inherited)
    bool quiet = true;             // passes --log-level warn
    // Runs galleyd as this user and group, with no supplementary groups
    // (the test must be root); 0 keeps the test's own.
    uid_t uid = 0;
    gid_t gid = 0;
    // Starts galleyd as a node's service starts: it measures the node for
    // its cache planner before it listens and commits its cache's memory
    // ahead of use (docs/cache.md). Off, for tests that are not about the
    // cache, it is given the probe's figures (kQuickStartArgs) and commits
    // memory on first use, which spares each start half a second of a core
    // and a gigabyte of page faults on a machine the tests share.
    bool probe_and_prefault = false;
  };
  // The flags a galleyd started without probe and prefault gets, as pairs of
  // flag and value: a current core's rates, so that the planner plans as on
  // a real node. A flag the test passes itself keeps the test's value.
  static const std::vector<std::pair<std::string, std::string>> kQuickStartArgs;

  // Starts galleyd with `extra_args`; waits until its socket accepts. Shard
  // indexes go to a folder beside the socket unless `extra_args` names one,
  // never into the user's own cache.
  explicit GalleydProcess(const std::filesystem::path& socket,
                          std::vector<std::string> extra_args = {});
  GalleydProcess(const std::filesystem::path& socket, std::vector<std::string> extra_args,
                 const Launch& launch);
  ~GalleydProcess();

  pid_t pid() const { return pid_; }
  const std::string& socket() const { return socket_; }
  bool started() const { return started_; }
  // Sends `signal` and waits for exit; returns the exit status (or -signal).
  int Stop(int signal);

 private:
  std::string socket_;
  pid_t pid_ = -1;
  bool started_ = false;
};

}  // namespace galley::testing

#endif  // GALLEY_TESTS_INTEGRATION_GALLEYD_PROCESS_H_
