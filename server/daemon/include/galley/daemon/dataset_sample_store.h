// DatasetSampleStore: the cache planner's samples of datasets of objects,
// kept in the disk tier's folder so that a restarted galleyd plans for a
// dataset it has seen without reading the store again (docs/cache.md, "The
// disk tier").
//
// Sampling a dataset of objects (SampleDataset) costs a GET of each of up to
// 16 items' heads, about 1.5 MB on photographs, every time a galleyd meets
// the dataset; after a restart the disk tier serves the epoch without a GET,
// and this store makes the planner do the same. A sample is named by the
// dataset's content fingerprint (which covers the endpoint, the keys, their
// sizes and ETags, so an edited object names another sample) and the
// max_resolution it was taken at (which the inflation counts). Each sample
// is one file, `DIR/records-v1/sample-<fingerprint>-r<max_resolution>`, of
// fixed layout (dataset_sample_store.cc) ending in an XXH3-64 checksum of
// the rest; a file that is short, damaged or of another key is removed and
// read as no sample, so the planner samples the store again and saves that.
//
// What a stored sample gives is what SampleDataset measured: the inflation,
// the files sampled and the store's read (bytes and seconds), so the
// planner's storage rate for the dataset stays the object store's, as
// measured by the first galleyd that sampled it. The item count and mean
// size are the dataset's own, taken again from its listing.
//
// Files are written under a temporary name and renamed into place: a reader
// sees a whole sample or none. The folder is the disk tier's, which one
// galleyd holds at a time (DiskTier::Open's lock).
//
// Thread-safety: Load and Save may be called from any thread; the counters
// are atomic. Two Saves of one key race benignly (either file is whole).
#ifndef GALLEY_SERVER_DAEMON_DATASET_SAMPLE_STORE_H_
#define GALLEY_SERVER_DAEMON_DATASET_SAMPLE_STORE_H_

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>

#include "galley/daemon/node_probe.h"
#include "galley/dataset/content_fingerprint.h"
#include "galley/status.h"

namespace galley {

struct DatasetSampleStoreStats {
  uint64_t loads = 0;    // samples found and used
  uint64_t saves = 0;    // samples written
  uint64_t damaged = 0;  // files that failed their checks, removed
};

class DatasetSampleStore {
 public:
  // `dir` must exist and be galleyd's own (DiskTier::records_dir()).
  explicit DatasetSampleStore(std::filesystem::path dir);
  DatasetSampleStore(const DatasetSampleStore&) = delete;
  DatasetSampleStore& operator=(const DatasetSampleStore&) = delete;

  // The sample kept for the dataset `fingerprint` at `max_resolution`, or
  // none (never kept, or damaged: then removed and counted). Its items and
  // mean_encoded_bytes are as saved; the caller takes them from the dataset.
  std::optional<DatasetSample> Load(const ContentFingerprint& fingerprint, uint32_t max_resolution);

  // Keeps `sample` for the dataset; an error (logged by the caller) when the
  // file system refuses, which costs the next galleyd one sampling.
  Status Save(const ContentFingerprint& fingerprint, uint32_t max_resolution,
              const DatasetSample& sample);

  // Where the sample for the key is (or would be) kept.
  std::filesystem::path PathOf(const ContentFingerprint& fingerprint,
                               uint32_t max_resolution) const;

  DatasetSampleStoreStats Stats() const;

 private:
  const std::filesystem::path dir_;
  std::atomic<uint64_t> loads_{0};
  std::atomic<uint64_t> saves_{0};
  std::atomic<uint64_t> damaged_{0};
};

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_DATASET_SAMPLE_STORE_H_
