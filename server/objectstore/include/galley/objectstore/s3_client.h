// S3Client: the ObjectStore on libcurl, for AWS S3 and S3-compatible stores
// (MinIO, Ceph RGW, rclone serve s3). docs/datasets.md, "Datasets in object
// storage", is the user's side of it.
//
// One thread drives a libcurl multi handle: every request is an easy handle
// on it, so many GETs are on the wire without a thread each, and connections
// (and TLS sessions) are kept and reused between requests to the same host.
// A request beyond `max_in_flight` waits in a queue in arrival order.
// Requests are signed with the job's own credentials (SigV4, unsigned
// payload); each goes only to an endpoint the allowlist names.
//
// A request that fails in a way another try may mend (a 5xx or 503
// SlowDown, 408, 429, a timeout, a connection refused or reset, a stalled
// transfer) is sent again after a delay drawn uniformly from [0, min(cap,
// base * 2^try)) ("full jitter"), at most `max_retries` times; then it is
// Unavailable. A reply with Retry-After (a 503 SlowDown, a 429) is tried
// again no sooner than it asks, and no later than `backoff_cap` (a store
// asking for more is asked again at the cap). Nothing else is retried.
//
// Stream() runs its transfer on the caller's thread, so a slow `chunk`
// (writing a shard to disk) holds no other request up; after a broken
// connection it goes on from the byte it had reached, pinned to the version
// it started on. List() calls `each` on the caller's thread too; only
// GetAsync's `done` runs on the store's thread.
//
// Thread-safety: every method may be called from any thread, except that a
// GetAsync callback must not wait for another request of the same store
// (Get, Head and List wait on that thread).
#ifndef GALLEY_SERVER_OBJECTSTORE_S3_CLIENT_H_
#define GALLEY_SERVER_OBJECTSTORE_S3_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "galley/objectstore/object_store.h"
#include "galley/status.h"

namespace galley::objectstore {

struct S3ClientOptions {
  // Requests on the wire at once (1..4096). More wait their turn.
  uint32_t max_in_flight = 64;
  // PEM file of the CA certificates an https endpoint's certificate must
  // chain to; "" = libcurl's default, the system's CA store. Peer and host
  // name are always verified.
  std::string ca_file;
  // Tries after the first for a retryable failure (0..20).
  uint32_t max_retries = 5;
  // Backoff before retry n (n from 0): uniform in [0, min(cap, base * 2^n)).
  std::chrono::milliseconds backoff_base{100};
  std::chrono::milliseconds backoff_cap{5000};
  // Giving up on a TCP (and TLS) connect; retried like a refused one.
  std::chrono::milliseconds connect_timeout{5000};
  // A transfer that moves fewer than `low_speed_bytes` per second for
  // `low_speed_time` is stalled: abandoned and retried.
  uint32_t low_speed_bytes = 1024;
  std::chrono::seconds low_speed_time{15};
  // Where requests may go: "scheme://host[:port]" each, http or https
  // (galleyd's `allowed_s3_endpoints`). Empty: only AWS's own regional
  // endpoints, https://s3.<region>.amazonaws.com and the bucket's virtual
  // host under it. A non-empty list replaces that default.
  std::vector<std::string> allowed_endpoints;
  // The most a GET to the object's end (length 0) may bring into memory:
  // a larger object is ResourceExhausted (Stream reads any size).
  uint64_t max_open_ended_get_bytes = uint64_t{1} << 30;
  // A listing page larger than this is refused (ProtocolError): a page of
  // 1,000 keys of 1 KiB each is about 1.3 MiB.
  uint64_t max_listing_page_bytes = 8u << 20;
  // Keys asked for per listing page (max-keys, 1..1000). Only tests lower it.
  uint32_t list_page_keys = 1000;
};

// A store on `options`, its thread started. InvalidArgument names an
// option out of range or an allowlist entry that is no scheme://host[:port].
// Unavailable when galley was built without S3 support (GALLEY_OBJECT_STORE).
Result<std::unique_ptr<ObjectStore>> OpenS3Client(const S3ClientOptions& options);

}  // namespace galley::objectstore

#endif  // GALLEY_SERVER_OBJECTSTORE_S3_CLIENT_H_
