// The disk tier's layout at ImageNet's entry count: one file per entry
// (DiskTier) against one pack file read with pread at an offset, the
// alternative layout. Writes N entries through DiskTier, reopens it (the
// index scan a restart pays), then reads R entries in random order from
// both layouts, page cache warm (the per-entry cost of the layout itself:
// open, fstat, reads, close against one pread) and, with --cold, after
// dropping each file's pages (POSIX_FADV_DONTNEED).
//
// Usage: galley_disk_tier_bench --dir DIR [--entries 1281167] [--bytes 1000]
//                               [--reads 200000] [--cold]
// DIR must not exist; it is removed at the end. Needs about entries x 4 KiB
// of disk (5.2 GB for 1.28M entries): each entry takes at least one block.
// The restart and the reads run in a process of their own (the program
// runs itself with --reopen), so that its resident memory after the index
// scan is the index's.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "galley/cache/disk_tier.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
using galley::cache::Blob;
using galley::cache::DiskKey;
using galley::cache::DiskTier;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The process's resident memory, in bytes (VmRSS).
uint64_t ResidentBytes() {
  FILE* status = std::fopen("/proc/self/status", "r");
  char line[256];
  uint64_t kb = 0;
  while (status != nullptr && std::fgets(line, sizeof(line), status) != nullptr) {
    if (std::sscanf(line, "VmRSS: %lu kB", &kb) == 1) break;
  }
  if (status != nullptr) std::fclose(status);
  return kb * 1024;
}

DiskKey KeyOf(uint32_t item) { return DiskKey{0x0123456789abcdef, 0xfedcba9876543210, item}; }

}  // namespace

int main(int argc, char** argv) {
  fs::path dir;
  uint32_t entries = 1281167;
  size_t bytes = 1000;
  uint32_t reads = 200000;
  bool cold = false;
  bool reopen = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (arg == "--dir") {
      dir = next();
    } else if (arg == "--entries") {
      entries = static_cast<uint32_t>(std::stoul(next()));
    } else if (arg == "--bytes") {
      bytes = std::stoul(next());
    } else if (arg == "--reads") {
      reads = static_cast<uint32_t>(std::stoul(next()));
    } else if (arg == "--cold") {
      cold = true;
    } else if (arg == "--reopen") {
      reopen = true;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  if (dir.empty() || fs::exists(dir) != reopen) {
    std::fprintf(stderr, "give --dir, a folder that does not exist yet\n");
    return 2;
  }
  galley::cache::DiskTierOptions options;
  options.dir = dir / "tier";
  options.budget_bytes = uint64_t{1} << 50;
  options.write_queue_bytes = uint64_t{256} << 20;

  auto blob = std::make_shared<Blob>();
  blob->bytes.resize(bytes);
  for (size_t i = 0; i < bytes; ++i) blob->bytes[i] = static_cast<uint8_t>(i * 131);

  const fs::path pack = dir / "pack";
  if (!reopen) {
    fs::create_directories(dir);
    auto tier = DiskTier::Open(options);
    if (!tier.ok()) {
      std::fprintf(stderr, "%s\n", tier.status().ToString().c_str());
      return 1;
    }
    const auto start = Clock::now();
    for (uint32_t i = 0; i < entries; ++i) {
      while (!(*tier)->Put(KeyOf(i), i, blob)) (*tier)->WaitForWrites();
    }
    (*tier)->WaitForWrites();
    const double s = Seconds(start);
    std::printf("write: %u entries of %zu bytes in %.1f s, %.0f entries/s\n", entries, bytes, s,
                entries / s);
    tier->reset();
    // The alternative: every entry in one file, found by offset.
    const auto pack_start = Clock::now();
    FILE* out = std::fopen(pack.c_str(), "wb");
    for (uint32_t i = 0; i < entries; ++i) std::fwrite(blob->bytes.data(), 1, bytes, out);
    std::fclose(out);
    std::printf("pack file: %u entries written in %.1f s\n", entries, Seconds(pack_start));
    std::fflush(stdout);
    std::vector<std::string> again(argv, argv + argc);
    again.push_back("--reopen");
    std::vector<char*> again_argv;
    for (std::string& arg : again) again_argv.push_back(arg.data());
    again_argv.push_back(nullptr);
    ::execv("/proc/self/exe", again_argv.data());
    std::perror("execv");
    return 1;
  }

  const uint64_t resident_before = ResidentBytes();
  auto start = Clock::now();
  auto tier = DiskTier::Open(options);
  if (!tier.ok()) return 1;
  (*tier)->WaitForIndex();
  const galley::cache::DiskTierStats indexed = (*tier)->Stats();
  std::printf(
      "restart: indexed %llu entries (%.1f GiB) in %.2f s; the index holds %.0f MiB "
      "(%.0f bytes an entry)\n",
      static_cast<unsigned long long>(indexed.entries), indexed.bytes / double(1 << 30),
      Seconds(start), (ResidentBytes() - resident_before) / double(1 << 20),
      double(ResidentBytes() - resident_before) / double(indexed.entries));

  std::vector<uint32_t> order(entries);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  order.resize(std::min(reads, entries));

  const int pack_fd = ::open(pack.c_str(), O_RDONLY | O_CLOEXEC);
  auto drop = [&] {
    if (!cold) return;
    for (uint32_t item : order) {
      const int fd = ::open((*tier)->EntryPath(KeyOf(item)).c_str(), O_RDONLY | O_CLOEXEC);
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      ::close(fd);
    }
    ::posix_fadvise(pack_fd, 0, 0, POSIX_FADV_DONTNEED);
  };
  for (int round = 0; round < 2; ++round) {  // the first warms the page cache (unless --cold)
    drop();
    start = Clock::now();
    uint64_t found = 0;
    for (uint32_t item : order) found += (*tier)->Get(KeyOf(item), item) != nullptr;
    const double files_s = Seconds(start);
    drop();
    start = Clock::now();
    std::vector<uint8_t> buffer(bytes);
    uint64_t sum = 0;
    for (uint32_t item : order) {
      if (::pread(pack_fd, buffer.data(), bytes, static_cast<off_t>(uint64_t{item} * bytes)) ==
          static_cast<ssize_t>(bytes)) {
        sum += buffer[0];
      }
    }
    const double pack_s = Seconds(start);
    std::printf(
        "%s read of %zu random entries: one file each %.0f entries/s (%.1f us, %llu "
        "found), one pack file %.0f entries/s (%.1f us)\n",
        cold ? "cold" : (round == 0 ? "first" : "warm"), order.size(), order.size() / files_s,
        files_s / order.size() * 1e6, static_cast<unsigned long long>(found), order.size() / pack_s,
        pack_s / order.size() * 1e6);
    if (sum == 1) std::printf("\n");  // keeps the reads from being optimised away
  }
  ::close(pack_fd);
  tier->reset();
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  return 0;
}
