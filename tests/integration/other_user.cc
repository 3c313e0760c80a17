#include "tests/integration/other_user.h"

#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

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
  ssize_t n;
  while ((n = ::read(report_[0], buffer, sizeof(buffer))) > 0) text.append(buffer, n);
  const size_t newline = text.find('\n');
  if (newline == std::string::npos) return {};
  return {std::stoi(text.substr(0, newline)), text.substr(newline + 1)};
}

void ChildAs::Release() {
  if (child_ <= 0) return;
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
