// Test support: galleyd's Daemon in the test's own process, built from the
// flags galleyd would be given, and the daemon's log kept in memory. Start
// returns once the socket accepts, so a test needs no polling; a test
// stops the daemon by destroying it.
//
// For tests of what the daemon decides (admission, limits, configuration
// and its reload). Tests of the process itself (signals, --detach, exit
// codes, a crash or a kill) start the real galleyd (galleyd_process.h).
#ifndef GALLEY_TESTS_INTEGRATION_IN_PROCESS_DAEMON_H_
#define GALLEY_TESTS_INTEGRATION_IN_PROCESS_DAEMON_H_

#include <spdlog/logger.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "galley/daemon/daemon.h"
#include "galley/status.h"

namespace galley::testing {

// galleyd's command line (argv[0] first) for a daemon on `socket` with
// `flags`; `quiet` adds --log-level warn (leave it out when a config file
// sets the level).
std::vector<std::string> DaemonCommandLine(const std::filesystem::path& socket,
                                           const std::vector<std::string>& flags,
                                           bool quiet = true);

// Parses `command_line` as galleyd does (its errors are galleyd's), sets
// the log level as galleyd does, and builds and starts a Daemon: when it
// returns, clients can connect.
Result<std::unique_ptr<Daemon>> StartDaemon(const std::vector<std::string>& command_line);

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
