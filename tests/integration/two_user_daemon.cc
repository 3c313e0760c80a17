#include "tests/integration/two_user_daemon.h"

#include <unistd.h>

#include <chrono>
#include <utility>

namespace galley::testing {

namespace fs = std::filesystem;

void TwoUserDaemonTest::SetUp() {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as a second user";
  // The other user must reach the socket: the temp dir is 0700.
  fs::permissions(tmp_.path(), fs::perms(0755));
  data_ = tmp_.path() / "data";
  WriteJpegFolder(data_, 2, 3);
  MakeReadableByAll(data_);
}

namespace {

// Every user reaches this socket (the node-wide default is 0660).
std::vector<std::string> SharedNodeFlags(std::vector<std::string> flags, const fs::path& root) {
  flags.insert(flags.end(), {"--allowed-root", root.string(), "--socket-mode", "0666"});
  return flags;
}

}  // namespace

void TwoUserDaemonTest::Start(std::vector<std::string> flags) {
  daemon_ = std::make_unique<InProcessGalleyd>(tmp_.path() / "galleyd.sock",
                                               SharedNodeFlags(std::move(flags), tmp_.path()));
  ASSERT_TRUE(daemon_->started()) << daemon_->start_status().ToString();
  options_.socket_path = daemon_->socket();
  // A bound on a hang on a busy machine, not a measurement.
  options_.request_timeout = std::chrono::seconds(30);
}

void TwoUserDaemonTest::StartProcess(std::vector<std::string> flags) {
  process_ = std::make_unique<GalleydProcess>(tmp_.path() / "galleyd.sock",
                                              SharedNodeFlags(std::move(flags), tmp_.path()));
  ASSERT_TRUE(process_->started()) << "galleyd did not start";
  options_.socket_path = process_->socket();
  options_.request_timeout = std::chrono::seconds(30);
}

JobSpec TwoUserDaemonTest::Spec() const {
  JobSpec spec;
  spec.dataset = data_.string();
  spec.batch_size = 2;
  spec.prefetch = 1;
  spec.transform_json = R"({"ops":[{"op":"Resize","size":[8,8]}]})";
  return spec;
}

void TwoUserDaemonTest::MakeReadableByAll(const fs::path& root) {
  fs::permissions(root, fs::perms(0755));
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    fs::permissions(entry.path(), fs::perms(entry.is_directory() ? 0755 : 0644));
  }
}

}  // namespace galley::testing
