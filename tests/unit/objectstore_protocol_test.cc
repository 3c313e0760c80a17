// The S3 protocol pieces without a server (server/objectstore/
// s3_protocol.h): s3:// URLs, endpoints and the allowlist, key and query
// encoding, Content-Range, GET replies against the range asked, error
// mapping and ListObjectsV2 pages; and the client's option checks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "galley/objectstore/s3_client.h"
#include "galley/objectstore/s3_protocol.h"

namespace galley::objectstore {
namespace {

TEST(S3UrlTest, ParsesBucketAndKey) {
  Result<S3Url> url = S3Url::Parse("s3://my-bucket.data/train/shard-0001.tar");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->bucket, "my-bucket.data");
  EXPECT_EQ(url->key, "train/shard-0001.tar");
  EXPECT_EQ(url->ToString(), "s3://my-bucket.data/train/shard-0001.tar");
  Result<S3Url> bucket_only = S3Url::Parse("s3://abc");
  ASSERT_TRUE(bucket_only.ok());
  EXPECT_EQ(bucket_only->key, "");
  Result<S3Url> prefix = S3Url::Parse("s3://abc/train/");
  ASSERT_TRUE(prefix.ok());
  EXPECT_EQ(prefix->key, "train/");
  for (const char* bad : {"http://abc/key", "s3:/abc/key", "s3://ab/key", "s3://Upper/key",
                          "s3://under_score/k", "s3://-dash/k", "s3://dot./k", "s3:///key",
                          "s3://"
                          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}) {
    Result<S3Url> refused = S3Url::Parse(bad);
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(EndpointTest, ParsesSchemeHostAndPort) {
  Result<EndpointUrl> url = ParseEndpointUrl("HTTP://MinIO.Example:9000/");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->scheme, "http");
  EXPECT_EQ(url->host, "minio.example");
  EXPECT_EQ(url->port, 9000);
  EXPECT_EQ(url->ToString(), "http://minio.example:9000");
  Result<EndpointUrl> default_port = ParseEndpointUrl("https://s3.eu-west-1.amazonaws.com:443");
  ASSERT_TRUE(default_port.ok());
  EXPECT_EQ(default_port->ToString(), "https://s3.eu-west-1.amazonaws.com");
  Result<EndpointUrl> v6 = ParseEndpointUrl("http://[::1]:9000");
  ASSERT_TRUE(v6.ok()) << v6.status().ToString();
  EXPECT_TRUE(v6->IsIpLiteral());
  EXPECT_TRUE(ParseEndpointUrl("http://10.0.0.1")->IsIpLiteral());
  EXPECT_FALSE(url->IsIpLiteral());
  for (const char* bad :
       {"ftp://host", "file:///etc/passwd", "host:9000", "http://", "http://user:pw@host",
        "http://host/path", "http://host?x=1", "http://host:0", "http://host:70000",
        "http://host:", "http://[::1", "http://ho st", "gopher://host:70"}) {
    EXPECT_EQ(ParseEndpointUrl(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  // The message names the entry but never a user part's password.
  const Status with_user = ParseEndpointUrl("http://user:hunter2@host").status();
  EXPECT_NE(with_user.message().find("user part"), std::string::npos);
}

TEST(EndpointTest, AllowlistDecidesWhereRequestsGo) {
  Endpoint aws;
  aws.region = "eu-central-1";
  Result<EndpointUrl> resolved = ResolveEndpoint(aws, {});
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  EXPECT_EQ(resolved->ToString(), "https://s3.eu-central-1.amazonaws.com");
  Endpoint explicit_aws{"https://s3.us-west-2.amazonaws.com", "us-west-2", false};
  EXPECT_TRUE(ResolveEndpoint(explicit_aws, {}).ok());

  for (const char* outside :
       {"http://s3.us-west-2.amazonaws.com", "https://s3.evil.example",
        "https://s3.us-west-2.amazonaws.com.evil.example", "https://127.0.0.1:9000",
        "https://s3.us-west-2.amazonaws.com:8443"}) {
    Endpoint endpoint{outside, "us-west-2", true};
    const Status refused = ResolveEndpoint(endpoint, {}).status();
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << outside;
    EXPECT_NE(refused.message().find("allowed_s3_endpoints"), std::string::npos);
  }
  const std::vector<EndpointUrl> allowed = {*ParseEndpointUrl("http://minio.lan:9000")};
  EXPECT_TRUE(ResolveEndpoint({"http://MINIO.lan:9000/", "us-east-1", false}, allowed).ok());
  EXPECT_FALSE(ResolveEndpoint({"http://minio.lan:9001", "us-east-1", false}, allowed).ok());
  EXPECT_FALSE(ResolveEndpoint({"https://minio.lan:9000", "us-east-1", false}, allowed).ok());
  // A list replaces AWS's default.
  EXPECT_FALSE(ResolveEndpoint(aws, allowed).ok());
  // A region that is no region name is refused before it reaches a host name.
  EXPECT_FALSE(ResolveEndpoint({"", "us-east-1.evil.example/x", false}, {}).ok());
  // An IP address has no virtual hosts.
  const std::vector<EndpointUrl> ip = {*ParseEndpointUrl("http://10.1.2.3:9000")};
  EXPECT_FALSE(ResolveEndpoint({"http://10.1.2.3:9000", "us-east-1", false}, ip).ok());
  EXPECT_TRUE(ResolveEndpoint({"http://10.1.2.3:9000", "us-east-1", true}, ip).ok());
}

TEST(UrlTest, EncodesKeysAndQueriesAsSigV4Signs) {
  EXPECT_EQ(UriEncode("a b+c/d~e_f.g-h", true), "a%20b%2Bc/d~e_f.g-h");
  EXPECT_EQ(UriEncode("a/b", false), "a%2Fb");
  EXPECT_EQ(UriEncode("ü=&?%*", true), "%C3%BC%3D%26%3F%25%2A");
  const EndpointUrl endpoint = *ParseEndpointUrl("http://127.0.0.1:9000");
  EXPECT_EQ(ObjectUrl(endpoint, true, "bkt", "dir/a b.tar"),
            "http://127.0.0.1:9000/bkt/dir/a%20b.tar");
  const EndpointUrl aws = *ParseEndpointUrl("https://s3.us-east-1.amazonaws.com");
  EXPECT_EQ(ObjectUrl(aws, false, "bkt", "k"), "https://bkt.s3.us-east-1.amazonaws.com/k");
  // Parameters sorted by name, values encoded ('/' and '=' too).
  EXPECT_EQ(ListUrl(endpoint, true, "bkt", "train/a b", "az+/E=", 1000),
            "http://127.0.0.1:9000/bkt?continuation-token=az%2B%2FE%3D&list-type=2&"
            "max-keys=1000&prefix=train%2Fa%20b");
  EXPECT_EQ(ListUrl(aws, false, "bkt", "", "", 5),
            "https://bkt.s3.us-east-1.amazonaws.com/?list-type=2&max-keys=5&prefix=");
}

TEST(ReplyTest, ParsesHeadersAndContentRange) {
  ReplyHeaders headers;
  headers.AddLine("HTTP/1.1 100 Continue\r\n");
  headers.AddLine("Content-Length: 5\r\n");
  headers.AddLine("HTTP/1.1 206 Partial Content\r\n");  // a new reply starts over
  EXPECT_FALSE(headers.content_length());
  headers.AddLine("content-range:  bytes 10-19/1000 \r\n");
  headers.AddLine("ETag: \"c963c4de\"\r\n");
  headers.AddLine("Content-Length: 10\r\n");
  EXPECT_EQ(headers.content_range(), "bytes 10-19/1000");
  EXPECT_EQ(headers.etag(), "c963c4de");
  EXPECT_EQ(headers.content_length(), 10u);
  const auto range = ParseContentRange(headers.content_range());
  ASSERT_TRUE(range);
  EXPECT_EQ(range->first, 10u);
  EXPECT_EQ(range->last, 19u);
  EXPECT_EQ(range->total, 1000u);
  EXPECT_FALSE(ParseContentRange("bytes 0-9/*")->total);
  for (const char* bad : {"bytes 9-0/10", "bytes 0-10/10", "items 0-1/2", "bytes -1-2/3",
                          "bytes 0-1", "bytes 0-99999999999999999999/1", "bytes a-b/c"}) {
    EXPECT_FALSE(ParseContentRange(bad)) << bad;
  }
  EXPECT_EQ(StripEtag("W/\"x\""), "x");
}

// Feeds `body` to a GetReplyBody in pieces of `piece` bytes.
struct Fed {
  Status begun;
  Status finished;
  std::string kept;
  bool whole_object = false;
};
Fed Feed(uint64_t offset, uint64_t length, long http_status, const std::vector<std::string>& lines,
         const std::string& body, size_t piece = 7) {
  ReplyHeaders headers;
  for (const std::string& line : lines) headers.AddLine(line);
  GetReplyBody reply(offset, length, 1 << 20);
  Fed fed;
  fed.begun = reply.Begin(http_status, headers);
  const GetReplyBody::Sink sink = [&fed](std::span<const uint8_t> bytes) {
    fed.kept.append(bytes.begin(), bytes.end());
    return Status::Ok();
  };
  if (fed.begun.ok()) {
    for (size_t at = 0; at < body.size(); at += piece) {
      const std::string part = body.substr(at, piece);
      const auto progress = reply.Add(
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(part.data()), part.size()),
          sink);
      if (progress != GetReplyBody::Progress::kMore) break;
    }
  }
  fed.finished = reply.Finish();
  fed.whole_object = reply.whole_object();
  return fed;
}

TEST(GetReplyBodyTest, KeepsExactlyTheRangeAsked) {
  std::string object;
  for (int i = 0; i < 100; ++i) object.push_back(static_cast<char>('A' + i % 26));
  // 206 with the range.
  Fed partial = Feed(10, 20, 206, {"Content-Range: bytes 10-29/100"}, object.substr(10, 20));
  EXPECT_TRUE(partial.finished.ok()) << partial.finished.ToString();
  EXPECT_EQ(partial.kept, object.substr(10, 20));
  EXPECT_FALSE(partial.whole_object);
  // rclone: 200 with a Content-Range is a partial reply too.
  Fed rclone = Feed(10, 20, 200, {"Content-Range: bytes 10-29/100"}, object.substr(10, 20));
  EXPECT_TRUE(rclone.finished.ok());
  EXPECT_FALSE(rclone.whole_object);
  // 200 with the whole object: cut.
  Fed whole = Feed(10, 20, 200, {"Content-Length: 100"}, object);
  EXPECT_TRUE(whole.finished.ok()) << whole.finished.ToString();
  EXPECT_EQ(whole.kept, object.substr(10, 20));
  EXPECT_TRUE(whole.whole_object);
  Fed whole_tail = Feed(90, 0, 200, {"Content-Length: 100"}, object);
  EXPECT_TRUE(whole_tail.finished.ok());
  EXPECT_EQ(whole_tail.kept, object.substr(90));
  // Open-ended 206.
  Fed tail = Feed(95, 0, 206, {"Content-Range: bytes 95-99/100"}, object.substr(95));
  EXPECT_TRUE(tail.finished.ok());
  EXPECT_EQ(tail.kept, object.substr(95));
  // The whole object, asked for whole.
  Fed all = Feed(0, 0, 200, {"Content-Length: 100"}, object);
  EXPECT_TRUE(all.finished.ok());
  EXPECT_EQ(all.kept, object);
  EXPECT_FALSE(all.whole_object);
}

TEST(GetReplyBodyTest, RefusesWhatIsNotTheRange) {
  const std::string body(50, 'x');
  // Starts elsewhere.
  EXPECT_EQ(Feed(10, 20, 206, {"Content-Range: bytes 0-19/100"}, body).finished.code(),
            StatusCode::kProtocolError);
  // More than asked.
  EXPECT_EQ(Feed(10, 20, 206, {"Content-Range: bytes 10-39/100"}, body).finished.code(),
            StatusCode::kProtocolError);
  // Ends short, but not at the object's end.
  EXPECT_EQ(Feed(10, 20, 206, {"Content-Range: bytes 10-19/100"}, body).finished.code(),
            StatusCode::kProtocolError);
  // Ends short at the object's end: the object is shorter than the read.
  EXPECT_EQ(
      Feed(90, 20, 206, {"Content-Range: bytes 90-99/100"}, body.substr(0, 10)).finished.code(),
      StatusCode::kDataLoss);
  // The body runs past its declared range.
  Fed longer = Feed(10, 20, 206, {"Content-Range: bytes 10-29/100"}, body);
  EXPECT_EQ(longer.finished.code(), StatusCode::kProtocolError);
  EXPECT_LE(longer.kept.size(), 20u);
  // The body ends early.
  EXPECT_EQ(
      Feed(10, 20, 206, {"Content-Range: bytes 10-29/100"}, body.substr(0, 5)).finished.code(),
      StatusCode::kDataLoss);
  // A whole object that ends before the offset.
  EXPECT_EQ(Feed(200, 20, 200, {"Content-Length: 100"}, std::string(100, 'x')).finished.code(),
            StatusCode::kDataLoss);
  // 206 without Content-Range, a malformed one, a 204.
  EXPECT_EQ(Feed(10, 20, 206, {}, body).finished.code(), StatusCode::kProtocolError);
  EXPECT_EQ(Feed(10, 20, 206, {"Content-Range: bytes ten/100"}, body).finished.code(),
            StatusCode::kProtocolError);
  EXPECT_EQ(Feed(10, 20, 204, {}, "").finished.code(), StatusCode::kProtocolError);
  // A read to the end larger than memory allows.
  ReplyHeaders big;
  big.AddLine("Content-Length: 5000000000");
  GetReplyBody open_ended(0, 0, 1 << 20);
  EXPECT_EQ(open_ended.Begin(200, big).code(), StatusCode::kResourceExhausted);
  // A read to the end without a declared size stops at the cap.
  GetReplyBody unsized(0, 0, 16);
  ASSERT_TRUE(unsized.Begin(200, ReplyHeaders()).ok());
  const std::string bytes(32, 'y');
  const auto progress = unsized.Add(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
      [](std::span<const uint8_t>) { return Status::Ok(); });
  EXPECT_EQ(progress, GetReplyBody::Progress::kFailed);
  EXPECT_EQ(unsized.Finish().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(unsized.kept(), 0u);
}

TEST(ErrorMappingTest, StatusesMapAsDocumented) {
  ReplyHeaders none;
  const char* what = "s3://b/k at http://h";
  const auto code = [&](long status, std::string_view body = "") {
    return StatusForHttpReply(status, none, body, what).code();
  };
  EXPECT_EQ(code(301), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(307), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(401), StatusCode::kPermissionDenied);
  EXPECT_EQ(code(403), StatusCode::kPermissionDenied);
  EXPECT_EQ(code(404), StatusCode::kNotFound);
  EXPECT_EQ(code(412), StatusCode::kDataLoss);
  EXPECT_EQ(code(416), StatusCode::kDataLoss);
  EXPECT_EQ(code(408), StatusCode::kUnavailable);
  EXPECT_EQ(code(429), StatusCode::kUnavailable);
  EXPECT_EQ(code(500), StatusCode::kUnavailable);
  EXPECT_EQ(code(503), StatusCode::kUnavailable);
  EXPECT_EQ(code(400), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(409), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(100), StatusCode::kProtocolError);
  for (long status : {408L, 429L, 500L, 502L, 503L, 504L})
    EXPECT_TRUE(IsRetryableHttpStatus(status));
  for (long status : {301L, 400L, 403L, 404L, 412L, 416L})
    EXPECT_FALSE(IsRetryableHttpStatus(status));
  const Status bucket = StatusForHttpReply(
      404, none, "<Error><Code>NoSuchBucket</Code><Message>The bucket</Message></Error>", what);
  EXPECT_EQ(bucket.message(), "s3://b/k at http://h: no such bucket (404 NoSuchBucket)");
  EXPECT_EQ(S3ErrorCode("<Error><Code>Slow\x01\nDown</Code></Error>"), "SlowDown");
  EXPECT_EQ(S3ErrorCode("<NotError/>"), "");
  EXPECT_EQ(S3ErrorCode("not xml"), "");
}

TEST(ErrorMappingTest, ARefusalOfTheCredentialsIsToldFromOneOfTheObject) {
  ReplyHeaders none;
  const char* what = "s3://b/k at http://h";
  const auto refusal = [&](long status, const std::string& code) {
    return StatusForHttpReply(status, none, "<Error><Code>" + code + "</Code></Error>", what);
  };
  // S3 answers an expired session token with 400 ExpiredToken.
  for (const auto& [status, code] :
       std::vector<std::pair<long, std::string>>{{400, "ExpiredToken"},
                                                 {400, "TokenRefreshRequired"},
                                                 {400, "InvalidToken"},
                                                 {403, "InvalidAccessKeyId"},
                                                 {403, "SignatureDoesNotMatch"},
                                                 {403, "ExpiredToken"}}) {
    const Status s = refusal(status, code);
    EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << code;
    EXPECT_TRUE(IsCredentialRefusal(s)) << s.ToString();
    EXPECT_NE(s.message().find("(" + std::to_string(status) + " " + code + ")"), std::string::npos)
        << s.message();
  }
  EXPECT_FALSE(IsCredentialRefusal(refusal(403, "AccessDenied")));
  EXPECT_EQ(refusal(403, "AccessDenied").code(), StatusCode::kPermissionDenied);
  EXPECT_FALSE(IsCredentialRefusal(StatusForHttpReply(403, none, "", what)));
  EXPECT_FALSE(IsCredentialRefusal(refusal(400, "InvalidRequest")));
}

TEST(RetryAfterTest, ReadsSecondsOrAnHttpDate) {
  // A stand-in for curl_getdate: the one date it knows is 1000 s after 0.
  const auto date = [](const std::string& text) -> int64_t {
    return text == "Wed, 21 Oct 2015 07:28:00 GMT" ? 1000 : -1;
  };
  EXPECT_EQ(RetryAfterDelay("3", 0, date), std::chrono::seconds(3));
  EXPECT_EQ(RetryAfterDelay(" 120 ", 0, date), std::chrono::seconds(120));
  EXPECT_EQ(RetryAfterDelay("Wed, 21 Oct 2015 07:28:00 GMT", 990, date), std::chrono::seconds(10));
  EXPECT_EQ(RetryAfterDelay("Wed, 21 Oct 2015 07:28:00 GMT", 2000, date), std::chrono::seconds(0));
  EXPECT_EQ(RetryAfterDelay("", 0, date), std::chrono::seconds(0));
  EXPECT_EQ(RetryAfterDelay("soon", 0, date), std::chrono::seconds(0));
  EXPECT_EQ(RetryAfterDelay("-5", 0, date), std::chrono::seconds(0));
  EXPECT_EQ(RetryAfterDelay("9999999999", 0, date), std::chrono::seconds(24 * 3600));
  ReplyHeaders headers;
  headers.AddLine("HTTP/1.1 503 Slow Down\r\n");
  headers.AddLine("Retry-After: 2\r\n");
  EXPECT_EQ(headers.retry_after(), "2");
  headers.AddLine("HTTP/1.1 200 OK\r\n");  // a new reply forgets it
  EXPECT_EQ(headers.retry_after(), "");
}

TEST(ListingTest, ParsesAPage) {
  Result<ListingPage> page = ParseListingPage(
      "<?xml version=\"1.0\"?><ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<IsTruncated>true</IsTruncated><Contents><Key>a&amp;b</Key><Size>12</Size>"
      "<ETag>&quot;e1&quot;</ETag></Contents><Contents><Key>c</Key><Size>0</Size></Contents>"
      "<NextContinuationToken>tok/+=</NextContinuationToken></ListBucketResult>");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "a&b");
  EXPECT_EQ(page->objects[0].size, 12u);
  EXPECT_EQ(page->objects[0].etag, "e1");
  EXPECT_EQ(page->objects[1].etag, "");
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_continuation_token, "tok/+=");
  Result<ListingPage> last =
      ParseListingPage("<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>");
  ASSERT_TRUE(last.ok());
  EXPECT_FALSE(last->truncated);
  EXPECT_TRUE(last->objects.empty());
  const Status error = ParseListingPage("<Error><Code>AccessDenied</Code></Error>").status();
  EXPECT_EQ(error.code(), StatusCode::kProtocolError);
  EXPECT_NE(error.message().find("AccessDenied"), std::string::npos);
  EXPECT_EQ(ParseListingPage("").status().code(), StatusCode::kProtocolError);
  EXPECT_EQ(ParseListingPage("<ListBucketResult><IsTruncated>maybe</IsTruncated>"
                             "</ListBucketResult>")
                .status()
                .code(),
            StatusCode::kProtocolError);
}

TEST(OpenS3ClientTest, RefusesOptionsOutOfRange) {
  S3ClientOptions options;
  options.max_in_flight = 0;
  EXPECT_EQ(OpenS3Client(options).status().code(), StatusCode::kInvalidArgument);
  options = S3ClientOptions();
  options.max_retries = 21;
  EXPECT_EQ(OpenS3Client(options).status().code(), StatusCode::kInvalidArgument);
  options = S3ClientOptions();
  options.backoff_cap = std::chrono::milliseconds(1);
  EXPECT_EQ(OpenS3Client(options).status().code(), StatusCode::kInvalidArgument);
  options = S3ClientOptions();
  options.list_page_keys = 1001;
  EXPECT_EQ(OpenS3Client(options).status().code(), StatusCode::kInvalidArgument);
  options = S3ClientOptions();
  options.allowed_endpoints = {"http://ok:9000", "minio:9000"};
  const Status bad_entry = OpenS3Client(options).status();
  EXPECT_EQ(bad_entry.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_entry.message().find("allowed_s3_endpoints"), std::string::npos);
  EXPECT_NE(bad_entry.message().find("minio:9000"), std::string::npos);
  EXPECT_TRUE(OpenS3Client(S3ClientOptions()).ok());
}

TEST(OpenS3ClientTest, RefusesMalformedRequestsWithoutSendingThem) {
  Result<std::unique_ptr<ObjectStore>> store = OpenS3Client(S3ClientOptions());
  ASSERT_TRUE(store.ok());
  Access access;
  access.credentials = {"AKIA", "secret", ""};
  EXPECT_EQ((*store)->Get(access, "Bad_Bucket", "k", 0, 1, "").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->Get(access, "bucket", "", 0, 1, "").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->Get(access, "bucket", std::string(1025, 'k'), 0, 1, "").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->Get(access, "bucket", "k", UINT64_MAX - 5, 10, "").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->Get(access, "bucket", "k", 0, 1, "etag\r\nX-Injected: 1").status().code(),
            StatusCode::kInvalidArgument);
  Access injected = access;
  injected.credentials.session_token = "token\r\nHost: elsewhere";
  const Status refused = (*store)->Head(injected, "bucket", "k").status();
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message().find("elsewhere"), std::string::npos);
  EXPECT_EQ((*store)->counters().gets.load() + (*store)->counters().heads.load(), 0u);
  EXPECT_EQ((*store)->counters().failures.load(), 6u);
}

}  // namespace
}  // namespace galley::objectstore
