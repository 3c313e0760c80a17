// ShardDescriptorCache: the open descriptors of tar shards, for every shard
// set of the process under one bound.
//
// A shard set reads its items by pread through descriptors kept open
// between reads (opening a shard costs an open and two stats). Each set
// keeps at most its own share (the `set_capacity` it inserts with, galleyd's
// max_open_shards) and all sets together at most `capacity` (galleyd's
// max_open_shards_total); past either bound the least recently used
// descriptor is closed: the set's own for its share, any set's for the
// total. A set whose last job ended gives its descriptors back (Release),
// and so does a set that is destroyed, so listings kept for later jobs hold
// none. Readers hold the shared_ptr they were given: closing never pulls a
// descriptor from under a pread in flight (it closes when the last holder
// lets go, so a few more than `capacity` may briefly be open).
//
// Thread-safety: every method may be called from any thread; the state is
// guarded by an internal mutex, and no method calls out while holding it.
#ifndef GALLEY_SERVER_DATASET_SHARD_DESCRIPTORS_H_
#define GALLEY_SERVER_DATASET_SHARD_DESCRIPTORS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <utility>

#include "galley/mutex.h"
#include "galley/unique_fd.h"

namespace galley {

struct ShardDescriptorCounts {
  uint64_t open = 0;      // cached now
  uint64_t capacity = 0;  // the bound on `open`
  uint64_t opened = 0;    // descriptors cached since start
  uint64_t evicted = 0;   // closed to stay within a bound
  uint64_t released = 0;  // closed because their set's jobs ended or it was dropped
};

class ShardDescriptorCache {
 public:
  using Descriptor = std::shared_ptr<const UniqueFd>;

  // `capacity` of 0 counts as 1.
  explicit ShardDescriptorCache(size_t capacity);
  ShardDescriptorCache(const ShardDescriptorCache&) = delete;
  ShardDescriptorCache& operator=(const ShardDescriptorCache&) = delete;

  // A number naming a new shard set here; never reused.
  uint64_t NewSet() { return next_set_.fetch_add(1); }

  // The descriptor cached for shard `shard` of set `set`, now the most
  // recently used; null when none is.
  Descriptor Find(uint64_t set, uint32_t shard);
  // Caches `fd` for (set, shard), closing least recently used descriptors
  // beyond `set_capacity` for the set (0 counts as 1) and beyond the
  // capacity in all. Returns the descriptor cached for (set, shard): `fd`,
  // or the one another thread cached first.
  Descriptor Insert(uint64_t set, uint32_t shard, Descriptor fd, size_t set_capacity);
  // Closes every descriptor of `set`.
  void Release(uint64_t set);
  // Closes the least recently used half of all descriptors (at least one):
  // what a reader does when the process has no descriptor left.
  void ShedHalf();

  ShardDescriptorCounts Counts() const;

 private:
  using Key = std::pair<uint64_t, uint32_t>;  // set, shard
  struct Entry {
    Key key;
    Descriptor fd;
    std::list<Key>::iterator in_set;  // its place in its set's recency list
  };
  // The entry at `position` out of every list; its descriptor is returned
  // (to be dropped by the caller once the lock is released).
  Descriptor Erase(std::list<Entry>::iterator position) REQUIRES(mu_);

  const size_t capacity_;
  std::atomic<uint64_t> next_set_{1};
  mutable Mutex mu_;
  std::list<Entry> lru_ GUARDED_BY(mu_);  // every entry, most recently used first
  std::map<Key, std::list<Entry>::iterator> index_ GUARDED_BY(mu_);
  // Each set's keys, most recently used first.
  std::map<uint64_t, std::list<Key>> sets_ GUARDED_BY(mu_);
  uint64_t opened_ GUARDED_BY(mu_) = 0;
  uint64_t evicted_ GUARDED_BY(mu_) = 0;
  uint64_t released_ GUARDED_BY(mu_) = 0;
};

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_SHARD_DESCRIPTORS_H_
