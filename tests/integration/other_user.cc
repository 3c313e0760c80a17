#include "tests/integration/other_user.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>

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

ChildAs::ChildAs(uid_t uid, gid_t gid, const std::vector<gid_t>& groups,
                 const ClientSteps& client) {
  // Close-on-exec here, so that no other child this process starts holds
  // them; the child's copies are its stdin and stdout.
  if (::pipe2(report_, O_CLOEXEC) != 0 || ::pipe2(release_, O_CLOEXEC) != 0) return;
  std::string group_list;
  for (const gid_t group : groups) {
    group_list += (group_list.empty() ? "" : ",") + std::to_string(group);
  }
  std::vector<std::string> args = {client.program, std::to_string(uid), std::to_string(gid),
                                   group_list.empty() ? "-" : group_list, client.socket};
  args.insert(args.end(), client.steps.begin(), client.steps.end());
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, release_[0], STDIN_FILENO);
  ::posix_spawn_file_actions_adddup2(&actions, report_[1], STDOUT_FILENO);
  pid_t pid = -1;
  if (::posix_spawn(&pid, client.program.c_str(), &actions, nullptr, argv.data(), environ) == 0) {
    child_ = pid;
  }
  ::posix_spawn_file_actions_destroy(&actions);
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

Outcome RunAs(uid_t uid, gid_t gid, const std::vector<gid_t>& groups, const ClientSteps& client) {
  ChildAs child(uid, gid, groups, client);
  return child.Report();
}

}  // namespace galley::testing
