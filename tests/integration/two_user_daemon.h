// Test support: a daemon run by root that a second user can reach, as on a
// node that several users share. It holds a temporary folder other users
// may enter, a small JPEG dataset in it that every user may read, and the
// daemon on a socket every user may connect to: built in the test's process
// (in_process_daemon.h) when the second user's client is a spawned
// galley_client_as (other_user.h's ClientSteps), or the real galleyd, which
// a test needs as soon as it forks a child as the second user or reads the
// process itself (its descriptors, memory or exit). Tests derived from it
// are skipped unless they run as root (CI runs as root), since acting as the
// second user needs root (other_user.h).
#ifndef GALLEY_TESTS_INTEGRATION_TWO_USER_DAEMON_H_
#define GALLEY_TESTS_INTEGRATION_TWO_USER_DAEMON_H_

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "galley/client.h"
#include "tests/integration/galleyd_process.h"
#include "tests/integration/in_process_daemon.h"

namespace galley::testing {

class TwoUserDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override;

  // Starts a daemon in this process with `flags`, confined to the
  // temporary folder, on a socket every user may reach; options_ then
  // connects to it. Fork no child beside it; spawn one (other_user.h).
  void Start(std::vector<std::string> flags = {});
  // The same with the real galleyd, in process_.
  void StartProcess(std::vector<std::string> flags = {});

  // A job over data_ in batches of 2 at 8x8, endless.
  JobSpec Spec() const;

  // Lets every user read `root` and everything under it (and enter its
  // folders).
  static void MakeReadableByAll(const std::filesystem::path& root);

  TempDir tmp_;
  std::filesystem::path data_;                // 2 classes of 3 JPEGs, readable by all
  std::unique_ptr<InProcessGalleyd> daemon_;  // Start's
  std::unique_ptr<GalleydProcess> process_;   // StartProcess's
  ClientOptions options_;
};

}  // namespace galley::testing

#endif  // GALLEY_TESTS_INTEGRATION_TWO_USER_DAEMON_H_
