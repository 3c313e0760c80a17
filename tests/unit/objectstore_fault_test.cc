// S3Client when the store misbehaves: a FaultProxy in front of a real
// `rclone serve s3` answers chosen requests with a 503 SlowDown, a reset in
// the middle of a body, a whole object for a range, a redirect, a wrong
// Content-Range, silence; a port where nothing listens stays down; a 503
// or 429 with Retry-After waits as long as it asks, up to the cap. Each
// failure is retried or refused as docs/datasets.md says, counted, and
// never hangs.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "galley/objectstore/s3_client.h"
#include "tests/unit/fault_proxy.h"
#include "tests/unit/rclone_s3_server.h"

namespace galley::objectstore {
namespace {

using testing::FaultProxy;
using testing::PseudoRandomBytes;
using testing::RcloneS3Server;
using testing::RefusingPort;

std::string AsString(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

const char kSlowDown[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code><Message>Please "
    "reduce your request rate.</Message></Error>";

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    object_ = PseudoRandomBytes(256 << 10, 11);
    server_.Put("data", "shard.tar", object_);
    const Status started = server_.Start();
    ASSERT_TRUE(started.ok()) << started.ToString();
    proxy_ = std::make_unique<FaultProxy>(server_.port());
    access_ = server_.access();
    access_.endpoint.url = proxy_->url();
    options_.allowed_endpoints = {proxy_->url()};
    // Short backoffs keep the test quick; what it checks is the count.
    options_.backoff_base = std::chrono::milliseconds(1);
    options_.backoff_cap = std::chrono::milliseconds(5);
    Open();
  }

  void Open() {
    Result<std::unique_ptr<ObjectStore>> store = OpenS3Client(options_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }

  RcloneS3Server server_;
  std::unique_ptr<FaultProxy> proxy_;
  S3ClientOptions options_;
  Access access_;
  std::unique_ptr<ObjectStore> store_;
  std::string object_;
};

TEST_F(FaultTest, SlowDownIsRetriedAndCounted) {
  const std::string slow_down =
      FaultProxy::HttpReply(503, "Slow Down", {"Content-Type: application/xml"}, kSlowDown);
  proxy_->Push(FaultProxy::Reply(slow_down));
  proxy_->Push(FaultProxy::Reply(slow_down));
  Result<std::vector<uint8_t>> got = store_->Get(access_, "data", "shard.tar", 1000, 4000, "");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(AsString(*got), object_.substr(1000, 4000));
  EXPECT_EQ(store_->counters().gets.load(), 3u);
  EXPECT_EQ(store_->counters().retries.load(), 2u);
  EXPECT_EQ(store_->counters().failures.load(), 0u);
  EXPECT_EQ(proxy_->RequestHeads().size(), 3u);

  // HEAD and listings are retried the same way.
  proxy_->Push(FaultProxy::Reply(slow_down));
  Result<ObjectInfo> head = store_->Head(access_, "data", "shard.tar");
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->size, object_.size());
  proxy_->Push(FaultProxy::Reply(slow_down));
  size_t listed = 0;
  ASSERT_TRUE(store_
                  ->List(access_, "data", "",
                         [&](const ObjectInfo&) {
                           ++listed;
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(listed, 1u);
  EXPECT_EQ(store_->counters().retries.load(), 4u);
}

TEST_F(FaultTest, SlowDownWithRetryAfterIsTriedAgainNoSoonerThanItAsks) {
  // The backoff alone would wait at most 5 ms; the store asks for 1 s, and
  // the cap (2 s) allows it.
  options_.backoff_cap = std::chrono::milliseconds(2000);
  Open();
  for (const char* status : {"503 Slow Down", "429 Too Many Requests"}) {
    const int code = std::atoi(status);
    proxy_->Push(FaultProxy::Reply(FaultProxy::HttpReply(
        code, status + 4, {"Content-Type: application/xml", "Retry-After: 1"}, kSlowDown)));
    const uint64_t retries = store_->counters().retries.load();
    const auto sent = std::chrono::steady_clock::now();
    Result<std::vector<uint8_t>> got = store_->Get(access_, "data", "shard.tar", 0, 100, "");
    // A lower bound only: a loaded machine makes it later, never sooner.
    const auto waited = std::chrono::steady_clock::now() - sent;
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(AsString(*got), object_.substr(0, 100));
    EXPECT_GE(waited, std::chrono::seconds(1)) << status;
    EXPECT_EQ(store_->counters().retries.load() - retries, 1u) << status;
  }
  // Asked for more than the cap, it is tried again at the cap: a HEAD the
  // store asks to wait a day for still succeeds, after one retry.
  options_.backoff_cap = std::chrono::milliseconds(50);
  Open();
  proxy_->Push(FaultProxy::Reply(FaultProxy::HttpReply(
      503, "Slow Down", {"Content-Type: application/xml", "Retry-After: 86400"}, kSlowDown)));
  Result<ObjectInfo> head = store_->Head(access_, "data", "shard.tar");
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(store_->counters().retries.load(), 1u);
}

TEST_F(FaultTest, ResetInTheMiddleOfABodyIsRetried) {
  // The reply's head and part of its body, then a reset.
  proxy_->Push(FaultProxy::ResetAfter(2000));
  Result<std::vector<uint8_t>> got = store_->Get(access_, "data", "shard.tar", 0, 100000, "");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(AsString(*got), object_.substr(0, 100000));
  EXPECT_EQ(store_->counters().retries.load(), 1u);
  EXPECT_EQ(store_->counters().gets.load(), 2u);
}

TEST_F(FaultTest, StreamGoesOnFromTheByteReachedAfterAReset) {
  proxy_->Push(FaultProxy::ResetAfter(50000));
  std::string streamed;
  Status status = store_->Stream(access_, "data", "shard.tar", "", [&](std::span<const uint8_t> b) {
    streamed.append(b.begin(), b.end());
    return Status::Ok();
  });
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(streamed.size(), object_.size());
  EXPECT_TRUE(streamed == object_);
  EXPECT_EQ(store_->counters().retries.load(), 1u);
  const std::vector<std::string> heads = proxy_->RequestHeads();
  ASSERT_EQ(heads.size(), 2u);
  EXPECT_EQ(heads[0].find("Range:"), std::string::npos) << heads[0];
  // The second asks for the rest, of the version the first one read.
  const size_t range_at = heads[1].find("Range: bytes=");
  ASSERT_NE(range_at, std::string::npos) << heads[1];
  const uint64_t resumed_at = std::stoull(heads[1].substr(range_at + 13));
  EXPECT_GT(resumed_at, 0u);
  EXPECT_LT(resumed_at, 50000u);
  EXPECT_NE(heads[1].find("If-Match: \""), std::string::npos) << heads[1];
}

TEST_F(FaultTest, StoreThatStaysDownIsUnavailableAfterBoundedRetries) {
  RefusingPort down;
  options_.allowed_endpoints = {down.url()};
  options_.max_retries = 3;
  Open();
  Access access = access_;
  access.endpoint.url = down.url();
  Result<std::vector<uint8_t>> got = store_->Get(access, "data", "shard.tar", 0, 10, "");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable) << got.status().ToString();
  EXPECT_NE(got.status().message().find("gave up after 4 tries"), std::string::npos)
      << got.status().message();
  EXPECT_EQ(store_->counters().gets.load(), 4u);
  EXPECT_EQ(store_->counters().retries.load(), 3u);
  EXPECT_EQ(store_->counters().failures.load(), 1u);
  EXPECT_EQ(store_->counters().in_flight.load(), 0u);

  // A store that keeps answering 503 is as down.
  proxy_->SetFallback(FaultProxy::Reply(
      FaultProxy::HttpReply(503, "Slow Down", {"Content-Type: application/xml"}, kSlowDown)));
  options_.allowed_endpoints = {proxy_->url()};
  Open();
  Result<ObjectInfo> head = store_->Head(access_, "data", "shard.tar");
  ASSERT_FALSE(head.ok());
  EXPECT_EQ(head.status().code(), StatusCode::kUnavailable) << head.status().ToString();
  EXPECT_EQ(store_->counters().heads.load(), 4u);
  Status stream = store_->Stream(access_, "data", "shard.tar", "",
                                 [](std::span<const uint8_t>) { return Status::Ok(); });
  EXPECT_EQ(stream.code(), StatusCode::kUnavailable) << stream.ToString();
  EXPECT_NE(stream.message().find("SlowDown"), std::string::npos) << stream.message();
}

TEST_F(FaultTest, StalledTransferTimesOutAndIsRetried) {
  options_.low_speed_time = std::chrono::seconds(1);
  options_.low_speed_bytes = 1;
  Open();
  proxy_->Push(FaultProxy::Stall());
  Result<std::vector<uint8_t>> got = store_->Get(access_, "data", "shard.tar", 10, 10, "");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(AsString(*got), object_.substr(10, 10));
  EXPECT_EQ(store_->counters().retries.load(), 1u);
}

TEST_F(FaultTest, WholeObjectForARangedGetIsCutToTheRange) {
  proxy_->Push(FaultProxy::Reply(FaultProxy::HttpReply(200, "OK", {}, object_)));
  Result<std::vector<uint8_t>> got = store_->Get(access_, "data", "shard.tar", 5000, 300, "");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(AsString(*got), object_.substr(5000, 300));
  EXPECT_EQ(store_->counters().full_bodies.load(), 1u);
  EXPECT_EQ(store_->counters().retries.load(), 0u);

  // To the end of the object, from a whole-object reply.
  proxy_->Push(FaultProxy::Reply(FaultProxy::HttpReply(200, "OK", {}, object_)));
  Result<std::vector<uint8_t>> tail = store_->Get(access_, "data", "shard.tar", 200000, 0, "");
  ASSERT_TRUE(tail.ok()) << tail.status().ToString();
  EXPECT_EQ(AsString(*tail), object_.substr(200000));
  EXPECT_EQ(store_->counters().full_bodies.load(), 2u);

  // The store still works after the connection cut short.
  Result<std::vector<uint8_t>> after = store_->Get(access_, "data", "shard.tar", 7, 7, "");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(AsString(*after), object_.substr(7, 7));
}

TEST_F(FaultTest, RedirectIsNotFollowed) {
  proxy_->Push(FaultProxy::Reply(
      FaultProxy::HttpReply(301, "Moved Permanently",
                            {"Location: " + server_.url() + "/data/shard.tar?X-Amz-Signature=s"},
                            "<Error><Code>PermanentRedirect</Code></Error>")));
  Result<std::vector<uint8_t>> got = store_->Get(access_, "data", "shard.tar", 0, 10, "");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << got.status().ToString();
  EXPECT_NE(got.status().message().find("redirect"), std::string::npos) << got.status().message();
  EXPECT_NE(got.status().message().find(proxy_->url()), std::string::npos);
  EXPECT_NE(got.status().message().find("PermanentRedirect"), std::string::npos);
  EXPECT_EQ(got.status().message().find("X-Amz-Signature"), std::string::npos);
  EXPECT_EQ(proxy_->RequestHeads().size(), 1u);
  EXPECT_EQ(store_->counters().gets.load(), 1u);
}

TEST_F(FaultTest, WrongContentRangeOrLongerBodyIsProtocolError) {
  proxy_->Push(FaultProxy::Reply(FaultProxy::HttpReply(
      206, "Partial Content", {"Content-Range: bytes 0-9/262144"}, object_.substr(0, 10))));
  Result<std::vector<uint8_t>> shifted = store_->Get(access_, "data", "shard.tar", 50, 10, "");
  ASSERT_FALSE(shifted.ok());
  EXPECT_EQ(shifted.status().code(), StatusCode::kProtocolError) << shifted.status().ToString();

  proxy_->Push(FaultProxy::Reply(FaultProxy::HttpReply(
      206, "Partial Content", {"Content-Range: bytes 50-59/262144"}, object_.substr(50, 5000))));
  Result<std::vector<uint8_t>> longer = store_->Get(access_, "data", "shard.tar", 50, 10, "");
  ASSERT_FALSE(longer.ok());
  EXPECT_EQ(longer.status().code(), StatusCode::kProtocolError) << longer.status().ToString();

  proxy_->Push(FaultProxy::Reply(
      FaultProxy::HttpReply(200, "OK", {"Content-Type: application/xml"}, "<not-a-listing/>")));
  Status list = store_->List(access_, "data", "", [](const ObjectInfo&) { return Status::Ok(); });
  EXPECT_EQ(list.code(), StatusCode::kProtocolError) << list.ToString();
  EXPECT_EQ(store_->counters().retries.load(), 0u);
}

// Whatever bytes come back, each call answers once, in bounded time, and
// never with more than it asked. A deterministic fuzz run through libcurl:
// each reply is a real one mutated, sent, and its connection closed.
TEST_F(FaultTest, MutatedRepliesAreAnsweredWithoutCrashOrHang) {
  options_.max_retries = 0;
  Open();
  const std::string listing =
      "<?xml version=\"1.0\"?><ListBucketResult><IsTruncated>false</IsTruncated><Contents>"
      "<Key>shard.tar</Key><Size>262144</Size><ETag>\"e\"</ETag></Contents></ListBucketResult>";
  const std::vector<std::string> seeds = {
      FaultProxy::HttpReply(200, "OK", {"Content-Range: bytes 100-199/262144", "ETag: \"e\""},
                            object_.substr(100, 100)),
      FaultProxy::HttpReply(206, "Partial Content", {"Content-Range: bytes 100-199/262144"},
                            object_.substr(100, 100)),
      FaultProxy::HttpReply(200, "OK", {}, object_.substr(0, 1000)),
      FaultProxy::HttpReply(404, "Not Found", {}, "<Error><Code>NoSuchKey</Code></Error>"),
      FaultProxy::HttpReply(200, "OK", {"Content-Type: application/xml"}, listing),
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n64\r\n" + object_.substr(100, 100) +
          "\r\n0\r\n\r\n",
  };
  std::mt19937_64 draw(42);
  for (int round = 0; round < 150; ++round) {
    std::string reply = seeds[draw() % seeds.size()];
    const int mutations = static_cast<int>(draw() % 6);
    for (int i = 0; i < mutations && !reply.empty(); ++i) {
      const size_t at = draw() % reply.size();
      switch (draw() % 4) {
        case 0:
          reply[at] = static_cast<char>(draw());
          break;
        case 1:
          reply.erase(at, 1 + draw() % 32);
          break;
        case 2:
          reply.insert(at, reply.substr(at, 1 + draw() % 64));
          break;
        case 3:
          reply.resize(at);
          break;
      }
    }
    proxy_->Push(FaultProxy::ReplyThenClose(reply));
    switch (round % 3) {
      case 0: {
        Result<std::vector<uint8_t>> got = store_->Get(access_, "data", "shard.tar", 100, 100, "");
        if (got.ok()) {
          ASSERT_EQ(got->size(), 100u);
        }
        break;
      }
      case 1:
        (void)store_->Head(access_, "data", "shard.tar");
        break;
      case 2:
        (void)store_->List(access_, "data", "", [](const ObjectInfo&) { return Status::Ok(); });
        break;
    }
  }
  EXPECT_EQ(store_->counters().in_flight.load(), 0u);
  // The store is still whole.
  Result<std::vector<uint8_t>> after = store_->Get(access_, "data", "shard.tar", 3, 3, "");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(AsString(*after), object_.substr(3, 3));
}

TEST_F(FaultTest, ClosingAnswersEveryRequestStillWaiting) {
  options_.max_in_flight = 1;
  Open();
  proxy_->SetFallback(FaultProxy::Stall());
  std::atomic<int> answered{0};
  std::atomic<int> cancelled{0};
  for (int i = 0; i < 5; ++i) {
    store_->GetAsync(access_, "data", "shard.tar", 0, 10, "", [&](Result<std::vector<uint8_t>> r) {
      if (r.status().code() == StatusCode::kCancelled) ++cancelled;
      ++answered;
    });
  }
  store_.reset();
  EXPECT_EQ(answered.load(), 5);
  EXPECT_EQ(cancelled.load(), 5);
}

}  // namespace
}  // namespace galley::objectstore
