// ObjectStore: what galleyd needs of an S3-compatible object store
// (docs/datasets.md, "Datasets in object storage"): ranged and whole GETs
// with many requests in flight, HEAD, paged listings and one streaming pass
// over an object. S3Client (s3_client.h) is the one on libcurl; tests inject
// an in-memory one.
//
// Every request carries the Access of the job it is made for: galleyd never
// signs with credentials of its own, so one store serves every job on the
// node and a request can read only what its job's credentials may.
//
// Errors: NotFound (404, NoSuchKey/NoSuchBucket), PermissionDenied (401/403:
// refused or missing credentials), DataLoss (412: the object is no longer
// the version `etag` names; or a body shorter than asked), Unavailable (the
// store stayed unreachable or kept answering 5xx/503 SlowDown after the
// retries), InvalidArgument (an endpoint outside the allowlist, a malformed
// URL or key), ProtocolError (a reply that breaks HTTP or S3's XML). Messages
// name the bucket, key and endpoint, never a credential. A refusal of the
// credentials themselves (expired, revoked or unknown; IsCredentialRefusal)
// is PermissionDenied too, told apart from a refusal of the object.
//
// Thread-safety: implementations allow every method from any thread;
// callbacks run on the store's own thread and must not block.
#ifndef GALLEY_SERVER_OBJECTSTORE_OBJECT_STORE_H_
#define GALLEY_SERVER_OBJECTSTORE_OBJECT_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "galley/status.h"

namespace galley::objectstore {

// Where a bucket is served and how it is addressed. Resolved in the job
// from its environment and AWS config files, as the AWS CLI resolves them.
struct Endpoint {
  // Scheme and authority, no path: "https://s3.us-east-1.amazonaws.com",
  // "http://127.0.0.1:9000". "" = AWS's regional endpoint for `region`.
  std::string url;
  std::string region = "us-east-1";
  // Bucket as the first path segment ("addressing_style = path") instead of
  // a host name label.
  bool path_style = false;
};

// A job's credentials. Never logged, never in a message or a snapshot.
struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // "" unless temporary (STS)
};

struct Access {
  Endpoint endpoint;
  Credentials credentials;
};

// "s3://bucket/key": the bucket and the key (which may be "" or end in '/'
// for a prefix).
struct S3Url {
  std::string bucket;
  std::string key;

  // InvalidArgument unless `url` is s3://BUCKET[/KEY] with a bucket name S3
  // accepts (3-63 of [a-z0-9.-]).
  static Result<S3Url> Parse(std::string_view url);
  std::string ToString() const { return "s3://" + bucket + "/" + key; }
};

// Whether `status` is the store's refusal of the credentials a request was
// signed with, not of the object: ExpiredToken, TokenRefreshRequired,
// InvalidToken, InvalidAccessKeyId or SignatureDoesNotMatch (S3 answers an
// expired session token with 400 ExpiredToken). Other credentials, or the
// same job's refreshed ones, may read what these could not.
bool IsCredentialRefusal(const Status& status);
// The words such a refusal's message carries (StatusForHttpReply).
inline constexpr std::string_view kCredentialRefusalWords = "the job's credentials were refused";

// What HEAD or a listing says of an object.
struct ObjectInfo {
  std::string key;
  uint64_t size = 0;
  std::string etag;  // as the store sends it, quotes removed
};

// Counts since the store was made, for galleyctl, the metrics and tests.
struct ObjectStoreCounters {
  std::atomic<uint64_t> gets{0};         // GET requests sent, retries included
  std::atomic<uint64_t> heads{0};        // HEAD requests sent
  std::atomic<uint64_t> lists{0};        // listing pages requested
  std::atomic<uint64_t> bytes{0};        // body bytes received by GETs
  std::atomic<uint64_t> retries{0};      // requests sent again after a retryable failure
  std::atomic<uint64_t> failures{0};     // requests that failed after their retries
  std::atomic<uint64_t> in_flight{0};    // requests now on the wire
  std::atomic<uint64_t> full_bodies{0};  // ranged GETs answered 200 with the whole object
};

class ObjectStore {
 public:
  using GetDone = std::function<void(Result<std::vector<uint8_t>>)>;

  virtual ~ObjectStore() = default;

  // Starts a GET of `length` bytes at `offset` of bucket/key (length 0: to
  // the object's end). With a non-empty `etag`, only that version is read
  // (If-Match; another version is DataLoss). `done` is called exactly once,
  // on the store's thread, with the bytes or the error. Returns at once;
  // requests beyond the store's in-flight bound wait their turn.
  virtual void GetAsync(const Access& access, const std::string& bucket, const std::string& key,
                        uint64_t offset, uint64_t length, const std::string& etag,
                        GetDone done) = 0;
  // GetAsync, waited for.
  Result<std::vector<uint8_t>> Get(const Access& access, const std::string& bucket,
                                   const std::string& key, uint64_t offset, uint64_t length,
                                   const std::string& etag);
  virtual Result<ObjectInfo> Head(const Access& access, const std::string& bucket,
                                  const std::string& key) = 0;
  // Every object under `prefix` (ListObjectsV2, every page), in key order,
  // each handed to `each`; an error from `each` ends the listing with it.
  virtual Status List(const Access& access, const std::string& bucket, const std::string& prefix,
                      const std::function<Status(const ObjectInfo&)>& each) = 0;
  // One streaming GET of the whole object (version `etag` if non-empty),
  // its bytes handed to `chunk` in order as they arrive; an error from
  // `chunk` ends the transfer with it. For one pass over a shard.
  virtual Status Stream(const Access& access, const std::string& bucket, const std::string& key,
                        const std::string& etag,
                        const std::function<Status(std::span<const uint8_t>)>& chunk) = 0;
  virtual const ObjectStoreCounters& counters() const = 0;
};

}  // namespace galley::objectstore

#endif  // GALLEY_SERVER_OBJECTSTORE_OBJECT_STORE_H_
