// RemoteCache: what the item pipeline and the cache planner need of a cache
// tier shared by every node (docs/cache.md, "The remote tier"). RemoteTier
// (remote_tier.h) is the one on memcached; tests inject fakes.
//
// A lookup never fails: whatever goes wrong is a miss (and the
// implementation's to count), so the item comes from storage. A write
// returns at once.
//
// Thread-safety: implementations allow every method from any thread.
#ifndef GALLEY_SERVER_REMOTE_REMOTE_CACHE_H_
#define GALLEY_SERVER_REMOTE_REMOTE_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "galley/cache/blob.h"
#include "galley/dataset/content_fingerprint.h"
#include "galley/ids.h"
#include "galley/remote/remote_value.h"
#include "galley/snapshots/snapshots.h"

namespace galley {

// What a lookup found: at most one of the two is set.
struct RemoteLookup {
  std::shared_ptr<cache::Blob> decoded;  // RGB pixels, width/height set
  std::shared_ptr<cache::Blob> encoded;  // the file's bytes
};

class RemoteCache {
 public:
  virtual ~RemoteCache() = default;

  // The item's decoded or encoded entry, whichever is there (decoded
  // preferred), checked; empty on a miss or any failure.
  virtual RemoteLookup Get(const ContentFingerprint& dataset, ItemId item) = 0;
  // Queues `blob` to be stored as the item's `form` entry.
  virtual void Put(const ContentFingerprint& dataset, ItemId item, RemoteForm form,
                   cache::BlobPtr blob) = 0;
  // Whether a value with `payload_bytes` is small enough to be written.
  virtual bool Fits(uint64_t payload_bytes) const = 0;
  // The form items read from storage are written in (the planner's choice).
  virtual void set_write_form(RemoteForm form) = 0;
  virtual RemoteForm write_form() const = 0;
  virtual RemoteTierSnapshot Snapshot() const = 0;
};

// Splits "HOST:PORT" ("[v6]:PORT" for IPv6; HOST keeps its brackets);
// false when malformed.
bool ParseServerAddress(const std::string& text, std::string* host, uint16_t* port);

}  // namespace galley

#endif  // GALLEY_SERVER_REMOTE_REMOTE_CACHE_H_
