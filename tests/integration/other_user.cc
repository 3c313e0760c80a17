#include "tests/integration/other_user.h"

#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace galley::testing {

ChildAs::ChildAs(uid_t uid, gid_t gid, std::vector<gid_t> groups,
                 const std::function<Status()>& body) {
  if (::pipe(report_) != 0 || ::pipe(release_) != 0) return;
  child_ = ::fork();
  if (child_ == 0) {
    ::close(report_[0]);
    ::close(release_[1]);
    Status status = Status::Internal("cannot drop privileges");
    if (::setgroups(groups.size(), groups.data()) == 0 && ::setresgid(gid, gid, gid) == 0 &&
        ::setresuid(uid, uid, uid) == 0) {
      status = body();
    }
    const std::string text =
        std::to_string(static_cast<int>(status.code())) + "\n" + status.message();
    (void)!::write(report_[1], text.data(), text.size());
    ::close(report_[1]);
    char byte;
    (void)!::read(release_[0], &byte, 1);  // returns at Release, or when the parent ends
    ::_exit(0);
  }
  ::close(report_[1]);
  ::close(release_[0]);
}

ChildAs::~ChildAs() { Release(); }

Outcome ChildAs::Report() {
  std::string text;
  char buffer[4096];
  const auto deadline = std::chrono::steady_clock::now() + kReportBound;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd readable{report_[0], POLLIN, 0};
    const int ready = left.count() <= 0 ? 0 : ::poll(&readable, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      Kill();
      return {-1, "the child sent no report within " +
                      std::to_string(
                          std::chrono::duration_cast<std::chrono::seconds>(kReportBound).count()) +
                      " s and was killed"};
    }
    const ssize_t n = ::read(report_[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, n);
  }
  reported_ = true;
  const size_t newline = text.find('\n');
  if (newline == std::string::npos) return {};
  return {std::stoi(text.substr(0, newline)), text.substr(newline + 1)};
}

void ChildAs::Kill() {
  if (child_ > 0) ::kill(child_, SIGKILL);
  reported_ = true;  // nothing more will come
}

void ChildAs::Release() {
  if (child_ <= 0) return;
  // A child that has not reported is still inside its work, which may not
  // end by itself (a test that failed before reading the report).
  if (!reported_) ::kill(child_, SIGKILL);
  ::close(release_[1]);
  ::close(report_[0]);
  int status = 0;
  ::waitpid(child_, &status, 0);
  child_ = -1;
}

Outcome RunAs(uid_t uid, gid_t gid, std::vector<gid_t> groups,
              const std::function<Status()>& body) {
  ChildAs child(uid, gid, std::move(groups), body);
  return child.Report();
}

}  // namespace galley::testing
