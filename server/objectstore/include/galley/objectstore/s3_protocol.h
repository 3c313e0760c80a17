// The S3 protocol as S3Client speaks it, without any I/O: which endpoint a
// request may go to, its URL (keys and queries encoded as SigV4 signs them),
// what a reply's headers, body and status mean, and the ListObjectsV2 XML.
// Split from the transfer code so that each piece is tested, and fuzzed, on
// its own.
//
// Thread-safety: free functions are pure; a ReplyHeaders or GetReplyBody is
// one reply's, used by one thread at a time.
#ifndef GALLEY_SERVER_OBJECTSTORE_S3_PROTOCOL_H_
#define GALLEY_SERVER_OBJECTSTORE_S3_PROTOCOL_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "galley/objectstore/object_store.h"
#include "galley/status.h"

namespace galley::objectstore {

// A checked "scheme://host[:port]": no user, path, query or fragment.
struct EndpointUrl {
  std::string scheme;  // "http" or "https"
  std::string host;    // lower case; an IPv6 address keeps its brackets
  uint16_t port = 0;   // 0: the scheme's own (80, 443)

  // "scheme://host[:port]", the port only when not the scheme's own.
  std::string ToString() const;
  // An IPv4 or IPv6 literal: no bucket host name can be made under it.
  bool IsIpLiteral() const;
  bool operator==(const EndpointUrl&) const = default;
};

// InvalidArgument unless `url` is http(s)://host[:port] with an optional
// trailing '/'.
Result<EndpointUrl> ParseEndpointUrl(std::string_view url);

// Where a request for `endpoint` goes: its url, or for "" AWS's regional
// endpoint for its region. InvalidArgument when that is not in `allowed`
// (or, with `allowed` empty, not one of AWS's https://s3.<region>.amazonaws.com),
// when the region is no AWS region name, or when a virtual-host request is
// asked of an IP address.
Result<EndpointUrl> ResolveEndpoint(const Endpoint& endpoint,
                                    const std::vector<EndpointUrl>& allowed);

// InvalidArgument unless `bucket` is 3-63 of [a-z0-9.-], starting and
// ending with a letter or digit.
Status CheckBucketName(std::string_view bucket);
// InvalidArgument for a key S3 refuses (over 1,024 bytes) or, unless
// `may_be_empty`, an empty one.
Status CheckKey(std::string_view key, bool may_be_empty);
// InvalidArgument when a value bound for a header holds a control
// character (it would end the header). `what` names it in the message;
// the value itself is never shown.
Status CheckHeaderValue(std::string_view value, std::string_view what);

// RFC 3986 percent-encoding as SigV4 wants it: A-Z a-z 0-9 - . _ ~ stay,
// every other byte is %XX (upper case); '/' stays when `keep_slash`.
std::string UriEncode(std::string_view text, bool keep_slash);

// The URL of bucket/key: path style http://host/bucket/key, virtual host
// http://bucket.host/key.
std::string ObjectUrl(const EndpointUrl& endpoint, bool path_style, std::string_view bucket,
                      std::string_view key);
// A ListObjectsV2 page's URL; its query's parameters sorted by name and
// encoded, as the signature's canonical query must be (libcurl signs the
// query as it is written).
std::string ListUrl(const EndpointUrl& endpoint, bool path_style, std::string_view bucket,
                    std::string_view prefix, std::string_view continuation_token,
                    uint32_t max_keys);

// "s3://bucket/key at https://host": how messages name a request.
std::string DescribeRequest(const EndpointUrl& endpoint, std::string_view bucket,
                            std::string_view key);

// The headers of a reply that S3Client reads, fed line by line as they
// arrive; a new status line (after a 100 Continue) starts over.
class ReplyHeaders {
 public:
  void AddLine(std::string_view line);

  const std::string& content_range() const { return content_range_; }
  std::optional<uint64_t> content_length() const { return content_length_; }
  // Quotes removed.
  const std::string& etag() const { return etag_; }
  const std::string& location() const { return location_; }
  // Retry-After as sent: delay-seconds or an HTTP date ("" when absent).
  const std::string& retry_after() const { return retry_after_; }

 private:
  std::string content_range_;
  std::optional<uint64_t> content_length_;
  std::string etag_;
  std::string location_;
  std::string retry_after_;
};

// How long a Retry-After value asks to wait: delay-seconds, or an HTTP date
// (read by `parse_date`, seconds since the epoch or -1, against `now`, the
// same). Absent, unparsable or in the past: zero. At most a day.
std::chrono::seconds RetryAfterDelay(std::string_view value, int64_t now,
                                     int64_t (*parse_date)(const std::string&));

// "bytes FIRST-LAST/TOTAL" (TOTAL may be '*').
struct ContentRange {
  uint64_t first = 0;
  uint64_t last = 0;
  std::optional<uint64_t> total;
};
std::optional<ContentRange> ParseContentRange(std::string_view value);

// An ETag as S3 writes it, without its quotes (and without a weak "W/").
std::string StripEtag(std::string_view etag);

// The body of a GET for `length` bytes at `offset` (length 0: to the end),
// whatever the server made of the Range header: a partial reply (206, or a
// 200 with Content-Range, as rclone answers) must start at `offset`; a
// whole-object reply (200 without Content-Range) is cut to the range. The
// bytes kept never exceed what was asked (or, for length 0, what the reply
// declares, at most `open_ended_cap`).
class GetReplyBody {
 public:
  enum class Progress { kMore, kComplete, kFailed };
  using Sink = std::function<Status(std::span<const uint8_t>)>;

  GetReplyBody(uint64_t offset, uint64_t length, uint64_t open_ended_cap);

  // Called once the headers of a 2xx reply are in, before any body byte.
  // Not OK: ProtocolError (a range that does not start where asked),
  // DataLoss (the object ends before `offset`) or ResourceExhausted (a
  // length-0 GET of more than `open_ended_cap`).
  Status Begin(long http_status, const ReplyHeaders& headers);
  // The reply's next body bytes; those in range go to `sink`. kComplete:
  // the range is whole and the rest of a whole-object reply is not needed.
  // kFailed: see status() (a body longer than asked, or `sink`'s error).
  Progress Add(std::span<const uint8_t> data, const Sink& sink);
  // When the reply has ended: OK when the range is whole; DataLoss when
  // the object ended first; the failure of Begin or Add if one failed.
  Status Finish() const;

  // The reply was the whole object although a range was asked.
  bool whole_object() const { return whole_object_; }
  uint64_t kept() const { return kept_; }
  const Status& status() const { return status_; }

 private:
  const uint64_t offset_;
  const uint64_t length_;
  const uint64_t open_ended_cap_;
  bool begun_ = false;
  // limit_ is the size the reply declares, so a shorter body is DataLoss.
  bool sized_ = false;
  bool whole_object_ = false;
  uint64_t skip_ = 0;   // bytes of the reply before the range
  uint64_t limit_ = 0;  // bytes to keep
  uint64_t kept_ = 0;
  Status status_;
};

// The S3 error code of an <Error><Code>...</Code></Error> body ("" when
// the body is no such document). At most 64 printable characters.
std::string S3ErrorCode(std::string_view body);

// The Status for a reply with a non-2xx `http_status` to the request
// `what` (DescribeRequest's text): 3xx InvalidArgument (never followed),
// 401/403 PermissionDenied (and a 400 that refuses the credentials:
// IsCredentialRefusal), 404 NotFound, 412/416 DataLoss, 408/429/5xx
// Unavailable, other 4xx InvalidArgument, anything else ProtocolError.
Status StatusForHttpReply(long http_status, const ReplyHeaders& headers, std::string_view body,
                          std::string_view what);
// 408, 429 and 5xx: a later try may succeed.
bool IsRetryableHttpStatus(long http_status);

// One ListObjectsV2 page. ProtocolError for anything that is not one.
struct ListingPage {
  std::vector<ObjectInfo> objects;
  bool truncated = false;
  std::string next_continuation_token;
};
Result<ListingPage> ParseListingPage(std::string_view xml);

}  // namespace galley::objectstore

#endif  // GALLEY_SERVER_OBJECTSTORE_S3_PROTOCOL_H_
