// 100 KB ranged GETs through S3Client (server/objectstore/s3_client.h)
// from a local `rclone serve s3`, with 1, 8 and 64 requests in flight: GETs/s
// and MB/s of what the client sustains on one thread (rclone, on the same
// machine, serves from the page cache). Each benchmark keeps its window of
// GETs full: a completed GET makes room for the next. Real time.
// BM_CurlEasyBaseline is the floor to read them against: the same GETs,
// signed the same way, one after another on one kept connection with
// libcurl's easy interface, no galley code between.
//
//   scripts/build.sh objectstore_bench && build/bench/objectstore_bench
#include <benchmark/benchmark.h>
#include <curl/curl.h>

#include <cstdio>
#include <memory>
#include <random>

#include "galley/mutex.h"
#include "galley/objectstore/s3_client.h"
#include "tests/unit/rclone_s3_server.h"

namespace galley::objectstore {
namespace {

constexpr uint64_t kObjectBytes = 64ull << 20;
constexpr uint64_t kGetBytes = 100'000;

// One rclone for the whole run, its object written once; stopped at exit.
testing::RcloneS3Server& Server() {
  static testing::RcloneS3Server server;
  static const bool started = [] {
    server.Put("bench", "object.bin", testing::PseudoRandomBytes(kObjectBytes, 1));
    if (Status status = server.Start(); !status.ok()) {
      std::fprintf(stderr, "objectstore_bench: %s\n", status.ToString().c_str());
      std::exit(2);
    }
    return true;
  }();
  (void)started;
  return server;
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
  curl_easy_cleanup(easy);
  if (failures > 0) state.SkipWithError("some GETs failed");
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kGetBytes));
}
BENCHMARK(BM_CurlEasyBaseline)->UseRealTime()->MinTime(3.0)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace galley::objectstore

BENCHMARK_MAIN();
