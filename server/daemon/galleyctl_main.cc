// galleyctl: asks a running galleyd about its state.
//
//   galleyctl [--socket PATH] [--json | --verbose] status|datasets|jobs|cache|plan
//   galleyctl [--socket PATH] stop | drain | cancel JOB | forget DATASET
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "galley/client.h"
#include "galley/errno_text.h"
#include "galley/snapshots/query_text.h"
#include "galley/unique_fd.h"
#include "galley/version.h"

namespace {

// The process serving `socket_path`, as the kernel reports it for a
// connection to it (SO_PEERCRED): no trust in anything the daemon says.
bool PeerOfSocket(const std::string& socket_path, ucred* peer, std::string* error) {
  sockaddr_un addr{};
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    *error = "socket path too long: " + socket_path;
    return false;
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + galley::ErrnoText(errno);
    return false;
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  socklen_t length = sizeof(*peer);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
            ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, peer, &length) == 0;
  if (!ok) *error = "no galleyd answers at " + socket_path + ": " + galley::ErrnoText(errno);
  ::close(fd);
  return ok;
}

// The effective uid of the process `pidfd` refers to, read while the pidfd
// pins it: a pid reused after it exited reads as another process, and
// pidfd_send_signal then fails rather than signalling that one.
bool EffectiveUidOf(int pidfd, pid_t pid, uid_t* uid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    unsigned real = 0, effective = 0;
    if (std::sscanf(line.c_str(), "Uid: %u %u", &real, &effective) == 2) {
      *uid = effective;
      // Still the process the pidfd pins? (A poll reports its exit.)
      pollfd exited{pidfd, POLLIN, 0};
      return ::poll(&exited, 1, 0) == 0;
    }
  }
  return false;
}

// Stops the caller's own galleyd (or any, for root) the way SIGTERM does:
// every job gets an end-of-stream error and its shared memory is freed. The
// process is the one the kernel reports as the socket's peer, signalled
// through a pidfd once its uid is checked, never a pid anyone reported.
int Stop(const std::string& socket_path) {
  if (socket_path == galley::UserSocketPath()) {
    if (galley::Status folder = galley::CheckUserSocketFolder(socket_path); !folder.ok()) {
      std::fprintf(stderr, "galleyctl: %s\n", folder.message().c_str());
      return 1;
    }
  }
  ucred peer{};
  std::string error;
  if (!PeerOfSocket(socket_path, &peer, &error)) {
    std::fprintf(stderr, "galleyctl: %s\n", error.c_str());
    return 1;
  }
  if (peer.uid != ::getuid() && ::getuid() != 0) {
    std::fprintf(stderr,
                 "galleyctl: galleyd at %s runs as uid %u, not as you; a node's service is "
                 "stopped by its admin (systemctl stop galleyd)\n",
                 socket_path.c_str(), static_cast<unsigned>(peer.uid));
    return 1;
  }
  const int pidfd = peer.pid > 0 ? static_cast<int>(::syscall(SYS_pidfd_open, peer.pid, 0)) : -1;
  if (pidfd < 0) {
    std::fprintf(stderr, "galleyctl: galleyd (pid %d) at %s is gone or out of reach: %s\n",
                 static_cast<int>(peer.pid), socket_path.c_str(),
                 peer.pid > 0 ? galley::ErrnoText(errno).c_str() : "the kernel gave no pid");
    return 1;
  }
  const galley::UniqueFd process(pidfd);
  uid_t running_as = 0;
  if (!EffectiveUidOf(pidfd, peer.pid, &running_as) || running_as != peer.uid) {
    std::fprintf(stderr,
                 "galleyctl: pid %d no longer serves %s (it exited, or the pid now belongs to "
                 "another process); nothing was signalled\n",
                 static_cast<int>(peer.pid), socket_path.c_str());
    return 1;
  }
  if (::syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, nullptr, 0) != 0) {
    std::fprintf(stderr, "galleyctl: cannot signal galleyd (pid %d) at %s: %s\n",
                 static_cast<int>(peer.pid), socket_path.c_str(), galley::ErrnoText(errno).c_str());
    return 1;
  }
  // The pidfd turns readable when the process exits.
  pollfd exited{pidfd, POLLIN, 0};
  int ready = 0;
  while ((ready = ::poll(&exited, 1, 60 * 1000)) < 0 && errno == EINTR) {
  }
  if (ready == 0) {
    std::fprintf(stderr, "galleyctl: galleyd (pid %d) did not stop within 60 s\n",
                 static_cast<int>(peer.pid));
    return 1;
  }
  std::printf("stopped galleyd (pid %d) at %s\n", static_cast<int>(peer.pid), socket_path.c_str());
  return 0;
}

// After "no galleyd answers": where daemons come from, since galleyctl only
// talks to one.
void PrintHowToStart(const galley::ClientOptions& options) {
  std::fprintf(stderr,
               "galleyctl: no galleyd serves %s. A Python job (galley.DataLoader) starts a "
               "personal galleyd for you on first use (docs/autostart.md); to start one by hand:\n"
               "  galleyd --socket %s --owner-only --detach\n"
               "or ask your admin for the node's service (docs/install.md). galleyctl --socket "
               "PATH (or GALLEY_SOCKET) talks to a galleyd elsewhere.\n",
               options.socket_path.c_str(), galley::UserSocketPath().c_str());
}

int Run(int argc, char** argv) {
  CLI::App app{"galleyctl: inspect a running galleyd"};
  galley::ClientOptions options;
  options.client_name = "galleyctl";
  bool as_json = false;
  std::string what = "status";
  std::string argument;
  app.set_version_flag("--version", std::string("galleyctl ") + galley::kVersion + " (protocol " +
                                        std::to_string(galley::kProtocolVersion) + ")");
  app.add_option("--socket", options.socket_path, "galleyd's control socket");
  bool verbose = false;
  app.add_flag("--json", as_json, "print the raw JSON document");
  app.add_flag("--verbose,-v", verbose,
               "datasets: every field of every dataset and every shard of a shard set, not one "
               "line each");
  app.add_option("what", what,
                 "status | datasets | jobs | cache | plan | stop | drain | cancel JOB | "
                 "forget DATASET")
      ->check(CLI::IsMember(
          {"status", "datasets", "jobs", "cache", "plan", "stop", "drain", "cancel", "forget"}));
  app.add_option("argument", argument, "the job id (cancel) or dataset path (forget)");
  CLI11_PARSE(app, argc, argv);
  if (what == "stop") return Stop(options.socket_path);
  const bool takes_argument = what == "cancel" || what == "forget";
  if (takes_argument == argument.empty()) {
    std::fprintf(stderr, "galleyctl: %s\n",
                 takes_argument
                     ? (what + " needs " + (what == "cancel" ? "a job id" : "a dataset")).c_str()
                     : (what + " takes no argument").c_str());
    return 2;
  }

  auto client = galley::Client::Connect(options);
  if (!client.ok()) {
    std::fprintf(stderr, "galleyctl: %s\n", client.status().ToString().c_str());
    if (client.status().code() == galley::StatusCode::kUnavailable) PrintHowToStart(options);
    return 1;
  }
  if (takes_argument || what == "drain") {
    galley::Status done = galley::Status::Ok();
    if (what == "cancel") {
      uint64_t job_id = 0;
      try {
        job_id = std::stoull(argument);
      } catch (const std::exception&) {
        std::fprintf(stderr, "galleyctl: '%s' is not a job id\n", argument.c_str());
        return 2;
      }
      done = client->Cancel(job_id);
    } else if (what == "forget") {
      done = client->Forget(argument);
    } else {
      done = client->Drain();
    }
    if (!done.ok()) {
      std::fprintf(stderr, "galleyctl: %s\n", done.ToString().c_str());
      return 1;
    }
    std::printf("%s\n", what == "cancel"   ? ("cancelled job " + argument).c_str()
                        : what == "forget" ? ("forgot " + argument).c_str()
                                           : "draining: no new jobs; galleyd exits when the "
                                             "running ones end");
    return 0;
  }
  auto reply = client->Query(what);
  if (!reply.ok()) {
    std::fprintf(stderr, "galleyctl: %s\n", reply.status().ToString().c_str());
    return 1;
  }
  if (as_json) {
    std::cout << *reply << "\n";
  } else if (what == "datasets" && !verbose) {
    std::cout << galley::DatasetsSummary(nlohmann::json::parse(*reply));
  } else {
    std::cout << galley::FullText(nlohmann::json::parse(*reply));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {  // a reply that is not JSON, say
    std::fprintf(stderr, "galleyctl: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "galleyctl: an unknown exception\n");
  }
  return 1;
}
