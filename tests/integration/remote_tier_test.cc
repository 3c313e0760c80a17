// Integration tests of the remote cache tier shared by every node: three
// real memcached servers requiring SASL on loopback, and two galleyd
// processes standing for two nodes, each with its own socket and cache
// budget, reading the same real JPEG files.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <libmemcached/memcached.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <thread>

#include "galley/client.h"
#include "tests/integration/galleyd_process.h"
#include "tests/integration/memcached_cluster.h"
#include "tests/integration/metadata_clone.h"
#include "tests/integration/other_user.h"

namespace galley {
namespace {

using namespace std::chrono_literals;
using testing::GalleydProcess;
using testing::MemcachedCluster;
using testing::TempDir;

constexpr const char* kUser = "galley";
constexpr const char* kPassword = "s3cret-for-tests";
// The deployment's key that signs values (mac_key), as `openssl rand -hex 32`
// makes one.
constexpr const char* kMacKey = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
constexpr const char* kTransform = R"({"ops":[{"op":"Resize","size":[32,32]}]})";
constexpr int kItems = 30;

using Samples = testing::SamplesById;

class RemoteTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = tmp_.path() / "data";
    testing::WriteJpegFolder(data_, 3, kItems / 3);
    cluster_ = std::make_unique<MemcachedCluster>(tmp_.path() / "sasl", 3, kUser, kPassword);
    ASSERT_TRUE(cluster_->started()) << cluster_->error();
    credentials_ = tmp_.path() / "remote-cache.toml";
    testing::WriteCredentialsFile(credentials_, kUser, kPassword, kMacKey);
  }

  std::vector<std::string> NodeArgs(const std::string& cache_bytes,
                                    const std::filesystem::path& credentials) const {
    std::vector<std::string> args = {"--allowed-root",
                                     tmp_.path().string(),
                                     "--cache-bytes",
                                     cache_bytes,
                                     "--worker-threads",
                                     "2",
                                     "--remote-cache-credentials",
                                     credentials.string(),
                                     "--remote-cache-retry-s",
                                     "1",
                                     "--remote-cache-connect-timeout-ms",
                                     "100",
                                     "--remote-cache-io-timeout-ms",
                                     "1000"};
    for (const std::string& server : cluster_->addresses()) {
      args.insert(args.end(), {"--remote-cache-server", server});
    }
    return args;
  }

  // A node: galleyd on its own socket with its own cache budget.
  std::unique_ptr<GalleydProcess> StartNode(const std::string& name, const std::string& cache_bytes,
                                            std::vector<std::string> extra = {}) {
    std::vector<std::string> args = NodeArgs(cache_bytes, credentials_);
    args.insert(args.end(), extra.begin(), extra.end());
    GalleydProcess::Launch launch;
    launch.log = tmp_.path() / (name + ".log");
    launch.quiet = false;  // the tests read the servers' failures and returns in the log
    // The planner chooses the remote tier's write form from the node's
    // measured rates, as on a real node.
    launch.probe_and_prefault = true;
    auto node = std::make_unique<GalleydProcess>(tmp_.path() / (name + ".sock"), args, launch);
    EXPECT_TRUE(node->started()) << "galleyd " << name << " did not start; see " << launch.log;
    return node;
  }

  // What node `name` logged.
  std::string Log(const std::string& name) const {
    std::ifstream in(tmp_.path() / (name + ".log"));
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  static nlohmann::json Query(const GalleydProcess& node, const std::string& what) {
    ClientOptions options;
    options.socket_path = node.socket();
    auto client = Client::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    if (!client.ok()) return {};
    auto text = client->Query(what);
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json{};
  }
  static nlohmann::json Remote(const GalleydProcess& node) {
    return Query(node, "status")["pipeline"]["remote"];
  }
  static uint64_t FileReads(const GalleydProcess& node) {
    return Query(node, "status")["pipeline"]["file_reads"].get<uint64_t>();
  }

  // One epoch of `dataset`, two samples a batch with one batch of
  // prefetch; a failed sample fails the job.
  static JobSpec EpochSpec(const std::filesystem::path& dataset,
                           const char* transform = kTransform) {
    JobSpec spec;
    spec.dataset = dataset.string();
    spec.batch_size = 2;
    spec.prefetch = 1;
    spec.transform_json = transform;
    spec.seed = 3;
    spec.epochs = 1;
    spec.on_error = "raise";
    return spec;
  }

  // One epoch on `node`, two samples a batch with one batch of prefetch, so
  // the daemon stays close behind the consumer and `after_first_batch`
  // happens with most of the epoch still to prepare. Every sample by item
  // id; a failed sample fails the job (on_error raise) and the test.
  Samples RunEpoch(const GalleydProcess& node,
                   const std::function<void()>& after_first_batch = nullptr,
                   const char* transform = kTransform) {
    ClientOptions options;
    options.socket_path = node.socket();
    options.request_timeout = 10s;
    auto client = Client::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    auto job = client->OpenJob(EpochSpec(data_, transform));
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    Samples samples;
    if (!job.ok()) return samples;
    for (int batches = 0;; ++batches) {
      auto batch = job->Next(20s);
      EXPECT_TRUE(batch.ok()) << batch.status().ToString();
      if (!batch.ok()) break;
      EXPECT_EQ(batch->skipped(), 0u) << batch->first_error();
      const size_t sample_bytes = batch->data_bytes() / batch->size();
      const auto* data = static_cast<const uint8_t*>(batch->data());
      for (size_t i = 0; i < batch->size(); ++i) {
        const bool fresh =
            samples
                .emplace(batch->item_ids()[i], std::vector<uint8_t>(data + i * sample_bytes,
                                                                    data + (i + 1) * sample_bytes))
                .second;
        EXPECT_TRUE(fresh) << "item " << batch->item_ids()[i] << " twice in one epoch";
      }
      if (batches == 0 && after_first_batch) after_first_batch();
      if (batch->last_in_epoch()) break;
    }
    EXPECT_EQ(samples.size(), size_t{kItems});
    return samples;
  }

  // galleyd as a node with `credentials`, expected to refuse to start.
  testing::GalleydOutput RunToExit(const std::filesystem::path& credentials) const {
    std::vector<std::string> args = NodeArgs("0", credentials);
    args.insert(args.begin(), {"--socket", (tmp_.path() / "refused.sock").string()});
    return testing::RunGalleydForOutput(args);
  }

  // Waits until `node` wrote `writes` values to the remote tier (writes are
  // sent by a background thread).
  static bool WaitForWrites(const GalleydProcess& node, uint64_t writes) {
    const auto give_up = std::chrono::steady_clock::now() + 60s;  // bounds a hang only
    while (std::chrono::steady_clock::now() < give_up) {
      if (Remote(node)["writes"].get<uint64_t>() >= writes) return true;
      std::this_thread::sleep_for(25ms);
    }
    return false;
  }

  // Waits until `node` has sent every write it queued (writes are sent by a
  // background thread).
  static bool WaitForWriteQueue(const GalleydProcess& node) {
    const auto give_up = std::chrono::steady_clock::now() + 60s;  // bounds a hang only
    while (std::chrono::steady_clock::now() < give_up) {
      if (Remote(node)["write_queue_bytes"].get<uint64_t>() == 0) return true;
      std::this_thread::sleep_for(25ms);
    }
    return false;
  }

  // Waits until `node` reports server `i` as `reachable` (its health checks
  // run in the background).
  static bool WaitForServer(const GalleydProcess& node, int i, bool reachable) {
    const auto give_up = std::chrono::steady_clock::now() + 60s;  // bounds a hang only
    while (std::chrono::steady_clock::now() < give_up) {
      if (Remote(node)["servers"][i]["reachable"].get<bool>() == reachable) return true;
      std::this_thread::sleep_for(25ms);
    }
    return false;
  }

  // A libmemcached handle on server `i` alone, authenticated as galleyd is.
  memcached_st* ServerHandle(int i) const {
    memcached_st* handle = memcached_create(nullptr);
    memcached_behavior_set(handle, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
    memcached_set_sasl_auth_data(handle, kUser, kPassword);
    memcached_server_add(handle, "127.0.0.1", cluster_->port(i));
    return handle;
  }

  // A server's own count: "curr_items", "get_hits", ...
  uint64_t ServerStat(int i, const char* name) const {
    memcached_st* handle = ServerHandle(i);
    memcached_return_t rc;
    memcached_stat_st* stats = memcached_stat(handle, nullptr, &rc);
    uint64_t value = 0;
    if (stats != nullptr) {
      char* text = memcached_stat_get_value(handle, stats, name, &rc);
      if (text != nullptr) value = std::stoull(text);
      std::free(text);
      memcached_stat_free(nullptr, stats);
    }
    memcached_free(handle);
    return value;
  }

  // Rewrites the value under `key` wherever it is with what `edit` makes of
  // it; false when no server holds it.
  bool EditValue(const std::string& key, const std::function<void(std::string&)>& edit) const {
    for (int i = 0; i < 3; ++i) {
      memcached_st* handle = ServerHandle(i);
      size_t length = 0;
      uint32_t flags = 0;
      memcached_return_t rc;
      char* value = memcached_get(handle, key.data(), key.size(), &length, &flags, &rc);
      if (value != nullptr) {
        std::string text(value, length);
        std::free(value);
        edit(text);
        rc = memcached_set(handle, key.data(), key.size(), text.data(), text.size(), 0, flags);
        memcached_free(handle);
        return rc == MEMCACHED_SUCCESS;
      }
      memcached_free(handle);
    }
    return false;
  }

  TempDir tmp_;
  std::filesystem::path data_;
  std::filesystem::path credentials_;
  std::unique_ptr<MemcachedCluster> cluster_;
};

TEST_F(RemoteTierTest, TheSecondNodeReadsFromTheRemoteTierWhatTheFirstAlreadyRead) {
  auto a = StartNode("a", "4M");
  auto b = StartNode("b", "2M");
  ASSERT_TRUE(a->started() && b->started());

  const Samples first = RunEpoch(*a);
  EXPECT_EQ(FileReads(*a), uint64_t{kItems});
  nlohmann::json remote = Remote(*a);
  EXPECT_EQ(remote["lookups"], kItems);
  EXPECT_EQ(remote["hits"], 0);
  EXPECT_EQ(remote["misses"], kItems);
  ASSERT_TRUE(WaitForWrites(*a, kItems)) << Remote(*a).dump() << Log("a");
  EXPECT_EQ(Remote(*a)["write_form"], "encoded");

  const Samples second = RunEpoch(*b);
  remote = Remote(*b);
  EXPECT_EQ(remote["hits"], kItems) << remote.dump();
  EXPECT_EQ(remote["encoded_hits"], kItems);
  EXPECT_EQ(remote["errors"], 0);
  EXPECT_EQ(remote["corrupt"], 0);
  EXPECT_GT(remote["bytes_read"].get<uint64_t>(), 0u);
  EXPECT_EQ(remote["writes"], 0) << "nothing was read from storage, so nothing is written";
  EXPECT_EQ(FileReads(*b), 0u) << "the second node read nothing from storage";
  EXPECT_EQ(second, first) << "every sample is the one the first node made";
  // Every server took a share of the keys (consistent hashing over three).
  for (int i = 0; i < 3; ++i) EXPECT_GT(ServerStat(i, "curr_items"), 0u) << "server " << i;

  // The planner sees the remote tier: its measured rate and capacity.
  const nlohmann::json plan = Query(*b, "plan");
  EXPECT_EQ(plan["remote_form"], "encoded");
  EXPECT_EQ(plan["inputs"]["remote_capacity_bytes"]["value"].get<double>(), 3.0 * (16 << 20));
  EXPECT_EQ(plan["inputs"]["remote_capacity_bytes"]["source"], "servers");
  EXPECT_GT(plan["inputs"]["remote_bytes_per_s"]["value"].get<double>(), 0);
  EXPECT_EQ(plan["inputs"]["remote_bytes_per_s"]["source"], "measured");
}

TEST_F(RemoteTierTest, DecodedPixelsInTheRemoteTierSpareTheSecondNodeItsDecodes) {
  auto a = StartNode("a", "0", {"--remote-cache-form", "decoded"});
  auto b = StartNode("b", "0", {"--remote-cache-form", "decoded"});
  ASSERT_TRUE(a->started() && b->started());
  const Samples first = RunEpoch(*a);
  ASSERT_TRUE(WaitForWrites(*a, kItems)) << Remote(*a).dump() << Log("a");
  EXPECT_EQ(Remote(*a)["write_form"], "decoded");

  const Samples second = RunEpoch(*b);
  const nlohmann::json status = Query(*b, "status");
  EXPECT_EQ(status["pipeline"]["remote"]["decoded_hits"], kItems) << status.dump();
  EXPECT_EQ(status["pipeline"]["decodes"], 0) << "the pixels came decoded";
  EXPECT_EQ(status["pipeline"]["file_reads"], 0);
  EXPECT_EQ(second, first);
}

// A crop reads part of the image, and a node without a decoded tier decodes
// only that part of a JPEG; the decoded form still needs the whole image, so
// it is decoded whole and its pixels written, not the file's bytes.
TEST_F(RemoteTierTest, TheDecodedFormIsWrittenAsPixelsWhenTheTransformCropsWithoutACache) {
  constexpr const char* kCrop =
      R"({"ops":[{"op":"RandomResizedCrop","size":[32,32],"scale":[0.08,1.0],)"
      R"("ratio":[0.75,1.3333333333333333],"interpolation":"bilinear"},)"
      R"({"op":"RandomHorizontalFlip","p":0.5}]})";
  auto a = StartNode("a", "0", {"--remote-cache-form", "decoded"});
  auto b = StartNode("b", "0", {"--remote-cache-form", "decoded"});
  ASSERT_TRUE(a->started() && b->started());
  const Samples first = RunEpoch(*a, nullptr, kCrop);
  ASSERT_TRUE(WaitForWrites(*a, kItems)) << Remote(*a).dump() << Log("a");
  EXPECT_EQ(Query(*a, "status")["pipeline"]["region_decodes"], 0)
      << "the pixels were decoded whole for the remote tier";

  const Samples second = RunEpoch(*b, nullptr, kCrop);
  const nlohmann::json status = Query(*b, "status");
  EXPECT_EQ(status["pipeline"]["remote"]["decoded_hits"], kItems) << status.dump();
  EXPECT_EQ(status["pipeline"]["remote"]["encoded_hits"], 0) << status.dump();
  EXPECT_EQ(status["pipeline"]["decodes"], 0) << "the pixels came decoded";
  EXPECT_EQ(second, first) << "the same crops of the same pixels";
}

TEST_F(RemoteTierTest, AServerKilledMidEpochCostsHitsNeverABatchAndIsUsedAgainWhenBack) {
  auto a = StartNode("a", "0");
  auto b = StartNode("b", "0");
  ASSERT_TRUE(a->started() && b->started());
  const Samples reference = RunEpoch(*a);
  ASSERT_TRUE(WaitForWrites(*a, kItems)) << Remote(*a).dump() << Log("a");
  const uint64_t on_victim = ServerStat(1, "curr_items");
  ASSERT_GT(on_victim, 0u);

  // Server 1 dies after node b's first batch: its items come from storage.
  const Samples during = RunEpoch(*b, [&] { cluster_->Kill(1); });
  EXPECT_EQ(during, reference) << "every sample of the epoch, each the right one";
  nlohmann::json remote = Remote(*b);
  EXPECT_GE(remote["errors"].get<uint64_t>(), 1u) << remote.dump();
  EXPECT_EQ(remote["corrupt"], 0);
  const uint64_t reads = FileReads(*b);
  EXPECT_GT(reads, 0u) << "the dead server's items came from storage";
  EXPECT_LT(reads, uint64_t{kItems}) << "the live servers' items still came from the tier";
  EXPECT_EQ(remote["hits"].get<uint64_t>() + reads, uint64_t{kItems}) << remote.dump();
  EXPECT_TRUE(WaitForServer(*b, 1, false)) << Remote(*b).dump();
  remote = Remote(*b);
  EXPECT_EQ(remote["servers"][1]["failures"], 1);
  EXPECT_TRUE(remote["servers"][0]["reachable"].get<bool>());
  EXPECT_TRUE(remote["servers"][2]["reachable"].get<bool>());
  EXPECT_NE(Log("b").find("remote cache server " + cluster_->address(1) + " does not answer"),
            std::string::npos)
      << Log("b");

  // Back (empty) on the same port: once the retry delay has passed the
  // nodes use it again, refill it and read from it. Their health checks see
  // it first; their memcached clients try it again once their own retry
  // delay has passed, so epochs are run until one reads it (the deadline
  // bounds a hang only).
  ASSERT_TRUE(cluster_->Restart(1));
  EXPECT_TRUE(WaitForServer(*a, 1, true)) << Remote(*a).dump();
  EXPECT_TRUE(WaitForServer(*b, 1, true)) << Remote(*b).dump();
  bool used_again = false;
  const auto give_up = std::chrono::steady_clock::now() + 120s;
  while (!used_again && std::chrono::steady_clock::now() < give_up) {
    EXPECT_EQ(RunEpoch(*a), reference);
    EXPECT_TRUE(WaitForWriteQueue(*a)) << Remote(*a).dump();
    const uint64_t hits_before = Remote(*b)["hits"].get<uint64_t>();
    EXPECT_EQ(RunEpoch(*b), reference);
    used_again = Remote(*b)["hits"].get<uint64_t>() - hits_before == uint64_t{kItems} &&
                 ServerStat(1, "get_hits") > 0;
    if (!used_again) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(used_again) << Remote(*b).dump();
  EXPECT_GT(ServerStat(1, "curr_items"), 0u);
  EXPECT_TRUE(WaitForServer(*b, 1, true)) << Remote(*b).dump();
  EXPECT_EQ(Remote(*b)["servers"][1]["failures"], 1) << "one outage, logged once";
  EXPECT_NE(Log("b").find("remote cache server " + cluster_->address(1) + " answers again"),
            std::string::npos)
      << Log("b");
}

TEST_F(RemoteTierTest, AServerCutOffMidEpochCostsBoundedWaitsNeverABatch) {
  auto a = StartNode("a", "0");
  auto b = StartNode("b", "0");
  ASSERT_TRUE(a->started() && b->started());
  const Samples reference = RunEpoch(*a);
  ASSERT_TRUE(WaitForWrites(*a, kItems)) << Remote(*a).dump() << Log("a");

  // Stopped, server 2 keeps its connections open and answers nothing: only
  // the I/O timeout gets the lookup back.
  const Samples during = RunEpoch(*b, [&] { cluster_->Freeze(2); });
  EXPECT_EQ(during, reference);
  // The epoch may have prefetched every lookup before the freeze; the next
  // one, with the server still stopped, reads what it held from storage.
  EXPECT_EQ(RunEpoch(*b), reference);
  const nlohmann::json remote = Remote(*b);
  EXPECT_GE(remote["errors"].get<uint64_t>(), 1u) << remote.dump();
  EXPECT_GT(FileReads(*b), 0u) << remote.dump();
  EXPECT_TRUE(WaitForServer(*b, 2, false)) << Remote(*b).dump();
  cluster_->Thaw(2);
  EXPECT_TRUE(WaitForServer(*b, 2, true)) << Remote(*b).dump();
}

TEST_F(RemoteTierTest, ADamagedOrShortRemoteValueIsAMissAndCounted) {
  auto a = StartNode("a", "0");
  ASSERT_TRUE(a->started());
  const Samples reference = RunEpoch(*a);
  ASSERT_TRUE(WaitForWrites(*a, kItems)) << Remote(*a).dump() << Log("a");
  const std::string fingerprint = Query(*a, "datasets")["datasets"][0]["fingerprint"];
  ASSERT_EQ(fingerprint.size(), 32u);
  const std::string prefix = "galley1:e:" + fingerprint + ":";
  // One flipped payload bit; one value cut short.
  ASSERT_TRUE(EditValue(prefix + "5", [](std::string& v) { v[v.size() - 7] ^= 0x10; }));
  ASSERT_TRUE(EditValue(prefix + "6", [](std::string& v) { v.resize(v.size() / 2); }));

  auto b = StartNode("b", "0");
  ASSERT_TRUE(b->started());
  EXPECT_EQ(RunEpoch(*b), reference) << "the damaged items came from storage, intact";
  const nlohmann::json remote = Remote(*b);
  EXPECT_EQ(remote["corrupt"], 2) << remote.dump();
  EXPECT_EQ(remote["hits"], kItems - 2);
  EXPECT_EQ(FileReads(*b), 2u);
}

// What anyone holding the servers' SASL credentials, but not the
// deployment's mac_key, can write in place of a genuine decoded value: the
// same header with white pixels, either in version 1's layout with its
// unkeyed checksum recomputed, or in today's layout signed with a key of
// their own. Made here independently of galleyd's code.
std::string WhiteUnkeyed(const std::string& key, const std::string& genuine) {
  std::string forged = genuine.substr(0, 32);
  forged[4] = 1;  // version 1: XXH3-64 of the payload seeded with key and header
  const std::string white(genuine.size() - 64, '\xff');
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, key.data(), key.size());
  XXH3_64bits_update(state, forged.data(), 32);
  const uint64_t checksum =
      XXH3_64bits_withSeed(white.data(), white.size(), XXH3_64bits_digest(state));
  XXH3_freeState(state);
  for (int i = 0; i < 8; ++i) forged.push_back(static_cast<char>(checksum >> (8 * i)));
  return forged + white;
}

std::string WhiteSignedWith(const std::string& mac_key, const std::string& key,
                            const std::string& genuine) {
  const std::string header = genuine.substr(0, 32);
  const std::string white(genuine.size() - 64, '\xff');
  const uint32_t length = static_cast<uint32_t>(key.size());
  std::string input(reinterpret_cast<const char*>(&length), 4);  // little-endian host
  input += key + header + white;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_length = 0;
  HMAC(EVP_sha256(), mac_key.data(), static_cast<int>(mac_key.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &mac_length);
  return header + std::string(reinterpret_cast<const char*>(mac), mac_length) + white;
}

TEST_F(RemoteTierTest, AValueForgedWithoutTheDeploymentsKeyIsCorruptAndReadFromStorage) {
  auto a = StartNode("a", "0", {"--remote-cache-form", "decoded"});
  ASSERT_TRUE(a->started());
  const Samples reference = RunEpoch(*a);
  ASSERT_TRUE(WaitForWrites(*a, kItems)) << Remote(*a).dump() << Log("a");
  const std::string fingerprint = Query(*a, "datasets")["datasets"][0]["fingerprint"];
  ASSERT_EQ(fingerprint.size(), 32u);
  for (int item = 0; item < kItems; ++item) {
    const std::string key = "galley1:d:" + fingerprint + ":" + std::to_string(item);
    ASSERT_TRUE(EditValue(key, [&](std::string& v) {
      ASSERT_GT(v.size(), 64u);
      v = item % 2 == 0 ? WhiteUnkeyed(key, v) : WhiteSignedWith("the forger's own key", key, v);
    })) << key;
  }

  // Counted rather than compared whole, so that a failure says how many.
  auto real_samples = [&](const Samples& samples) {
    size_t real = 0;
    for (const auto& [item, bytes] : samples) real += reference.at(item) == bytes;
    return real;
  };
  auto b = StartNode("b", "0", {"--remote-cache-form", "decoded"});
  ASSERT_TRUE(b->started());
  EXPECT_EQ(real_samples(RunEpoch(*b)), size_t{kItems}) << "every sample is the file's, none white";
  nlohmann::json status = Query(*b, "status");
  EXPECT_EQ(status["pipeline"]["remote"]["corrupt"], kItems) << status.dump();
  EXPECT_EQ(status["pipeline"]["remote"]["hits"], 0);
  EXPECT_EQ(status["pipeline"]["file_reads"], kItems) << "every item was read from storage";
  EXPECT_NE(Log("b").find("MAC mismatch"), std::string::npos) << Log("b");
  EXPECT_NE(Log("b").find("version 1"), std::string::npos) << Log("b");

  // The forged values were replaced by genuine ones: the next epoch reads
  // every item from the tier, and nothing more is refused.
  ASSERT_TRUE(WaitForWrites(*b, kItems)) << Remote(*b).dump() << Log("b");
  EXPECT_EQ(real_samples(RunEpoch(*b)), size_t{kItems});
  status = Query(*b, "status");
  EXPECT_EQ(status["pipeline"]["remote"]["decoded_hits"], kItems) << status.dump();
  EXPECT_EQ(status["pipeline"]["remote"]["corrupt"], kItems);
  EXPECT_EQ(status["pipeline"]["file_reads"], kItems);
}

// The clone attack: a user who may `stat` another user's private files but
// not read them (0600 files in 0755 folders) makes files with the same
// names, sizes and modification times (to the nanosecond) under a root of
// their own, filled with a JPEG of their own, and reads them through a node
// whose remote tier holds the private images' pixels. The remote tier's key
// binds each file's absolute path, change time and inode, which the clone
// cannot reproduce: the other user gets their own pixels, and the node finds
// nothing of the private set in the remote tier. A node that reads the
// private set at its own path still shares it.
TEST_F(RemoteTierTest, AMetadataCloneOfAnotherUsersFilesGetsNoneOfTheirPixels) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as a second user";
  const std::vector<std::string> relative = testing::MakeFilesPrivate(tmp_.path(), data_);
  ASSERT_EQ(relative.size(), size_t{kItems});
  auto node1 =
      StartNode("node1", "64MiB", {"--remote-cache-form", "decoded", "--socket-mode", "0666"});
  const Samples private_samples = RunEpoch(*node1);
  ASSERT_TRUE(WaitForWrites(*node1, kItems));
  auto node2 =
      StartNode("node2", "64MiB", {"--remote-cache-form", "decoded", "--socket-mode", "0666"});
  // The other user's folder under the allowed root.
  const std::filesystem::path clone = tmp_.path() / "clone";
  const testing::Outcome attack =
      testing::ReadAMetadataCloneAsNobody({.data = data_,
                                           .relative = relative,
                                           .clone = clone,
                                           .socket = node2->socket(),
                                           .spec = EpochSpec(clone),
                                           .private_samples = &private_samples});
  ASSERT_EQ(attack.code, 0) << attack.message;
  // served, the private set's pixels, the clone's own grey
  EXPECT_EQ(attack.message, std::to_string(kItems) + " 0 " + std::to_string(kItems));
  EXPECT_EQ(Remote(*node2)["decoded_hits"].get<uint64_t>(), 0u);
  EXPECT_EQ(Remote(*node2)["encoded_hits"].get<uint64_t>(), 0u);
  EXPECT_EQ(FileReads(*node2), uint64_t{kItems});

  // The private set at its own path, on a third node: every item from the
  // remote tier, no file read.
  auto node3 = StartNode("node3", "64MiB", {"--remote-cache-form", "decoded"});
  EXPECT_EQ(RunEpoch(*node3), private_samples);
  EXPECT_EQ(FileReads(*node3), 0u);
  EXPECT_EQ(Remote(*node3)["decoded_hits"].get<uint64_t>(), uint64_t{kItems});
}

TEST_F(RemoteTierTest, BadCredentialsAreRefusedWithAClearMessage) {
  const auto wrong = tmp_.path() / "wrong.toml";
  testing::WriteCredentialsFile(wrong, kUser, "not-the-password", kMacKey);
  auto refused = RunToExit(wrong);
  EXPECT_EQ(refused.code, 2) << refused.err;
  EXPECT_NE(refused.err.find("refused user 'galley'"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find(wrong.string()), std::string::npos) << refused.err;

  // Without a key to sign values, or with one too short to be a secret,
  // galleyd does not start, and says how to make one.
  const auto keyless = tmp_.path() / "keyless.toml";
  testing::WriteCredentialsFile(keyless, kUser, kPassword, "");
  auto no_key = RunToExit(keyless);
  EXPECT_EQ(no_key.code, 2) << no_key.err;
  EXPECT_NE(no_key.err.find("needs mac_key"), std::string::npos) << no_key.err;
  EXPECT_NE(no_key.err.find("openssl rand -hex 32"), std::string::npos) << no_key.err;
  testing::WriteCredentialsFile(keyless, kUser, kPassword, "00112233445566778899aabbccddeeff");
  auto short_key = RunToExit(keyless);
  EXPECT_EQ(short_key.code, 2) << short_key.err;
  EXPECT_NE(short_key.err.find("mac_key has 16 bytes, fewer than the 32 needed"), std::string::npos)
      << short_key.err;

  // A secret other users could read is refused before any server is asked.
  ::chmod(credentials_.c_str(), 0640);
  auto exposed = RunToExit(credentials_);
  EXPECT_EQ(exposed.code, 2) << exposed.err;
  EXPECT_NE(exposed.err.find("chmod 600"), std::string::npos) << exposed.err;
}

}  // namespace
}  // namespace galley
