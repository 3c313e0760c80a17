// S3Client against a real S3 server: `rclone serve s3` over a temporary
// folder (tests/unit/rclone_s3_server.h). Whole and ranged GETs, HEAD, paged
// listings, versions, credentials, the allowlist and many GETs in flight;
// https with a certificate made at run time, trusted only through the CA
// file.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "galley/mutex.h"
#include "galley/objectstore/s3_client.h"
#include "tests/unit/fault_proxy.h"
#include "tests/unit/rclone_s3_server.h"

namespace galley::objectstore {
namespace {

using testing::FaultProxy;
using testing::PseudoRandomBytes;
using testing::RcloneS3Server;

std::string AsString(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

std::unique_ptr<ObjectStore> OpenStore(S3ClientOptions options) {
  Result<std::unique_ptr<ObjectStore>> store = OpenS3Client(options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

class RcloneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    object_ = PseudoRandomBytes(1 << 20, 7);
    server_.Put("data", "shards/shard-000.tar", object_);
    server_.Put("data", "a b+c%/ünï=&?.bin", "odd key");
    const Status started = server_.Start();
    ASSERT_TRUE(started.ok()) << started.ToString();
    options_.allowed_endpoints = {server_.url()};
    options_.backoff_base = std::chrono::milliseconds(1);
    options_.backoff_cap = std::chrono::milliseconds(10);
    store_ = OpenStore(options_);
    ASSERT_NE(store_, nullptr);
  }

  RcloneS3Server server_;
  S3ClientOptions options_;
  std::unique_ptr<ObjectStore> store_;
  std::string object_;
};

TEST_F(RcloneTest, GetsWholeAndRangedObjects) {
  Result<std::vector<uint8_t>> whole =
      store_->Get(server_.access(), "data", "shards/shard-000.tar", 0, 0, "");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString() << "\n" << server_.Log();
  EXPECT_EQ(AsString(*whole), object_);

  Result<std::vector<uint8_t>> ranged =
      store_->Get(server_.access(), "data", "shards/shard-000.tar", 12345, 100000, "");
  ASSERT_TRUE(ranged.ok()) << ranged.status().ToString();
  EXPECT_EQ(AsString(*ranged), object_.substr(12345, 100000));

  Result<std::vector<uint8_t>> tail =
      store_->Get(server_.access(), "data", "shards/shard-000.tar", object_.size() - 10, 0, "");
  ASSERT_TRUE(tail.ok()) << tail.status().ToString();
  EXPECT_EQ(AsString(*tail), object_.substr(object_.size() - 10));

  // A key with spaces, '+', '%', '=', '&', '?' and UTF-8, signed as sent.
  Result<std::vector<uint8_t>> odd =
      store_->Get(server_.access(), "data", "a b+c%/ünï=&?.bin", 0, 0, "");
  ASSERT_TRUE(odd.ok()) << odd.status().ToString();
  EXPECT_EQ(AsString(*odd), "odd key");

  EXPECT_EQ(store_->counters().gets.load(), 4u);
  EXPECT_EQ(store_->counters().retries.load(), 0u);
  EXPECT_EQ(store_->counters().failures.load(), 0u);
  EXPECT_EQ(store_->counters().bytes.load(), object_.size() + 100000 + 10 + 7);
}

TEST_F(RcloneTest, ReadingPastTheEndIsDataLoss) {
  // The range runs past the end: rclone answers the bytes there are.
  Result<std::vector<uint8_t>> over =
      store_->Get(server_.access(), "data", "shards/shard-000.tar", object_.size() - 10, 100, "");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kDataLoss) << over.status().ToString();
  // It starts past the end: 416.
  Result<std::vector<uint8_t>> beyond =
      store_->Get(server_.access(), "data", "shards/shard-000.tar", object_.size() + 10, 100, "");
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(beyond.status().code(), StatusCode::kDataLoss) << beyond.status().ToString();
}

TEST_F(RcloneTest, HeadGivesSizeAndEtagThatListingAgreesWith) {
  Result<ObjectInfo> info = store_->Head(server_.access(), "data", "shards/shard-000.tar");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, object_.size());
  EXPECT_EQ(info->key, "shards/shard-000.tar");
  ASSERT_FALSE(info->etag.empty());
  EXPECT_EQ(info->etag.find('"'), std::string::npos);
  std::string listed_etag;
  ASSERT_TRUE(store_
                  ->List(server_.access(), "data", "shards/",
                         [&](const ObjectInfo& object) {
                           listed_etag = object.etag;
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(listed_etag, info->etag);
  EXPECT_EQ(store_->counters().heads.load(), 1u);

  Result<std::vector<uint8_t>> pinned =
      store_->Get(server_.access(), "data", "shards/shard-000.tar", 0, 16, info->etag);
  ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
  EXPECT_EQ(AsString(*pinned), object_.substr(0, 16));
}

TEST(RcloneListingTest, ListsEveryPageThroughContinuationTokens) {
  RcloneS3Server server;
  std::map<std::string, size_t> written;
  for (int i = 0; i < 25; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "many/item-%03d", i);
    written[name] = 100 + i;
    server.Put("data", name, PseudoRandomBytes(100 + i, i));
  }
  server.Put("data", "other/x", "not listed");
  const Status started = server.Start();
  ASSERT_TRUE(started.ok()) << started.ToString();
  S3ClientOptions options;
  options.allowed_endpoints = {server.url()};
  options.list_page_keys = 4;
  std::unique_ptr<ObjectStore> store = OpenStore(options);
  ASSERT_NE(store, nullptr);

  std::vector<std::string> keys;
  Status listed = store->List(server.access(), "data", "many/", [&](const ObjectInfo& object) {
    EXPECT_EQ(object.size, written[object.key]) << object.key;
    EXPECT_FALSE(object.etag.empty());
    keys.push_back(object.key);
    return Status::Ok();
  });
  ASSERT_TRUE(listed.ok()) << listed.ToString() << "\n" << server.Log();
  std::vector<std::string> expected;
  for (const auto& [key, size] : written) expected.push_back(key);
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(store->counters().lists.load(), 7u);  // 25 keys, 4 a page

  // An error from `each` ends the listing with it.
  size_t seen = 0;
  Status stopped = store->List(server.access(), "data", "many/", [&](const ObjectInfo&) {
    return ++seen == 6 ? Status::Cancelled("enough") : Status::Ok();
  });
  EXPECT_EQ(stopped.code(), StatusCode::kCancelled);
  EXPECT_EQ(seen, 6u);

  size_t none = 0;
  ASSERT_TRUE(store
                  ->List(server.access(), "data", "absent/",
                         [&](const ObjectInfo&) {
                           ++none;
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(none, 0u);
}

TEST_F(RcloneTest, AnotherVersionIsDataLoss) {
  // rclone ignores If-Match; the reply's ETag still tells the version.
  Result<std::vector<uint8_t>> stale = store_->Get(server_.access(), "data", "shards/shard-000.tar",
                                                   0, 100, "0123456789abcdef0123456789abcdef");
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), StatusCode::kDataLoss) << stale.status().ToString();
  EXPECT_NE(stale.status().message().find("s3://data/shards/shard-000.tar"), std::string::npos)
      << stale.status().message();
  EXPECT_NE(stale.status().message().find("changed"), std::string::npos);
}

TEST_F(RcloneTest, WrongSecretIsPermissionDeniedWithoutTheCredentials) {
  Access wrong = server_.access();
  wrong.credentials.secret_access_key = "not-the-secret-XYZZY";
  Result<std::vector<uint8_t>> refused =
      store_->Get(wrong, "data", "shards/shard-000.tar", 0, 100, "");
  ASSERT_FALSE(refused.ok());
  const Status& status = refused.status();
  EXPECT_EQ(status.code(), StatusCode::kPermissionDenied) << status.ToString();
  EXPECT_NE(status.message().find("SignatureDoesNotMatch"), std::string::npos) << status.message();
  EXPECT_EQ(status.message().find("not-the-secret-XYZZY"), std::string::npos);
  EXPECT_EQ(status.message().find(RcloneS3Server::kSecret), std::string::npos);
  EXPECT_EQ(status.message().find(RcloneS3Server::kAccessKey), std::string::npos);
  EXPECT_EQ(store_->counters().retries.load(), 0u);  // 403 is not retried

  Access unknown = server_.access();
  unknown.credentials.access_key_id = "SOMEONEELSE";
  Result<ObjectInfo> head = store_->Head(unknown, "data", "shards/shard-000.tar");
  ASSERT_FALSE(head.ok());
  EXPECT_EQ(head.status().code(), StatusCode::kPermissionDenied) << head.status().ToString();
  Status list = store_->List(unknown, "data", "", [](const ObjectInfo&) { return Status::Ok(); });
  EXPECT_EQ(list.code(), StatusCode::kPermissionDenied) << list.ToString();
}

TEST_F(RcloneTest, MissingObjectOrBucketIsNotFound) {
  Result<std::vector<uint8_t>> missing = store_->Get(server_.access(), "data", "nope", 0, 0, "");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();
  EXPECT_NE(missing.status().message().find("NoSuchKey"), std::string::npos);
  Result<ObjectInfo> head = store_->Head(server_.access(), "data", "nope");
  EXPECT_EQ(head.status().code(), StatusCode::kNotFound) << head.status().ToString();
  Status list = store_->List(server_.access(), "no-bucket", "",
                             [](const ObjectInfo&) { return Status::Ok(); });
  EXPECT_EQ(list.code(), StatusCode::kNotFound) << list.ToString();
  EXPECT_EQ(store_->counters().retries.load(), 0u);
  EXPECT_EQ(store_->counters().failures.load(), 3u);
}

TEST_F(RcloneTest, TwoHundredGetsInFlightAllCompleteWithTheirBytes) {
  constexpr int kGets = 200;
  constexpr uint64_t kLength = 5000;
  Mutex mu;
  CondVar all_done;
  int done = 0;
  std::vector<std::string> got(kGets);
  std::vector<Status> failures;
  for (int i = 0; i < kGets; ++i) {
    const uint64_t offset = static_cast<uint64_t>(i) * 5003;
    store_->GetAsync(server_.access(), "data", "shards/shard-000.tar", offset, kLength, "",
                     [&, i](Result<std::vector<uint8_t>> result) {
                       MutexLock lock(&mu);
                       if (result.ok()) {
                         got[i] = AsString(*result);
                       } else {
                         failures.push_back(result.status());
                       }
                       if (++done == kGets) all_done.SignalAll();
                     });
  }
  {
    MutexLock lock(&mu);
    while (done < kGets) all_done.Wait(&mu);
    for (const Status& failure : failures) ADD_FAILURE() << failure.ToString();
  }
  for (int i = 0; i < kGets; ++i) {
    EXPECT_EQ(got[i], object_.substr(static_cast<size_t>(i) * 5003, kLength)) << i;
  }
  EXPECT_EQ(store_->counters().gets.load(), static_cast<uint64_t>(kGets));
  EXPECT_EQ(store_->counters().in_flight.load(), 0u);
  EXPECT_EQ(store_->counters().bytes.load(), kGets * kLength);
}

TEST_F(RcloneTest, StreamsAWholeObjectInOrder) {
  std::string streamed;
  size_t chunks = 0;
  Status status = store_->Stream(server_.access(), "data", "shards/shard-000.tar", "",
                                 [&](std::span<const uint8_t> bytes) {
                                   streamed.append(bytes.begin(), bytes.end());
                                   ++chunks;
                                   return Status::Ok();
                                 });
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(streamed, object_);
  EXPECT_GT(chunks, 1u);
  // An error from `chunk` ends it with that error.
  Status stopped =
      store_->Stream(server_.access(), "data", "shards/shard-000.tar", "",
                     [](std::span<const uint8_t>) { return Status::Cancelled("stop"); });
  EXPECT_EQ(stopped.code(), StatusCode::kCancelled);
  EXPECT_EQ(stopped.message(), "stop");
}

TEST_F(RcloneTest, EndpointOutsideTheAllowlistIsRefusedBeforeAnyRequest) {
  FaultProxy proxy(server_.port());  // would pass anything on to rclone
  Access elsewhere = server_.access();
  elsewhere.endpoint.url = proxy.url();
  Result<std::vector<uint8_t>> get =
      store_->Get(elsewhere, "data", "shards/shard-000.tar", 0, 1, "");
  ASSERT_FALSE(get.ok());
  EXPECT_EQ(get.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(get.status().message().find("allowed_s3_endpoints"), std::string::npos)
      << get.status().message();
  EXPECT_EQ(store_->Head(elsewhere, "data", "x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      store_->List(elsewhere, "data", "", [](const ObjectInfo&) { return Status::Ok(); }).code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(store_
                ->Stream(elsewhere, "data", "x", "",
                         [](std::span<const uint8_t>) { return Status::Ok(); })
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(proxy.RequestHeads().empty());
  EXPECT_EQ(store_->counters().gets.load() + store_->counters().heads.load() +
                store_->counters().lists.load(),
            0u);

  // With no allowlist only AWS's own endpoints are allowed.
  std::unique_ptr<ObjectStore> aws_only = OpenStore(S3ClientOptions());
  ASSERT_NE(aws_only, nullptr);
  Result<std::vector<uint8_t>> local = aws_only->Get(server_.access(), "data", "x", 0, 1, "");
  EXPECT_EQ(local.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(aws_only->counters().gets.load(), 0u);

  // An IP address has no bucket host names.
  Access virtual_host = server_.access();
  virtual_host.endpoint.path_style = false;
  Result<std::vector<uint8_t>> vhost = store_->Get(virtual_host, "data", "x", 0, 1, "");
  EXPECT_EQ(vhost.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(vhost.status().message().find("path-style"), std::string::npos);
}

TEST_F(RcloneTest, SessionTokenIsSentAndSigned) {
  FaultProxy proxy(server_.port());
  S3ClientOptions options = options_;
  options.allowed_endpoints = {proxy.url()};
  std::unique_ptr<ObjectStore> store = OpenStore(options);
  ASSERT_NE(store, nullptr);
  Access access = server_.access();
  access.endpoint.url = proxy.url();
  access.credentials.session_token = "FwoGZXIvYXdzEXAMPLETOKEN";
  Result<std::vector<uint8_t>> got = store->Get(access, "data", "shards/shard-000.tar", 0, 10, "");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(AsString(*got), object_.substr(0, 10));
  const std::vector<std::string> heads = proxy.RequestHeads();
  ASSERT_EQ(heads.size(), 1u);
  const std::string& head = heads[0];
  EXPECT_NE(head.find("x-amz-security-token: FwoGZXIvYXdzEXAMPLETOKEN\r\n"), std::string::npos)
      << head;
  EXPECT_NE(head.find("x-amz-content-sha256: UNSIGNED-PAYLOAD\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("X-Amz-Date: "), std::string::npos) << head;
  // Every x-amz-* header is among the signed ones (rclone refuses others).
  const size_t signed_at = head.find("SignedHeaders=");
  ASSERT_NE(signed_at, std::string::npos) << head;
  const std::string signed_headers = head.substr(signed_at, head.find(',', signed_at) - signed_at);
  for (const char* name :
       {"host", "range", "x-amz-content-sha256", "x-amz-date", "x-amz-security-token"}) {
    EXPECT_NE(signed_headers.find(name), std::string::npos) << name << " in " << signed_headers;
  }
  EXPECT_NE(head.find("Credential=" + std::string(RcloneS3Server::kAccessKey) + "/"),
            std::string::npos);
  EXPECT_EQ(head.find(RcloneS3Server::kSecret), std::string::npos);
}

TEST(RcloneVirtualHostTest, BucketAsHostNameLabel) {
  RcloneS3Server server;
  server.Put("vbucket", "dir/key.bin", "virtual host");
  const Status started = server.Start({"--force-path-style=false"});
  ASSERT_TRUE(started.ok()) << started.ToString();
  // curl resolves every *.localhost name to the loopback address.
  const std::string endpoint = "http://localhost:" + std::to_string(server.port());
  S3ClientOptions options;
  options.allowed_endpoints = {endpoint};
  std::unique_ptr<ObjectStore> store = OpenStore(options);
  ASSERT_NE(store, nullptr);
  Access access = server.access();
  access.endpoint.url = endpoint;
  access.endpoint.path_style = false;
  Result<std::vector<uint8_t>> got = store->Get(access, "vbucket", "dir/key.bin", 0, 0, "");
  ASSERT_TRUE(got.ok()) << got.status().ToString() << "\n" << server.Log();
  EXPECT_EQ(AsString(*got), "virtual host");
  std::vector<std::string> keys;
  ASSERT_TRUE(store
                  ->List(access, "vbucket", "",
                         [&](const ObjectInfo& object) {
                           keys.push_back(object.key);
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(keys, std::vector<std::string>{"dir/key.bin"});
}

// A certificate for 127.0.0.1 and its key, made at run time by openssl
// under `folder`: cert.pem (self-signed, so it is its own CA) and key.pem.
Status MakeCertificate(const std::filesystem::path& folder) {
  std::filesystem::create_directories(folder);
  const std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 "
      "-addext subjectAltName=IP:127.0.0.1 -keyout '" +
      (folder / "key.pem").string() + "' -out '" + (folder / "cert.pem").string() + "' >'" +
      (folder / "openssl.log").string() + "' 2>&1";
  if (std::system(command.c_str()) != 0) {
    return Status::Unavailable("openssl could not make a test certificate: " + command);
  }
  return Status::Ok();
}

TEST(RcloneHttpsTest, AnEndpointWhoseCertificateChainsToTheCaFileIsRead) {
  RcloneS3Server server;
  server.Put("data", "shard.tar", "over tls");
  const std::filesystem::path tls = server.root() / "tls";
  const Status made = MakeCertificate(tls);
  ASSERT_TRUE(made.ok()) << made.ToString();
  const Status started =
      server.Start({"--cert", (tls / "cert.pem").string(), "--key", (tls / "key.pem").string()});
  ASSERT_TRUE(started.ok()) << started.ToString();
  const std::string endpoint = "https://127.0.0.1:" + std::to_string(server.port());
  Access access = server.access();
  access.endpoint.url = endpoint;
  S3ClientOptions options;
  options.allowed_endpoints = {endpoint};
  options.backoff_base = std::chrono::milliseconds(1);
  options.backoff_cap = std::chrono::milliseconds(10);

  // Trusted through the CA file: read, HEADed and listed.
  options.ca_file = (tls / "cert.pem").string();
  std::unique_ptr<ObjectStore> trusting = OpenStore(options);
  ASSERT_NE(trusting, nullptr);
  Result<std::vector<uint8_t>> got = trusting->Get(access, "data", "shard.tar", 0, 0, "");
  ASSERT_TRUE(got.ok()) << got.status().ToString() << "\n" << server.Log();
  EXPECT_EQ(AsString(*got), "over tls");
  ASSERT_TRUE(trusting->Head(access, "data", "shard.tar").ok());

  // The system's CA store does not know it: refused, never read without
  // verification, and not retried.
  options.ca_file = "";
  std::unique_ptr<ObjectStore> system_store = OpenStore(options);
  ASSERT_NE(system_store, nullptr);
  Result<std::vector<uint8_t>> refused = system_store->Get(access, "data", "shard.tar", 0, 0, "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("the endpoint's TLS certificate is not trusted"),
            std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("s3://data/shard.tar"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(system_store->counters().retries.load(), 0u);
  EXPECT_EQ(system_store->counters().bytes.load(), 0u);

  // A CA file that cannot be read stops the store from opening at all.
  options.ca_file = (tls / "missing.pem").string();
  const Status unreadable = OpenS3Client(options).status();
  EXPECT_EQ(unreadable.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unreadable.message().find("s3_ca_file " + options.ca_file + " cannot be read"),
            std::string::npos)
      << unreadable.message();
}

}  // namespace
}  // namespace galley::objectstore
