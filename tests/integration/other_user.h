// Test support: work done as another user, in a child that drops to that
// user's ids before it runs anything (the test must run as root, as CI
// does): a forked child that runs a function of the test, or the
// galley_client_as program, spawned, that runs client steps named on its
// command line. The child reports back the Status its work returned.
#ifndef GALLEY_TESTS_INTEGRATION_OTHER_USER_H_
#define GALLEY_TESTS_INTEGRATION_OTHER_USER_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "galley/status.h"

namespace galley::testing {

// nobody, whose ids every Linux system has.
inline constexpr uid_t kNobodyUid = 65534;
inline constexpr gid_t kNobodyGid = 65534;

// A client's work for galley_client_as (client_as_main.cc): the program,
// the daemon's socket, and the steps ("open=<OpenJob body>",
// "epoch=<OpenJob body>", "query=<name>", "cancel=<job id>", ...; the
// program's header lists them), run in order until one fails.
struct ClientSteps {
  std::string program;
  std::string socket;
  std::vector<std::string> steps;
};

// What a child running as another user reported.
struct Outcome {
  int code = -1;  // StatusCode, or -1 when the child died without a report
  std::string message;
};

// A child running as `uid`, `gid` and exactly the supplementary `groups`:
// it runs `body`, reports the Status `body` returned, and keeps what `body`
// left open (jobs, connections) until Release, so that a test can act as
// root while the other user holds them. Fork only while this process runs
// no other thread: a lock another thread held at the fork stays held for
// ever in the child. So never beside a daemon built in the test's process
// (in_process_daemon.h): under AddressSanitizer, whose allocator clang 14
// does not make safe across fork, such a child once hung on its first
// allocations.
//
// Or a child that runs `client`'s steps: spawned (posix_spawn), so nothing
// of this process runs in it before it execs galley_client_as, and so safe
// beside an in-process daemon. It holds the jobs its steps opened until
// Release.
class ChildAs {
 public:
  ChildAs(uid_t uid, gid_t gid, std::vector<gid_t> groups, const std::function<Status()>& body);
  ChildAs(uid_t uid, gid_t gid, const std::vector<gid_t>& groups, const ClientSteps& client);
  ~ChildAs();
  ChildAs(const ChildAs&) = delete;
  ChildAs& operator=(const ChildAs&) = delete;

  // Waits for the child's report; a child silent for kReportBound (a bound
  // on a hang, not on a slow machine) is killed and reported as code -1.
  Outcome Report();
  // Lets the child exit (closing what it held) and waits for it; a child
  // that has not reported yet is killed first.
  void Release();
  // Ends the child at once, wherever it is.
  void Kill();

  static constexpr std::chrono::minutes kReportBound{5};

 private:
  bool reported_ = false;
  int report_[2] = {-1, -1};
  int release_[2] = {-1, -1};
  pid_t child_ = -1;
};

// Runs `body` as the user and returns its report once the child has exited.
Outcome RunAs(uid_t uid, gid_t gid, std::vector<gid_t> groups, const std::function<Status()>& body);
// The same for `client`'s steps, in a spawned galley_client_as.
Outcome RunAs(uid_t uid, gid_t gid, const std::vector<gid_t>& groups, const ClientSteps& client);

}  // namespace galley::testing

#endif  // GALLEY_TESTS_INTEGRATION_OTHER_USER_H_
