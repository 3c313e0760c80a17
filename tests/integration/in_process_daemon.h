// Test support: galleyd's Daemon in the test's own process, built from the
// flags the tests' galleyd process is given (galleyd_process.h's
// TestDaemonFlags), and the daemon's log kept in memory. Start returns once
// the socket accepts, so a test needs no polling; a test stops the daemon
// by destroying it.
//
// For every test whose subject is not the process: what the daemon serves
// and decides (jobs, admission, limits, per-user access, hostile peers,
// the configuration and its reload); another user's client is then a
// spawned galley_client_as (other_user.h). Tests of the process itself (signals, --detach, exit
// codes, a crash or a kill, its descriptors and resident memory read from
// /proc, a daemon run as another user) start the real galleyd
// (galleyd_process.h), and so do tests that fork a client (another user's,
// other_user.h, or one they kill): a child forked while the daemon's
// threads run here may inherit a lock one of them held, held for ever.
#ifndef GALLEY_TESTS_INTEGRATION_IN_PROCESS_DAEMON_H_
#define GALLEY_TESTS_INTEGRATION_IN_PROCESS_DAEMON_H_

#include <spdlog/logger.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "galley/daemon/daemon.h"
#include "galley/status.h"

namespace galley::testing {

// galleyd's command line (argv[0] first) for a daemon on `socket` with
// `flags`, as TestDaemonFlags makes it; `quiet` adds --log-level warn
// (leave it out when a config file sets the level).
std::vector<std::string> DaemonCommandLine(const std::filesystem::path& socket,
                                           const std::vector<std::string>& flags,
                                           bool quiet = true);

// Parses `command_line` as galleyd does (its errors are galleyd's), sets
// the log level as galleyd does, and builds and starts a Daemon: when it
// returns, clients can connect.
Result<std::unique_ptr<Daemon>> StartDaemon(const std::vector<std::string>& command_line);

// A daemon started as the tests' galleyd is (TestDaemonFlags), in this
// process, for a fixture to hold as it would hold a GalleydProcess.
// Destroying it stops the daemon as SIGTERM stops galleyd.
//
// Thread-safety: for the test's thread; the daemon serves from its own.
class InProcessGalleyd {
 public:
  // A bound on a hang, not on a slow machine: galleyd's own stop takes
  // milliseconds once every job is told.
  static constexpr std::chrono::seconds kStopBound{60};

  // Starts the daemon with `extra_args`; when started() it accepts
  // clients, else start_status() says why not.
  explicit InProcessGalleyd(const std::filesystem::path& socket,
                            std::vector<std::string> extra_args = {}, bool quiet = true);
  ~InProcessGalleyd();
  InProcessGalleyd(const InProcessGalleyd&) = delete;
  InProcessGalleyd& operator=(const InProcessGalleyd&) = delete;

  bool started() const { return started_; }
  const Status& start_status() const { return start_status_; }
  const std::string& socket() const { return socket_; }

  // What galleyd does on SIGTERM: every job ends with "galleyd is shutting
  // down", the socket is removed and every thread joined. True once done;
  // false when Stop has not returned within kStopBound (a hang, which the
  // test reports; the daemon is then left to itself, never destroyed under
  // its stopping thread). Idempotent.
  bool Stop();

 private:
  std::string socket_;
  bool started_ = false;
  bool hung_ = false;  // a Stop that did not return
  Status start_status_;
  std::unique_ptr<Daemon> daemon_;
};

// Every line logged while it lives, kept in memory: it replaces the default
// logger, which the daemon's components log to, and puts back the previous
// logger and level when destroyed. Make it before any daemon whose log it
// captures, and let it outlive them.
class CapturedLog {
 public:
  CapturedLog();
  ~CapturedLog();
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  // Every line so far, each "LEVEL message\n".
  std::string Text() const;

 private:
  class Sink;
  std::shared_ptr<Sink> sink_;
  std::shared_ptr<spdlog::logger> previous_;
  spdlog::level::level_enum previous_level_;
};

}  // namespace galley::testing

#endif  // GALLEY_TESTS_INTEGRATION_IN_PROCESS_DAEMON_H_
