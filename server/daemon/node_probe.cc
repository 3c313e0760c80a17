#include "galley/daemon/node_probe.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <sched.h>
#include <sys/socket.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "galley/image/decoder.h"
#include "galley/image/max_resolution.h"
#include "galley/image/transforms.h"
#include "galley/unique_fd.h"

namespace galley {
namespace {

using Clock = std::chrono::steady_clock;

// What SampleDataset reads of one file at most: far more than any image's
// header takes (a JPEG's EXIF and ICC segments included), far less than a
// large member.
constexpr uint64_t kSampledHeadBytes = uint64_t{1} << 20;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A 500x375 image with smooth shading, edges and sensor-like noise: flat
// synthetic images compress (and decode) far faster than photographs, pure
// noise far slower, and either would mislead the planner.
Result<std::vector<uint8_t>> SyntheticJpeg() {
  constexpr int kWidth = 500, kHeight = 375;
  std::vector<uint8_t> pixels(size_t{kWidth} * kHeight * 3);
  std::mt19937 rng(12345);
  std::normal_distribution<double> noise(0.0, 10.0);
  for (int y = 0; y < kHeight; ++y) {
    uint8_t* row = &pixels[size_t{kWidth} * 3 * y];
    for (int x = 0; x < kWidth; ++x) {
      const double shade = 128 + 60 * std::sin(x * 0.031) * std::cos(y * 0.047);
      const double edge = ((x / 37 + y / 29) % 3) * 25.0;
      for (int c = 0; c < 3; ++c) {
        const double v = shade + edge * (c + 1) / 3.0 + noise(rng);
        row[x * 3 + c] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
    }
  }
  // Quality 90 with 4:2:0 chroma, as most photo datasets are stored.
  tjhandle compressor = tjInitCompress();
  if (compressor == nullptr) return Status::Internal("cannot create a TurboJPEG compressor");
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  const int failed = tjCompress2(compressor, pixels.data(), kWidth, kWidth * 3, kHeight, TJPF_RGB,
                                 &buffer, &size, TJSAMP_420, 90, 0);
  std::vector<uint8_t> bytes;
  if (failed == 0) bytes.assign(buffer, buffer + size);
  tjFree(buffer);
  tjDestroy(compressor);
  if (failed != 0) return Status::Internal("cannot encode the probe image");
  return bytes;
}

// Runs `fn` repeatedly for about `budget` (after one warm-up call) and
// returns calls per second.
template <typename Fn>
Result<double> Rate(std::chrono::duration<double> budget, Fn&& fn) {
  GALLEY_RETURN_IF_ERROR(fn());
  uint64_t calls = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    GALLEY_RETURN_IF_ERROR(fn());
    ++calls;
    elapsed = SecondsSince(start);
  } while (elapsed < budget.count());
  return calls / elapsed;
}

double MemoryCopyBytesPerSecond() {
  // 64 MiB: well past any last-level cache, so this is DRAM bandwidth.
  constexpr size_t kBytes = size_t{64} << 20;
  std::vector<uint8_t> src(kBytes, 1), dst(kBytes, 0);
  std::memcpy(dst.data(), src.data(), kBytes);  // faults the pages in
  constexpr int kRounds = 4;
  const auto start = Clock::now();
  for (int i = 0; i < kRounds; ++i) {
    src[i] = static_cast<uint8_t>(i);  // keeps the copies from being merged
    std::memcpy(dst.data(), src.data(), kBytes);
  }
  const double seconds = SecondsSince(start);
  volatile uint8_t sink = dst[kBytes / 2];
  (void)sink;
  return seconds > 0 ? kRounds * double(kBytes) / seconds : 0;
}

// This process's cgroup (v2) and its ancestors, innermost first, as paths
// under the cgroup root ("/a/b", "/a", "/"); empty when /proc says nothing.
std::vector<std::string> CgroupAncestors(const std::filesystem::path& proc) {
  std::ifstream membership(proc / "self/cgroup");
  std::string line, path;
  while (std::getline(membership, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  std::vector<std::string> out;
  if (path.empty()) return out;
  for (;;) {
    out.push_back(path);
    if (path == "/") break;
    const size_t slash = path.find_last_of('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return out;
}

// A cgroup file holding one number, or "max"; nullopt for "max" or nothing.
std::optional<uint64_t> CgroupNumber(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0') return std::nullopt;
  return value;
}

// The CPU quota of this process's cgroup (v2) in cores, rounded up; 0 when
// there is none or it cannot be read. Limits nest: the tightest quota on the
// way up from this cgroup binds.
unsigned CgroupCpuQuota() {
  unsigned tightest = 0;
  for (const std::string& path : CgroupAncestors("/proc")) {
    std::ifstream max_file("/sys/fs/cgroup" + path + "/cpu.max");
    std::string quota;
    uint64_t period = 0;
    if (max_file >> quota >> period && quota != "max" && period > 0) {
      char* end = nullptr;
      const unsigned long long q = std::strtoull(quota.c_str(), &end, 10);
      if (end != quota.c_str() && *end == '\0' && q > 0) {
        const auto cores = static_cast<unsigned>((q + period - 1) / period);
        tightest = tightest == 0 ? cores : std::min(tightest, cores);
      }
    }
  }
  return tightest;
}

}  // namespace

unsigned UsableCores() {
  unsigned cores = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = static_cast<unsigned>(CPU_COUNT(&set));
  if (cores == 0) cores = std::thread::hardware_concurrency();
  const unsigned quota = CgroupCpuQuota();
  if (quota != 0) cores = std::min(cores, quota);
  return std::max(1u, cores);
}

NodeMemory ReadNodeMemory(const std::filesystem::path& proc,
                          const std::filesystem::path& cgroup_root) {
  NodeMemory memory;
  std::ifstream meminfo(proc / "meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemTotal:") memory.total_bytes = kib << 10;
    if (key == "MemAvailable:") memory.available_bytes = kib << 10;
  }
  // A cgroup's memory.max bounds what this process may hold, and what it
  // may still take is memory.max less memory.current, at every level.
  for (const std::string& path : CgroupAncestors(proc)) {
    const std::filesystem::path dir = cgroup_root.string() + path;
    const std::optional<uint64_t> max = CgroupNumber(dir / "memory.max");
    if (!max) continue;
    const uint64_t current = CgroupNumber(dir / "memory.current").value_or(0);
    memory.total_bytes = std::min(memory.total_bytes, *max);
    memory.available_bytes = std::min(memory.available_bytes, *max > current ? *max - current : 0);
  }
  return memory;
}

Result<NodeMeasurements> MeasureNode(std::chrono::duration<double> budget) {
  const auto start = Clock::now();
  GALLEY_ASSIGN_OR_RETURN(const std::vector<uint8_t> jpeg, SyntheticJpeg());
  GALLEY_ASSIGN_OR_RETURN(const image::TransformPipeline pipeline,
                          image::TransformPipeline::FromJson(nlohmann::json::parse(
                              R"({"ops": [{"op": "RandomResizedCrop", "size": 224},
                      {"op": "RandomHorizontalFlip"}]})")));
  std::vector<std::byte> sample(pipeline.sample_bytes());
  const image::DecodeOptions decode_options;
  uint64_t item = 0;

  NodeMeasurements m;
  GALLEY_ASSIGN_OR_RETURN(m.decode_augment_per_core_per_s, Rate(budget, [&]() -> Status {
                            GALLEY_ASSIGN_OR_RETURN(auto decoded,
                                                    image::Decode(jpeg, decode_options));
                            return pipeline.Apply(decoded, 0, 0, item++, sample);
                          }));
  GALLEY_ASSIGN_OR_RETURN(const image::RgbImage decoded, image::Decode(jpeg, decode_options));
  GALLEY_ASSIGN_OR_RETURN(m.augment_per_core_per_s, Rate(budget, [&]() -> Status {
                            return pipeline.Apply(decoded, 0, 0, item++, sample);
                          }));
  m.memory_bytes_per_s = MemoryCopyBytesPerSecond();
  m.probe_seconds = SecondsSince(start);
  return m;
}

Result<double> MeasureAugmentRate(const image::TransformPipeline& pipeline,
                                  std::chrono::duration<double> budget) {
  GALLEY_ASSIGN_OR_RETURN(const std::vector<uint8_t> jpeg, SyntheticJpeg());
  GALLEY_ASSIGN_OR_RETURN(const image::RgbImage decoded,
                          image::Decode(jpeg, image::DecodeOptions{}));
  std::vector<std::byte> sample(pipeline.sample_bytes());
  uint64_t item = 0;
  // Different items draw different ops (RandAugment's choice, a blur or
  // not), so the rate averages over the pipeline's random branches.
  return Rate(budget, [&]() -> Status { return pipeline.Apply(decoded, 0, 0, item++, sample); });
}

Result<DatasetSample> SampleDataset(const Dataset& dataset, uint32_t max_resolution,
                                    uint32_t max_files, uint64_t max_bytes) {
  DatasetSample sample;
  sample.items = dataset.size();
  if (dataset.size() == 0) return Status::InvalidArgument("the dataset has no items");
  sample.mean_encoded_bytes = double(dataset.total_bytes()) / double(dataset.size());

  // Spread over the ids, so an ImageFolder sample spans its classes.
  const uint64_t n = dataset.size();
  const uint64_t files = std::min<uint64_t>(max_files, n);
  uint64_t encoded_total = 0;
  uint64_t decoded_total = 0;
  for (uint64_t i = 0; i < files && sample.bytes_read < max_bytes; ++i) {
    const auto id = static_cast<ItemId>(i * n / files);
    const auto start = Clock::now();
    // Only the file's head: a large member read whole here would sit in
    // memory beside the pipeline's own read of it.
    uint64_t item_bytes = 0;
    auto bytes = dataset.ReadHead(id, kSampledHeadBytes, &item_bytes);
    sample.read_seconds += SecondsSince(start);
    if (!bytes.ok() && bytes.status().code() == StatusCode::kUnavailable) break;
    if (!bytes.ok() || bytes->empty()) continue;
    sample.bytes_read += bytes->size();
    // The header gives the decoded size without decoding; formats without a
    // header parser here are decoded when the whole file was read.
    image::ImageSize size;
    auto header = image::ReadHeader(*bytes);
    if (header.ok() && header->width > 0 && header->height > 0) {
      size = {header->width, header->height};
    } else {
      if (bytes->size() < item_bytes) continue;
      auto decoded = image::Decode(*bytes, image::DecodeOptions{});
      if (!decoded.ok()) continue;
      size = {decoded->width, decoded->height};
    }
    size = image::MaxResolutionSize(size.width, size.height, max_resolution);
    const uint64_t decoded_bytes = uint64_t(size.width) * uint64_t(size.height) * 3;
    encoded_total += item_bytes;
    decoded_total += decoded_bytes;
    ++sample.files_sampled;
  }
  if (sample.files_sampled == 0) {
    return Status::InvalidArgument("none of the sampled files of " + dataset.root().string() +
                                   " could be read and decoded");
  }
  sample.inflation = double(decoded_total) / double(encoded_total);
  return sample;
}

double LinkBytesPerSecond(const std::string& host, uint16_t port) {
  std::string name = host;
  if (name.size() > 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(name.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return 0;
  // Connecting a UDP socket sends nothing; it only picks the route, whose
  // local address names the interface.
  sockaddr_storage local{};
  socklen_t length = sizeof(local);
  bool routed = false;
  {
    UniqueFd fd(::socket(found->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    routed = fd.valid() && ::connect(fd.get(), found->ai_addr, found->ai_addrlen) == 0 &&
             ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &length) == 0;
  }
  ::freeaddrinfo(found);
  if (!routed) return 0;
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) != 0) return 0;
  std::string interface;
  for (ifaddrs* i = interfaces; i != nullptr && interface.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != local.ss_family) continue;
    const bool same =
        local.ss_family == AF_INET
            ? std::memcmp(&reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr,
                          &reinterpret_cast<const sockaddr_in*>(&local)->sin_addr,
                          sizeof(in_addr)) == 0
            : std::memcmp(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                          &reinterpret_cast<const sockaddr_in6*>(&local)->sin6_addr,
                          sizeof(in6_addr)) == 0;
    if (same) interface = i->ifa_name;
  }
  ::freeifaddrs(interfaces);
  if (interface.empty() || interface.find('/') != std::string::npos) return 0;
  std::ifstream speed("/sys/class/net/" + interface + "/speed");
  long megabits = 0;
  if (!(speed >> megabits) || megabits <= 0) return 0;  // loopback reads fail or say -1
  return static_cast<double>(megabits) * 1e6 / 8;
}

}  // namespace galley
