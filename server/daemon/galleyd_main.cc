// galleyd: the per-node daemon. See README.md and docs/operations.md.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "galley/daemon/daemon.h"
#include "galley/daemon/daemon_options.h"
#include "galley/daemon/log_file.h"
#include "galley/daemon/memory_setup.h"
#include "galley/daemon/systemd_notify.h"
#include "galley/dataset/descriptor_exhaustion.h"
#include "galley/errno_text.h"
#include "galley/scheduling/batch_ring.h"
#include "galley/unique_fd.h"

namespace {

enum class Wake { kStop, kIdleExit, kReload };

// Signals reach the main loop through a pipe written by a handler. sigwait
// alone is not enough: a library may start a thread before main() blocks
// the signals (OpenCV's OpenBLAS does), and the kernel may deliver a
// process-directed signal to that thread, whose default action would end
// the daemon without a clean shutdown. With a handler installed, whichever
// thread takes the signal only writes its number here.
int signal_pipe[2] = {-1, -1};

extern "C" void OnSignal(int signal_number) {
  const int saved_errno = errno;
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  (void)!::write(signal_pipe[1], &byte, 1);
  errno = saved_errno;
}

// The next signal number OnSignal saw, or 0 after `timeout_ms` (-1: wait).
int NextSignal(int timeout_ms) {
  pollfd ready{signal_pipe[0], POLLIN, 0};
  if (::poll(&ready, 1, timeout_ms) <= 0) return 0;  // timeout, or EINTR: the byte waits
  unsigned char byte = 0;
  return ::read(signal_pipe[0], &byte, 1) == 1 ? byte : 0;
}

// Blocks until SIGTERM/SIGINT (kStop) or SIGHUP (kReload), or, with
// idle_exit_seconds > 0, until no job has been open for that long.
Wake WaitForSignalOrIdleExit(double idle_exit_seconds, const galley::Daemon& daemon) {
  using Clock = std::chrono::steady_clock;
  const auto idle_limit = std::chrono::duration<double>(idle_exit_seconds);
  auto idle_since = Clock::now();
  while (true) {
    const int signal_number = NextSignal(idle_exit_seconds > 0 ? 200 : -1);
    if (signal_number == SIGHUP) return Wake::kReload;
    if (signal_number != 0) {
      spdlog::info("received signal {}, shutting down", signal_number);
      return Wake::kStop;
    }
    if (idle_exit_seconds <= 0) continue;
    if (daemon.open_jobs() > 0) {
      idle_since = Clock::now();
    } else if (Clock::now() - idle_since >= idle_limit) {
      return Wake::kIdleExit;
    }
  }
}

// SIGHUP: the config file read again (ReloadConfigFile), with the service
// manager told that galleyd reloads and then serves again.
void Reload(const std::vector<std::string>& command_line, galley::Daemon* daemon) {
  using namespace galley;
  (void)NotifyServiceManager(ReloadingMessage());
  (void)ReloadConfigFile(command_line, daemon);  // logs what it did
  (void)NotifyServiceManager(ReadyMessage("serving"));
}

// --log-file: stdout and stderr both append to the file from here on, so
// that what galleyd and its libraries print lands beside the log lines.
void RedirectOutput(galley::UniqueFd log_file) {
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(log_file.get(), STDOUT_FILENO);
  ::dup2(log_file.get(), STDERR_FILENO);
}

// Closes every descriptor above stderr but those in `keep`: a detached
// daemon must not hold what its caller happened to leave open (a pipe the
// caller reads to the end, a lock, a socket). /proc/self/fd rather than
// close_range(2), which older C libraries do not declare.
void CloseInheritedDescriptors(std::initializer_list<int> keep) {
  DIR* listing = ::opendir("/proc/self/fd");
  if (listing == nullptr) return;
  std::vector<int> inherited;
  while (const dirent* entry = ::readdir(listing)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    if (fd > STDERR_FILENO && std::find(keep.begin(), keep.end(), fd) == keep.end() &&
        fd != ::dirfd(listing)) {
      inherited.push_back(static_cast<int>(fd));
    }
  }
  ::closedir(listing);
  for (int fd : inherited) ::close(fd);
}

// --detach: forks into a new session and a grandchild whose parent is init,
// before any thread exists. The original process waits on a pipe and exits 0
// when the grandchild reports that it serves the socket, 1 if it dies first
// (naming the log file, where the reason went with --log-file). The grandchild keeps
// stdin as /dev/null and no other descriptor of the caller's; its stdout and
// stderr are released by ReportReady. Returns the pipe's write end in the
// grandchild (-1 without --detach). `log_fd`, the log file galleyd opened
// (-1: none), stays open.
int Detach(const std::string& log_file, int log_fd) {
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    std::perror("galleyd: pipe");
    std::_Exit(1);
  }
  const pid_t child = ::fork();
  if (child < 0) {
    std::perror("galleyd: fork");
    std::_Exit(1);
  }
  if (child > 0) {
    ::close(ready[1]);
    int status = 0;
    ::waitpid(child, &status, 0);
    char byte = 0;
    ssize_t n;
    do {
      n = ::read(ready[0], &byte, 1);
    } while (n < 0 && errno == EINTR);
    const bool served = n == 1 && byte == 'R';
    if (!served && !log_file.empty()) {
      std::fprintf(stderr, "galleyd: could not start; its log is %s\n", log_file.c_str());
    }
    std::_Exit(served ? 0 : 1);
  }
  ::close(ready[0]);
  ::setsid();
  const pid_t grandchild = ::fork();
  if (grandchild != 0) std::_Exit(grandchild < 0 ? 1 : 0);
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd >= 0) {
    ::dup2(null_fd, STDIN_FILENO);
    ::close(null_fd);
  }
  CloseInheritedDescriptors({ready[1], log_fd});
  return ready[1];
}

// Tells the waiting caller of --detach that the socket is served, then lets
// go of the caller's stdout and stderr: one that is a regular file (a log
// the caller chose) is kept, anything else (a pipe, a terminal, a socket)
// becomes /dev/null, so whoever reads it sees its end.
void ReportReady(int ready_fd) {
  if (ready_fd < 0) return;
  const char byte = 'R';
  (void)!::write(ready_fd, &byte, 1);
  ::close(ready_fd);
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null_fd < 0) return;
  for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    struct stat info {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      if (fd == STDOUT_FILENO) std::fflush(stdout);
      if (fd == STDERR_FILENO) std::fflush(stderr);
      ::dup2(null_fd, fd);
    }
  }
  ::close(null_fd);
}

int Run(int argc, char** argv) {
  using namespace galley;
  // Kept for SIGHUP, which reads the file again under the same flags.
  const std::vector<std::string> command_line(argv, argv + argc);
  auto loaded = LoadDaemonOptions(command_line);
  if (!loaded.ok()) {
    for (const std::string& error : ConfigErrors(loaded.status())) {
      std::fprintf(stderr, "galleyd: %s\n", error.c_str());
    }
    return 2;
  }
  if (loaded->exit_now) return 0;
  if (loaded->check_config) {
    std::fputs(RenderEffectiveConfig(*loaded).c_str(), stdout);
    for (const std::string& warning : loaded->warnings) {
      std::fprintf(stderr, "galleyd: warning: %s\n", warning.c_str());
    }
    return 0;
  }
  const DaemonOptions& options = loaded->options;
  // Opened, and refused, before galleyd detaches: the caller of --detach
  // hears why, at once, as for any other bad value.
  UniqueFd log_file;
  if (!options.log_file.empty()) {
    auto opened = OpenLogFile(options.log_file);
    if (!opened.ok()) {
      std::fprintf(stderr, "galleyd: %s\n", opened.status().message().c_str());
      return 2;
    }
    log_file = std::move(opened).value();
  }
  const int ready_fd = options.detach ? Detach(options.log_file, log_file.get()) : -1;
  if (log_file.valid()) RedirectOutput(std::move(log_file));
  // Logs go to stderr (journald under systemd; the log file with --log-file),
  // leaving stdout free.
  spdlog::set_default_logger(spdlog::stderr_color_mt("galleyd"));
  spdlog::set_level(spdlog::level::from_str(options.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ galleyd: %v");
  for (const std::string& warning : loaded->warnings) spdlog::warn("{}", warning);
  spdlog::info("file descriptors: limit {}, of which tar shards keep at most {} open",
               CurrentDescriptorUsage().limit, options.max_open_shards_total);

  // SIGTERM/SIGINT/SIGHUP go to OnSignal and on to the main loop; the
  // threads galleyd starts inherit them blocked (so their system calls are
  // never interrupted), and SIGPIPE never kills the daemon.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  if (::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    spdlog::error("cannot create the signal pipe: {}", ErrnoText(errno));
    return 1;
  }
  struct sigaction action {};
  action.sa_handler = OnSignal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (int signal_number : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(signal_number, &action, nullptr);

  if (int stale = BatchRing::RemoveStaleSegments(); stale > 0) {
    spdlog::info("removed {} stale shared-memory segments", stale);
  }
  TuneHeapForImages();
  // A finished drain stops galleyd the way SIGTERM does: the signal reaches
  // the main loop whichever thread takes it.
  auto created = Daemon::Create(options, [] { ::kill(::getpid(), SIGTERM); });
  if (!created.ok()) {
    std::fprintf(stderr, "galleyd: %s\n", created.status().message().c_str());
    return 2;
  }
  const std::unique_ptr<Daemon> daemon = std::move(created).value();
  if (Status s = daemon->Start(); !s.ok()) {
    spdlog::error("cannot start: {}", s.ToString());
    return 1;
  }
  ReportReady(ready_fd);
  spdlog::info("ready: {}", daemon->Summary());
  if (Status s = NotifyServiceManager(ReadyMessage("serving")); !s.ok()) {
    spdlog::warn("cannot tell the service manager galleyd is ready: {}", s.ToString());
  }

  // Every thread of ours is started (later ones start from them, signals
  // blocked); the main thread takes signals from here on.
  pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
  while (true) {
    const double idle_exit_seconds = daemon->options().idle_exit_seconds;
    const Wake wake = WaitForSignalOrIdleExit(idle_exit_seconds, *daemon);
    if (wake == Wake::kReload) {
      Reload(command_line, daemon.get());
      continue;
    }
    if (wake == Wake::kIdleExit) {
      spdlog::info("no job for {} s, exiting (--idle-exit)", idle_exit_seconds);
    }
    break;
  }
  (void)NotifyServiceManager(StoppingMessage());
  daemon->Stop(Status::Cancelled("galleyd is shutting down"));
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The one boundary for the main thread: whatever escapes the daemon's
  // set-up and shutdown is reported, and galleyd exits non-zero.
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "galleyd: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "galleyd: an unknown exception ended the daemon\n");
  }
  return 1;
}
