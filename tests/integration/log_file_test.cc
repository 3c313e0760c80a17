// log_file (--log-file) against a hostile local user: a real galleyd run by
// root, and names planted by uid 65534 (nobody) in a forked child that drops
// to it. galleyd must not append through a symlink, write into a file
// another user owns or anyone may write, hang on a FIFO (with --detach too),
// or log into a folder others can plant names in; it accepts a folder only
// root writes and an admin group's folder (root:GROUP 0775), as Ubuntu's
// /var/log is.
//
// Needs root (to act as the other user and to chown); CI runs as root.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/integration/galleyd_process.h"
#include "tests/integration/other_user.h"

namespace galley {
namespace {

namespace fs = std::filesystem;
using testing::GalleydProcess;
using testing::kNobodyGid;
using testing::kNobodyUid;
using testing::Outcome;
using testing::RunAs;
using testing::TempDir;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const fs::path& path, const std::string& text, mode_t mode) {
  { std::ofstream(path, std::ios::trunc) << text; }
  ::chmod(path.c_str(), mode);
}

// Makes `folder` with exactly `mode`, owned by root and `group`.
void MakeFolder(const fs::path& folder, mode_t mode, gid_t group = 0) {
  ASSERT_EQ(::mkdir(folder.c_str(), 0700), 0) << folder;
  ASSERT_EQ(::chown(folder.c_str(), 0, group), 0);
  ASSERT_EQ(::chmod(folder.c_str(), mode), 0);
}

// Status of a system call made as the other user.
Status Errno(const std::string& what, int result) {
  return result == 0 ? Status::Ok() : Status::Internal(what + " failed");
}

class LogFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as a second user";
    // The other user must reach the folders below: the temp dir is 0700.
    fs::permissions(tmp_.path(), fs::perms(0755));
    socket_ = tmp_.path() / "galleyd.sock";
    // An admin group's log folder, as /var/log is (0775 root:syslog), with
    // the other user in its group: accepted, and a place where that user can
    // plant a name for the file checks to meet.
    admin_folder_ = tmp_.path() / "log";
    MakeFolder(admin_folder_, 0775, kNobodyGid);
  }

  // Runs galleyd detached with `log_file` as a start that must be refused:
  // one wrongly accepted returns 0, and its daemon exits when idle.
  testing::GalleydOutput StartRefused(const fs::path& log_file) const {
    return testing::RunGalleydForOutput({"--socket", socket_.string(), "--allowed-root",
                                         tmp_.path().string(), "--cache-bytes", "0", "--idle-exit",
                                         "1", "--log-file", log_file.string(), "--detach"});
  }

  // Expects a refusal at start that names `log_file` and says `why`.
  void ExpectRefused(const fs::path& log_file, const std::string& why) const {
    const auto run = StartRefused(log_file);
    EXPECT_EQ(run.code, 2) << run.err;
    EXPECT_NE(run.err.find("galleyd: log_file " + log_file.string() + ": " + why),
              std::string::npos)
        << run.err;
    EXPECT_FALSE(fs::exists(socket_));
  }

  // Starts galleyd with `log_file`, stops it, and returns what it logged.
  std::string LogOfARun(const fs::path& log_file) const {
    GalleydProcess::Launch launch;
    launch.quiet = false;  // logs at info: "ready:" and "stopped"
    GalleydProcess daemon(socket_,
                          {"--allowed-root", tmp_.path().string(), "--cache-bytes", "0",
                           "--log-file", log_file.string()},
                          launch);
    EXPECT_TRUE(daemon.started()) << "galleyd did not start with log_file " << log_file;
    EXPECT_EQ(daemon.Stop(SIGTERM), 0);
    return ReadFile(log_file);
  }

  TempDir tmp_;
  fs::path socket_;
  fs::path admin_folder_;
};

TEST_F(LogFileTest, ASymlinkToARootOnlyFileIsRefusedAndTheTargetStaysAsItWas) {
  const fs::path secrets = tmp_.path() / "etc";
  MakeFolder(secrets, 0755);
  const fs::path target = secrets / "shadow";
  WriteFile(target, "root:x:0:\n", 0600);
  struct stat before {};
  ASSERT_EQ(::stat(target.c_str(), &before), 0);

  const fs::path log_file = admin_folder_ / "galleyd.log";
  const Outcome planted = RunAs(kNobodyUid, kNobodyGid, {kNobodyGid}, [&] {
    return Errno("symlink", ::symlink(target.c_str(), log_file.c_str()));
  });
  ASSERT_EQ(planted.code, 0) << planted.message;

  ExpectRefused(log_file, "is a symlink; name the file itself");
  struct stat after {};
  ASSERT_EQ(::stat(target.c_str(), &after), 0);
  EXPECT_EQ(ReadFile(target), "root:x:0:\n");
  EXPECT_EQ(after.st_size, before.st_size);
  EXPECT_EQ(after.st_mode & 07777, 0600u);
}

TEST_F(LogFileTest, AFileAnotherUserOwnsOrAnyoneMayWriteIsRefusedAndLeftEmpty) {
  const fs::path planted_file = admin_folder_ / "planted.log";
  const Outcome planted = RunAs(kNobodyUid, kNobodyGid, {kNobodyGid}, [&] {
    ::umask(0);
    const int fd = ::open(planted_file.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0666);
    return fd < 0 ? Status::Internal("open failed") : Errno("close", ::close(fd));
  });
  ASSERT_EQ(planted.code, 0) << planted.message;
  ExpectRefused(planted_file, "belongs to uid 65534");
  EXPECT_EQ(fs::file_size(planted_file), 0u);

  // Root's own file that anyone may write: others could forge its lines.
  const fs::path open_to_all = tmp_.path() / "open.log";
  WriteFile(open_to_all, "", 0666);
  ExpectRefused(open_to_all, "is writable by group or others (mode 0666); chmod go-w it");
  EXPECT_EQ(fs::file_size(open_to_all), 0u);

  // A second name for a file: the log would land in the other one.
  const fs::path linked = tmp_.path() / "linked.log";
  WriteFile(linked, "", 0600);
  fs::create_hard_link(linked, tmp_.path() / "other-name");
  ExpectRefused(linked, "has 2 hard links");
  EXPECT_EQ(fs::file_size(linked), 0u);
}

TEST_F(LogFileTest, AFifoIsRefusedAndDetachReturns) {
  const fs::path fifo = admin_folder_ / "galleyd.log";
  const Outcome planted = RunAs(kNobodyUid, kNobodyGid, {kNobodyGid},
                                [&] { return Errno("mkfifo", ::mkfifo(fifo.c_str(), 0666)); });
  ASSERT_EQ(planted.code, 0) << planted.message;
  // StartRefused waits on galleyd's exit; before, it never came.
  ExpectRefused(fifo, "is a FIFO, not a regular file; name a regular file");
  // Should a galleyd still wait in its open (the test failed), a reader
  // releases it, and its --idle-exit ends it.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (reader >= 0) ::close(reader);
}

TEST_F(LogFileTest, AFolderOthersMayWriteIsRefusedEvenWhenSticky) {
  const fs::path sticky = tmp_.path() / "tmp";
  MakeFolder(sticky, 01777);
  ExpectRefused(sticky / "galleyd.log", "folder " + sticky.string() +
                                            " is writable by others (mode 1777); choose a folder "
                                            "only root and galleyd's user can write");
  EXPECT_FALSE(fs::exists(sticky / "galleyd.log"));

  // A folder another user owns: they could swap the file.
  const fs::path theirs = tmp_.path() / "theirs";
  MakeFolder(theirs, 0755);
  ASSERT_EQ(::chown(theirs.c_str(), kNobodyUid, kNobodyGid), 0);
  ExpectRefused(theirs / "galleyd.log", "folder " + theirs.string() + " belongs to uid 65534");

  // Through a sticky folder, only to a name root or galleyd's user owns: the
  // other user's symlink there to a good folder is refused.
  const fs::path good = tmp_.path() / "good";
  MakeFolder(good, 0755);
  const fs::path planted = sticky / "logs";
  const Outcome made = RunAs(kNobodyUid, kNobodyGid, {}, [&] {
    return Errno("symlink", ::symlink(good.c_str(), planted.c_str()));
  });
  ASSERT_EQ(made.code, 0) << made.message;
  ExpectRefused(planted / "galleyd.log", "folder " + sticky.string() +
                                             " is writable by others (mode 1777) and " +
                                             planted.string() + " in it belongs to uid 65534");
  EXPECT_FALSE(fs::exists(good / "galleyd.log"));
}

TEST_F(LogFileTest, AFileInAFolderOnlyRootWritesIsCreatedOrAppendedTo) {
  const fs::path folder = tmp_.path() / "var-log";
  MakeFolder(folder, 0755);
  const fs::path created = folder / "galleyd.log";
  std::string log = LogOfARun(created);
  EXPECT_NE(log.find("ready:"), std::string::npos) << log;
  EXPECT_NE(log.find("stopped"), std::string::npos) << log;
  struct stat info {};
  ASSERT_EQ(::stat(created.c_str(), &info), 0);
  EXPECT_EQ(info.st_uid, 0u);
  EXPECT_EQ(info.st_mode & 022, 0u);

  // An existing file of root's is appended to, never truncated.
  const fs::path existing = folder / "kept.log";
  WriteFile(existing, "an earlier line\n", 0640);
  log = LogOfARun(existing);
  EXPECT_EQ(log.rfind("an earlier line\n", 0), 0u) << log;
  EXPECT_NE(log.find("ready:"), std::string::npos) << log;
}

TEST_F(LogFileTest, AnAdminGroupsFolderIsAccepted) {
  // root:65534 0775, as /var/log is root:syslog 0775.
  const fs::path log_file = admin_folder_ / "galleyd.log";
  const std::string log = LogOfARun(log_file);
  EXPECT_NE(log.find("ready:"), std::string::npos) << log;
  struct stat info {};
  ASSERT_EQ(::stat(log_file.c_str(), &info), 0);
  EXPECT_EQ(info.st_uid, 0u);
}

}  // namespace
}  // namespace galley
