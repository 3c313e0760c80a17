// Test support: real memcached servers on loopback, requiring SASL, standing
// for the cache servers every node shares; and galleyd's credentials file
// for them (with the deployment's key that signs values).
//
// Each server is `memcached -S` on a port of its own, its SASL user kept in
// a sasldb made by saslpasswd2 and found through SASL_CONF_PATH, which
// points at a folder of this test's (never the system's /etc/sasl2). The
// servers are killed, stopped or restarted on demand and always killed when
// the cluster goes away.
//
// Not thread-safe: one test thread drives it.
#ifndef GALLEY_TESTS_INTEGRATION_MEMCACHED_CLUSTER_H_
#define GALLEY_TESTS_INTEGRATION_MEMCACHED_CLUSTER_H_

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace galley::testing {

class MemcachedCluster {
 public:
  // Starts `servers` servers with `memory_mb` each, accepting `user` with
  // `password`; `dir` holds the SASL configuration. started() tells whether
  // every one answers.
  MemcachedCluster(const std::filesystem::path& dir, int servers, const std::string& user,
                   const std::string& password, int memory_mb = 16);
  ~MemcachedCluster();
  MemcachedCluster(const MemcachedCluster&) = delete;
  MemcachedCluster& operator=(const MemcachedCluster&) = delete;

  bool started() const { return started_; }
  // What went wrong when !started().
  const std::string& error() const { return error_; }
  // "127.0.0.1:PORT" of server `i`, and of all.
  std::string address(int i) const;
  std::vector<std::string> addresses() const;
  uint16_t port(int i) const { return ports_[i]; }

  void Kill(int i);     // SIGKILL: connections reset, refused afterwards
  void Freeze(int i);   // SIGSTOP: connections stay open, nothing answers
  void Thaw(int i);     // SIGCONT
  bool Restart(int i);  // a fresh, empty server on the same port; true once it answers

 private:
  bool Start(int i);

  std::filesystem::path dir_;
  int memory_mb_;
  std::vector<uint16_t> ports_;
  std::vector<pid_t> pids_;
  bool started_ = false;
  std::string error_;
};

// Writes galleyd's credentials file for the cluster (mode 0600) at `path`,
// with `mac_key` (hex) as the key that signs values; none when empty.
void WriteCredentialsFile(const std::filesystem::path& path, const std::string& user,
                          const std::string& password, const std::string& mac_key);

}  // namespace galley::testing

#endif  // GALLEY_TESTS_INTEGRATION_MEMCACHED_CLUSTER_H_
