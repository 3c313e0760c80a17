// 100 KB ranged GETs through S3Client (server/objectstore/s3_client.h)
// from a local `rclone serve s3`, with 1, 8 and 64 requests in flight: GETs/s
// and MB/s of what the client sustains on one thread (rclone, on the same
// machine, serves from the page cache). Each benchmark keeps its window of
// GETs full: a completed GET makes room for the next. Real time.
// BM_CurlEasyBaseline is the floor to read them against: the same GETs,
// signed the same way, one after another on one kept connection with
// libcurl's easy interface, no galley code between.
//
// Besides GETs/s and bytes/s (which on a shared machine say as much about
// its load as about the client), each reports the CPU time per GET of this
// process (the client: its thread and libcurl's work) and of rclone.
//
//   scripts/build.sh objectstore_bench && build/bench/objectstore_bench
#include <benchmark/benchmark.h>
#include <curl/curl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>

#include "galley/mutex.h"
#include "galley/objectstore/s3_client.h"
#include "tests/unit/rclone_s3_server.h"

namespace galley::objectstore {
namespace {

constexpr uint64_t kObjectBytes = 64ull << 20;
constexpr uint64_t kGetBytes = 100'000;

// One rclone for the whole run, its object written once and read once;
// stopped at exit.
testing::RcloneS3Server& Server() {
  static testing::RcloneS3Server server;
  static const bool started = [] {
    server.Put("bench", "object.bin", testing::PseudoRandomBytes(kObjectBytes, 1));
    Status status = server.Start();
    // rclone hashes an object for its ETag (MD5) on its first read: done
    // here once, not by the first window of GETs all at once.
    S3ClientOptions options;
    options.allowed_endpoints = {server.url()};
    Result<std::unique_ptr<ObjectStore>> store = OpenS3Client(options);
    if (status.ok()) status = store.status();
    if (status.ok()) {
      status = (*store)->Get(server.access(), "bench", "object.bin", 0, kGetBytes, "").status();
    }
    if (!status.ok()) {
      std::fprintf(stderr, "objectstore_bench: %s\n", status.ToString().c_str());
      std::exit(2);
    }
    return true;
  }();
  (void)started;
  return server;
}

// CPU seconds this process has used, all its threads.
double OwnCpuSeconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

// CPU seconds process `pid` has used (/proc/PID/stat: utime and stime).
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t after_name = text.rfind(')');
  if (after_name == std::string::npos) return 0;
  std::istringstream fields(text.substr(after_name + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Sets the CPU-per-GET counters from the CPU used since `client0`/`server0`.
void ReportCpu(benchmark::State& state, double client0, double server0, pid_t server) {
  const double gets = static_cast<double>(state.iterations());
  state.counters["client_cpu_us_per_get"] = (OwnCpuSeconds() - client0) * 1e6 / gets;
  state.counters["rclone_cpu_us_per_get"] = (ProcessCpuSeconds(server) - server0) * 1e6 / gets;
}

void BM_RangedGet100KB(benchmark::State& state) {
  const auto window = static_cast<uint32_t>(state.range(0));
  testing::RcloneS3Server& server = Server();
  S3ClientOptions options;
  options.allowed_endpoints = {server.url()};
  options.max_in_flight = window;
  Result<std::unique_ptr<ObjectStore>> opened = OpenS3Client(options);
  if (!opened.ok()) {
    state.SkipWithError(opened.status().ToString().c_str());
    return;
  }
  std::unique_ptr<ObjectStore> store = std::move(opened).value();
  const Access access = server.access();
  std::mt19937_64 draw(3);
  const uint64_t slots = kObjectBytes / kGetBytes;

  Mutex mu;
  CondVar changed;
  uint32_t outstanding = 0;
  uint64_t failures = 0;
  const auto issue = [&] {
    const uint64_t offset = (draw() % slots) * kGetBytes;
    store->GetAsync(access, "bench", "object.bin", offset, kGetBytes, "",
                    [&](Result<std::vector<uint8_t>> got) {
                      MutexLock lock(&mu);
                      if (!got.ok() || got->size() != kGetBytes) ++failures;
                      --outstanding;
                      changed.Signal();
                    });
  };
  // Warm-up outside the timed loop: connections open, rclone's file open.
  for (uint32_t i = 0; i < window * 2; ++i) {
    {
      MutexLock lock(&mu);
      ++outstanding;
    }
    issue();
  }
  {
    MutexLock lock(&mu);
    while (outstanding > 0) changed.Wait(&mu);
  }
  const double client0 = OwnCpuSeconds();
  const double server0 = ProcessCpuSeconds(server.pid());
  for (auto _ : state) {
    {
      MutexLock lock(&mu);
      while (outstanding >= window) changed.Wait(&mu);
      ++outstanding;
    }
    issue();
  }
  {
    MutexLock lock(&mu);
    while (outstanding > 0) changed.Wait(&mu);
    if (failures > 0) state.SkipWithError("some GETs failed");
  }
  ReportCpu(state, client0, server0, server.pid());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kGetBytes));
  state.counters["retries"] = static_cast<double>(store->counters().retries.load());
}
BENCHMARK(BM_RangedGet100KB)
    ->ArgName("in_flight")
    ->Arg(1)
    ->Arg(8)
    ->Arg(64)
    ->UseRealTime()
    ->MinTime(3.0)
    ->Unit(benchmark::kMicrosecond);

size_t CountBytes(char*, size_t size, size_t count, void* user) {
  *static_cast<uint64_t*>(user) += size * count;
  return size * count;
}

void BM_CurlEasyBaseline(benchmark::State& state) {
  testing::RcloneS3Server& server = Server();
  CURL* easy = curl_easy_init();
  const std::string url = server.url() + "/bench/object.bin";
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
  curl_easy_setopt(easy, CURLOPT_USERNAME, testing::RcloneS3Server::kAccessKey);
  curl_easy_setopt(easy, CURLOPT_PASSWORD, testing::RcloneS3Server::kSecret);
  uint64_t received = 0;
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, CountBytes);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &received);
  std::mt19937_64 draw(3);
  const uint64_t slots = kObjectBytes / kGetBytes;
  uint64_t failures = 0;
  const double client0 = OwnCpuSeconds();
  const double server0 = ProcessCpuSeconds(server.pid());
  for (auto _ : state) {
    const uint64_t offset = (draw() % slots) * kGetBytes;
    curl_slist* headers = curl_slist_append(nullptr, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    const std::string range =
        "Range: bytes=" + std::to_string(offset) + "-" + std::to_string(offset + kGetBytes - 1);
    headers = curl_slist_append(headers, range.c_str());
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    received = 0;
    if (curl_easy_perform(easy) != CURLE_OK || received != kGetBytes) ++failures;
    curl_slist_free_all(headers);
  }
  ReportCpu(state, client0, server0, server.pid());
  curl_easy_cleanup(easy);
  if (failures > 0) state.SkipWithError("some GETs failed");
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kGetBytes));
}
BENCHMARK(BM_CurlEasyBaseline)->UseRealTime()->MinTime(3.0)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace galley::objectstore

BENCHMARK_MAIN();
