#include "galley/daemon/dataset_sample_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "galley/errno_text.h"
#include "galley/unique_fd.h"

namespace galley {
namespace {

// A sample's file, 88 bytes, in the host's byte order (the folder is the
// node's own):
//    0  magic "GLYSAMP1"          8  version (u32)   12  max_resolution (u32)
//   16  fingerprint high (u64)   24  fingerprint low (u64)
//   32  items (u64)              40  mean encoded bytes (f64)
//   48  inflation (f64)          56  files sampled (u32)   60  zero (u32)
//   64  bytes read (u64)         72  read seconds (f64)
//   80  XXH3-64 of bytes 0..79
constexpr char kMagic[8] = {'G', 'L', 'Y', 'S', 'A', 'M', 'P', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kChecked = 80;
constexpr size_t kFileBytes = kChecked + 8;

template <typename T>
void Put(unsigned char* file, size_t at, T value) {
  std::memcpy(file + at, &value, sizeof(T));
}

template <typename T>
T Take(const unsigned char* file, size_t at) {
  T value;
  std::memcpy(&value, file + at, sizeof(T));
  return value;
}

// Writes all of `bytes` to `fd`; false (errno set) when the file system
// refuses.
bool WriteAll(int fd, const unsigned char* bytes, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

DatasetSampleStore::DatasetSampleStore(std::filesystem::path dir) : dir_(std::move(dir)) {}

std::filesystem::path DatasetSampleStore::PathOf(const ContentFingerprint& fingerprint,
                                                 uint32_t max_resolution) const {
  return dir_ / ("sample-" + fingerprint.Hex() + "-r" + std::to_string(max_resolution));
}

std::optional<DatasetSample> DatasetSampleStore::Load(const ContentFingerprint& fingerprint,
                                                      uint32_t max_resolution) {
  const std::filesystem::path path = PathOf(fingerprint, max_resolution);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) {
    // Not kept; a symlink put in its place (ELOOP) is not galleyd's file.
    if (errno == ELOOP) {
      ::unlink(path.c_str());
      damaged_++;
    }
    return std::nullopt;
  }
  unsigned char file[kFileBytes + 1] = {};
  size_t got = 0;
  while (got < sizeof(file)) {
    const ssize_t n = ::read(fd.get(), file + got, sizeof(file) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  DatasetSample sample;
  sample.items = Take<uint64_t>(file, 32);
  sample.mean_encoded_bytes = Take<double>(file, 40);
  sample.inflation = Take<double>(file, 48);
  sample.files_sampled = Take<uint32_t>(file, 56);
  sample.bytes_read = Take<uint64_t>(file, 64);
  sample.read_seconds = Take<double>(file, 72);
  // A file that is not exactly one sample of this key, with its checksum
  // and sane figures, is not used: the store is sampled again.
  const bool sound =
      got == kFileBytes && std::memcmp(file, kMagic, sizeof(kMagic)) == 0 &&
      Take<uint32_t>(file, 8) == kVersion && Take<uint32_t>(file, 12) == max_resolution &&
      Take<uint64_t>(file, 16) == fingerprint.high && Take<uint64_t>(file, 24) == fingerprint.low &&
      Take<uint64_t>(file, kChecked) == XXH3_64bits(file, kChecked) &&
      std::isfinite(sample.inflation) && sample.inflation > 0 && sample.files_sampled > 0 &&
      std::isfinite(sample.read_seconds) && sample.read_seconds >= 0;
  if (!sound) {
    ::unlink(path.c_str());
    damaged_++;
    return std::nullopt;
  }
  loads_++;
  return sample;
}

Status DatasetSampleStore::Save(const ContentFingerprint& fingerprint, uint32_t max_resolution,
                                const DatasetSample& sample) {
  unsigned char file[kFileBytes] = {};
  std::memcpy(file, kMagic, sizeof(kMagic));
  Put<uint32_t>(file, 8, kVersion);
  Put<uint32_t>(file, 12, max_resolution);
  Put<uint64_t>(file, 16, fingerprint.high);
  Put<uint64_t>(file, 24, fingerprint.low);
  Put<uint64_t>(file, 32, sample.items);
  Put<double>(file, 40, sample.mean_encoded_bytes);
  Put<double>(file, 48, sample.inflation);
  Put<uint32_t>(file, 56, sample.files_sampled);
  Put<uint64_t>(file, 64, sample.bytes_read);
  Put<double>(file, 72, sample.read_seconds);
  Put<uint64_t>(file, kChecked, XXH3_64bits(file, kChecked));

  const std::filesystem::path path = PathOf(fingerprint, max_resolution);
  const std::string temp = path.string() + ".tmp-" + std::to_string(::getpid());
  ::unlink(temp.c_str());  // a leftover of a galleyd with this pid
  {
    UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd.valid() || !WriteAll(fd.get(), file, sizeof(file))) {
      const int error = errno;
      ::unlink(temp.c_str());
      return Status::Internal("cannot write " + temp + ": " + ErrnoText(error));
    }
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    return Status::Internal("cannot rename " + temp + " to " + path.string() + ": " +
                            ErrnoText(error));
  }
  saves_++;
  return Status::Ok();
}

DatasetSampleStoreStats DatasetSampleStore::Stats() const {
  return {loads_.load(), saves_.load(), damaged_.load()};
}

}  // namespace galley
