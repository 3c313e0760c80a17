// ObjectShards: the ShardSource::Storage of tar shards kept as objects in
// S3-compatible storage (ShardSource::OpenObjects), and how one such shard
// is listed. Internal to galley_dataset.
//
// Reads are ranged GETs naming the listed ETag (If-Match); a 412 (another
// version of the object) is DataLoss and marks the storage changed.
// Prefetch registers the ranges a wave's reads will ask for and fetches
// them ahead: ranges of one shard closer than kCoalesceGap are fetched by
// one GET of at most kMaxCoalescedBytes; at most
// ShardOptions::object_requests_in_flight GETs are in flight, and the
// fetches in flight or fetched and not yet read hold at most
// ShardOptions::object_prefetch_bytes (one fetch is always allowed). A read
// of a registered range waits for its fetch (and starts it at once if it
// still waits its turn); any other read is one GET of its own. Ranges
// registered and never read (an item a job no longer wants) are dropped
// kWavesKept waves later, freeing what they hold.
//
// The shards a listing streamed and kept (KeepListed) serve their items'
// first reads from those bytes: neither a read nor a prefetch of a range
// in them fetches it again, and a shard's bytes go once every range its
// items read (ExpectListedReads) was read once. So a set's first epoch
// after its listing does not fetch what the listing already did.
//
// PrefetchNextWave registers the next wave's ranges while this wave's are
// read: they are fetched only once every fetch of this wave has started,
// and within half the bounds (half of object_requests_in_flight, at least
// one, and half of object_prefetch_bytes, counting every fetch held), so
// the current wave's GETs never wait behind them. The next wave's Prefetch
// of a range registered so takes that registration over (its fetch, done,
// in flight or still queued, moves up with the current wave's) instead of
// fetching it again. A range it does not name stays registered for the
// wave it was meant for and is dropped kWavesKept waves after it.
//
// Access: the set keeps the credentials admitted for it, the lister's and
// those of every later VerifyObjects (a job's open, or its refresh: every
// shard HEADed with them, each the listed version), at most kMaxAdmitted,
// newest last. Every request carries the newest the store has not refused.
// A read the store refuses because of its credentials (IsCredentialRefusal:
// expired, revoked) strikes those off and is sent again with the next
// newest; when none is left it waits, up to ShardOptions::
// object_refresh_wait, for credentials a job's refresh admits, and fails
// with the store's refusal if none come. So one job's expired token does
// not stop the reads of the others, and a job that refreshes its own goes
// on. A refusal of the object (AccessDenied) fails at once, as before.
//
// Thread-safety: every method may be called from any thread; the store's
// callbacks take the internal mutex only briefly and never start a request
// under it. The destructor waits for the GETs in flight.
#ifndef GALLEY_SERVER_DATASET_OBJECT_SHARDS_H_
#define GALLEY_SERVER_DATASET_OBJECT_SHARDS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "galley/mutex.h"
#include "galley/objectstore/object_store.h"
#include "shard_storage.h"

namespace galley {

// HEADs `url` with `access` and lists it: from the index cache (keyed by
// endpoint, URL, size and ETag) when it holds this version, else by one
// streaming GET, storing the result. A streamed object no larger than
// what `keep_budget` has left is kept whole in the listing's
// origin.streamed, its size taken from the budget. Errors name the URL.
Result<ShardListing> ListObjectShard(objectstore::ObjectStore& store,
                                     const objectstore::Access& access,
                                     const objectstore::S3Url& url, const ShardOptions& options,
                                     bool use_cache, std::atomic<uint64_t>* keep_budget = nullptr);

class ObjectShards final : public ShardSource::Storage {
 public:
  // Credentials a set keeps at most; admitting more drops the oldest.
  static constexpr size_t kMaxAdmitted = 16;
  // Ranges closer than this in one shard are fetched by one GET.
  static constexpr uint64_t kCoalesceGap = 4 << 10;
  static constexpr uint64_t kMaxCoalescedBytes = 8 << 20;
  // Waves after which a registered range not read is dropped.
  static constexpr uint64_t kWavesKept = 4;

  struct Shard {
    objectstore::S3Url url;
    uint64_t size = 0;
    std::string etag;
  };

  // HEADs VerifyObjects keeps in flight by default.
  static constexpr uint32_t kDefaultHeadsInFlight = 16;

  // `heads_in_flight`: the HEADs VerifyObjects keeps in flight at most.
  ObjectShards(std::shared_ptr<objectstore::ObjectStore> store, const objectstore::Access& access,
               std::vector<Shard> shards, const ShardOptions& options,
               uint32_t heads_in_flight = kDefaultHeadsInFlight);
  ~ObjectShards() override;
  ObjectShards(const ObjectShards&) = delete;
  ObjectShards& operator=(const ObjectShards&) = delete;

  Status ReadInto(uint32_t shard, uint64_t offset, std::span<uint8_t> out) override;
  // ReadInto, past the listing's kept bytes.
  Status ReadFromStorage(uint32_t shard, uint64_t offset, std::span<uint8_t> out) override;
  bool changed() const override { return changed_.load(); }
  // Files only: nothing to check against a local user.
  Status Verify(AccessChecker* checker, const std::vector<bool>& holds_served,
                bool* changed) override;
  // Stops sending HEADs once `stop` (may be null) asks, Cancelled; the
  // HEADs in flight end, and nothing is admitted.
  Status VerifyObjects(const objectstore::Access& access, bool* changed,
                       ListingStop* stop) override;
  void Prefetch(std::span<const ShardExtent> extents) override;
  void PrefetchNextWave(std::span<const ShardExtent> extents) override;
  // Adds `access` as the newest (the same credentials admitted before are
  // moved up) and wakes the reads waiting for credentials: VerifyObjects
  // after its HEADs, or a caller by its own rule (a listing made with the
  // same access key).
  void Admit(const objectstore::Access& access) EXCLUDES(mu_);
  size_t count() const { return shards_.size(); }
  const Shard& shard(uint32_t index) const { return shards_[index]; }
  // Endpoint, bucket, key, size and ETag: never the credentials.
  void AddFingerprint(uint32_t shard, ContentFingerprintBuilder& fingerprint) const override;
  // The key's last segment and the size; the ETag apart.
  void AddResumeKey(uint32_t shard, ContentFingerprintBuilder& copy,
                    ContentFingerprintBuilder& versions) const override;
  const objectstore::ObjectStoreCounters* object_counters() const override {
    return &store_->counters();
  }
  ObjectReadCounts object_reads() const override {
    return {prefetched_reads_.load(), on_demand_reads_.load(), gets_.load(),  bytes_.load(),
            verify_heads_.load(),     listed_reads_.load(),    listed_bytes()};
  }

  // `shard`'s bytes as its listing streamed them, kept for its first reads;
  // before any read.
  void KeepListed(uint32_t shard, std::shared_ptr<const std::vector<uint8_t>> bytes) EXCLUDES(mu_);
  // The ranges the set's items read (each item's image and fields): a kept
  // shard goes once each of its ranges was read; one none reads goes now.
  void ExpectListedReads(std::span<const ShardExtent> extents) EXCLUDES(mu_);
  // For tests: reads served by kept listing bytes, and the bytes kept now.
  uint64_t listed_reads() const { return listed_reads_.load(); }
  uint64_t listed_bytes() const EXCLUDES(mu_);

  // For tests: prefetch GETs now in flight, and the most ever in flight.
  uint64_t prefetches_in_flight() const;
  // GETs started for a next wave's ranges (PrefetchNextWave) since the start.
  uint64_t fetches_ahead() const;
  uint64_t max_prefetches_in_flight() const;

 private:
  // One GET of [begin, end) of a shard, serving the registered ranges in it.
  // Credentials admitted for the set; `generation` counts admissions.
  struct Admitted {
    uint64_t generation = 0;
    objectstore::Access access;
    bool refused = false;  // the store refused them (IsCredentialRefusal)
  };
  // What a request was signed with.
  struct Signed {
    uint64_t generation = 0;
    objectstore::Access access;
  };

  struct Fetch {
    uint32_t shard = 0;
    uint64_t generation = 0;  // of the credentials its GET was signed with
    uint64_t begin = 0;
    uint64_t end = 0;
    uint32_t claims = 0;  // registered ranges not yet read
    bool ahead = false;   // queued for the next wave only (queued_ahead_)
    bool started = false;
    bool done = false;
    Result<std::vector<uint8_t>> bytes = Status::Internal("not fetched");
  };
  using FetchPtr = std::shared_ptr<Fetch>;
  // One registered range: the wave it is for (dropped kWavesKept waves
  // after it unread), and whether only PrefetchNextWave named it so far.
  struct Claim {
    FetchPtr fetch;
    uint64_t wave = 0;
    bool ahead = false;
  };

  // The newest credentials not refused; none when every one was.
  std::optional<Signed> CurrentLocked() const REQUIRES(mu_);
  // What a request is signed with now: CurrentLocked(), else the newest
  // (refused: its read then waits for a refresh in ReadAfterRefusal).
  Signed SigningLocked() const REQUIRES(mu_);
  // A read of `shard` whose request signed with `generation` failed with
  // `failure`: after a credential refusal, strikes those credentials off
  // and reads again with the newest left, waiting for a refresh when none
  // is (at most object_refresh_wait); the read's final status.
  Status ReadAfterRefusal(uint32_t shard, uint64_t offset, std::span<uint8_t> out, Status failure,
                          uint64_t generation);
  // One GET of [offset, offset + out.size()) of `shard` into `out`.
  Status ReadDirect(uint32_t shard, uint64_t offset, std::span<uint8_t> out,
                    const objectstore::Access& access);
  // Starts `fetch`'s GET (its callback calls Finished).
  void Start(const FetchPtr& fetch, const Signed& credentials);

  void Finished(const FetchPtr& fetch, Result<std::vector<uint8_t>> bytes);
  // Queued fetches the bounds now allow, marked started: the current
  // wave's first, then the next wave's within half the bounds.
  std::vector<FetchPtr> TakeStartable() REQUIRES(mu_);
  // Registers `extents` for `wave`, coalesced into new fetches queued on
  // `queue`; with `ahead`, as the next wave's. Ranges the current wave
  // registers that the next wave's call registered already take those
  // registrations over.
  void RegisterLocked(std::span<const ShardExtent> extents, uint64_t wave, bool ahead)
      REQUIRES(mu_);
  // Whether kept listing bytes hold `extent` for a first read.
  bool ListedLocked(const ShardExtent& extent) const REQUIRES(mu_);
  // Drops the registrations kWavesKept waves old and never read.
  void DropStaleLocked() REQUIRES(mu_);
  // Marks `fetch` started and counts it against the bounds.
  void MarkStartedLocked(const FetchPtr& fetch) REQUIRES(mu_);
  // One claim of `fetch` is given up (read or dropped).
  void Unclaim(const FetchPtr& fetch) REQUIRES(mu_);
  // The error of a GET of `shard`, in the source's words; marks the storage
  // changed on DataLoss.
  Status ReadError(uint32_t shard, const Status& status);

  const std::shared_ptr<objectstore::ObjectStore> store_;
  const std::string endpoint_;
  const std::vector<Shard> shards_;
  const uint32_t max_in_flight_;
  const uint64_t max_bytes_;
  const uint32_t heads_in_flight_;
  std::atomic<bool> changed_{false};
  std::atomic<uint64_t> prefetched_reads_{0};
  std::atomic<uint64_t> on_demand_reads_{0};
  std::atomic<uint64_t> gets_{0};
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> verify_heads_{0};
  std::atomic<uint64_t> listed_reads_{0};
  const std::chrono::milliseconds refresh_wait_;

  mutable Mutex mu_;
  CondVar fetched_;
  CondVar admitted_cv_;                             // credentials were admitted
  std::vector<Admitted> admitted_ GUARDED_BY(mu_);  // oldest first
  uint64_t next_generation_ GUARDED_BY(mu_) = 1;
  // Registered ranges (one entry per claim) and the fetch serving each.
  std::multimap<ShardExtent, Claim> claims_ GUARDED_BY(mu_);
  std::deque<FetchPtr> queued_ GUARDED_BY(mu_);        // the current wave's, in order
  std::deque<FetchPtr> queued_ahead_ GUARDED_BY(mu_);  // the next wave's
  uint64_t ahead_fetches_ GUARDED_BY(mu_) = 0;         // started for the next wave
  uint64_t wave_ GUARDED_BY(mu_) = 0;
  uint64_t in_flight_ GUARDED_BY(mu_) = 0;
  uint64_t max_in_flight_seen_ GUARDED_BY(mu_) = 0;
  uint64_t held_bytes_ GUARDED_BY(mu_) = 0;  // fetches started and not released
  // A shard's bytes its listing kept, and the offsets of the ranges its
  // items read that no read has taken yet.
  struct Listed {
    std::shared_ptr<const std::vector<uint8_t>> bytes;
    std::set<uint64_t> unread;
  };
  std::map<uint32_t, Listed> listed_ GUARDED_BY(mu_);
};

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_OBJECT_SHARDS_H_
