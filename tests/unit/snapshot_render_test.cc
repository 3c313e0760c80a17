// The two renderings of galleyd's snapshots, from snapshots with known,
// pairwise different numbers: every metric of /metrics with its labels and
// value, and every key of every query reply with its value and type (what
// galleyctl, the Python module and the tests read). A metric or key dropped,
// renamed or fed from the wrong field fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "galley/snapshots/prometheus_text.h"
#include "galley/snapshots/query_text.h"
#include "galley/snapshots/snapshot_json.h"
#include "galley/snapshots/snapshots.h"

namespace galley {
namespace {

using nlohmann::json;

PipelineSnapshot Pipeline() {
  PipelineSnapshot p;
  p.threads = 4;
  p.cache = true;
  p.file_reads = 101;
  p.field_reads = 110;
  p.bytes_read = 102;
  p.decodes = 103;
  p.region_decodes = 104;
  p.augments = 105;
  p.decoded_hits = 106;
  p.encoded_hits = 107;
  p.augmented_hits = 108;
  p.failures = 109;
  p.packs = 111;
  p.unpacks = 112;
  p.unpack_failures = 113;
  p.read_seconds = 1.25;
  p.decode_seconds = 2.5;
  p.augment_seconds = 3.75;
  p.pack_seconds = 0.5;
  p.unpack_seconds = 0.25;
  return p;
}

// Numbers from `base` up, one per field.
SamplerGroupSnapshot Group(const std::string& dataset, const std::string& policy, uint64_t base) {
  SamplerGroupSnapshot g{dataset, policy, base, base + 1, base + 2, 0.5 + double(base), base + 3};
  g.job_seeds = base + 4;
  g.orders_follow_seeds = policy != "uniform";
  g.file_reads = base + 5;
  g.decodes = base + 6;
  g.cache_hits = base + 7;
  g.file_reads_per_request = 0.25 + double(base);
  g.decodes_per_request = 0.125 + double(base);
  g.cache_hits_per_request = 0.0625 + double(base);
  return g;
}

JobSnapshot Job(uint64_t id, const std::string& name, uint64_t base) {
  JobSnapshot j;
  j.job_id = id;
  j.name = name;
  j.dataset = "/data/a";
  j.owner_uid = 1000 + uint32_t(base);
  j.owner_pid = 4000 + int32_t(base);
  j.policy = "uniform";
  j.batch_size = 32;
  j.epoch_size = base + 1;
  j.batches_per_epoch = base + 2;
  j.prefetch = 4;
  j.segment_bytes = base + 3;
  j.batches = base + 4;
  j.batches_unread = base + 14;
  j.samples = base + 5;
  j.skipped = base + 6;
  j.epochs_completed = base + 7;
  j.produce_seconds = double(base) + 0.125;
  j.ring_full_seconds = double(base) + 0.25;
  j.peer_hold_seconds = double(base) + 0.375;
  j.peer_holds = base + 15;
  j.drawn_ahead = base + 26;
  j.drawn_ahead_peak = base + 27;
  j.lag = base + 28;
  j.lag_peak = base + 29;
  j.consumer_wait_seconds = double(base) + 0.5;
  j.consumer_waits = base + 8;
  j.uptime_seconds = double(base) + 0.625;
  j.samples_per_second = double(base) + 0.75;
  j.rank = uint32_t(base) + 9;
  j.world_size = uint32_t(base) + 10;
  j.nodes = uint32_t(base) + 11;
  j.node_rank = uint32_t(base) + 12;
  j.shard_seed = base + 13;
  j.credential_refreshes = base + 30;
  j.credential_refreshes_refused = base + 31;
  return j;
}

TierSnapshot Tier(uint64_t base) {
  return {base, base + 1, base + 2, base + 3, base + 4, 0.25, base + 5, base + 6, base + 7};
}

PlannerInputsSnapshot Inputs() {
  PlannerInputsSnapshot in;
  in.storage_bytes_per_s = {1.5e8, "measured"};
  in.decode_augment_per_core_per_s = {400.5, "override"};
  in.augment_per_core_per_s = {2000.5, "measured"};
  in.cores = {8, "worker threads"};
  in.memory_bytes_per_s = {5e9, "measured"};
  in.jobs_consumption_per_s = {0, "unbounded"};
  in.dataset_items = {1000, "datasets"};
  in.encoded_item_bytes = {110000.5, "datasets"};
  in.inflation = {5.5, "measured"};
  in.augmented_item_bytes = {150528, "jobs"};
  in.identical_pipeline_jobs = {2, "jobs"};
  in.augmented_reuse_limit = {3, "cache"};
  in.cache_bytes = {1 << 30, "cache"};
  return in;
}

DaemonStatusSnapshot Status() {
  DaemonStatusSnapshot s;
  s.version = "9.8.7";
  s.protocol_version = 6;
  s.uid = 990;
  s.owner_only = false;
  s.admin = true;
  s.pid = 4321;
  s.socket = "/run/galley/galleyd.sock";
  s.uptime_seconds = 12.5;
  s.jobs = 2;
  s.your_jobs = 1;
  s.your_memory_bytes = 5000;
  s.jobs_opened = 11;
  s.jobs_refused = 12;
  s.draining = true;
  s.protocol_errors = 3;
  s.batches = {31, 32};
  s.datasets = 13;
  s.shm_bytes = 4096;
  s.limits = {64, 1 << 20, 1 << 30, 8, 1 << 28, 32, 1 << 27};
  s.descriptors = {1201, 1202, 1203, 1204, 1205, 1206, 1207};
  s.object_store = {1301, 1302, 1303, 1304, 1305, 1306, 1307, 1308};
  s.pipeline = Pipeline();
  // A dataset path with every character a label must escape.
  s.samplers = {Group("/data/a", "uniform", 200), Group("/data/\"b\"\\c\nd", "ods", 300)};
  return s;
}

CacheSnapshot Cache() {
  CacheSnapshot c;
  c.cache_bytes = 1 << 30;
  c.eviction = "refcount";
  c.split = {20, 50, 30};
  c.split_source = "planner";
  c.encoded = Tier(500);
  c.decoded = Tier(600);
  c.augmented = {Tier(700), 71, 72, 3};
  c.decoded_arena = ArenaSnapshot{1 << 30, 900, 1000, 800, 3, 2};
  c.keys_with_demand = 81;
  c.total_demand = 82;
  c.planner_inputs = Inputs();
  c.pipeline = Pipeline();
  return c;
}

MetricsSnapshot Metrics() {
  return {Status(), {Job(1, "train", 10), Job(2, "eval \"x\"", 20)}, Cache()};
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The sample lines (not comments), sorted.
std::vector<std::string> Samples(const std::string& text) {
  std::vector<std::string> samples;
  for (const auto& line : Lines(text)) {
    if (!line.starts_with("#")) samples.push_back(line);
  }
  std::sort(samples.begin(), samples.end());
  return samples;
}

const std::map<std::string, std::string> kFamilies = {
    {"galley_up_seconds", "gauge"},
    {"galley_jobs", "gauge"},
    {"galley_shm_bytes", "gauge"},
    {"galley_protocol_errors_total", "counter"},
    {"galley_batches_prepared_total", "counter"},
    {"galley_batches_unread_total", "counter"},
    {"galley_descriptors_open", "gauge"},
    {"galley_descriptors_limit", "gauge"},
    {"galley_descriptor_exhaustion_total", "counter"},
    {"galley_s3_gets_total", "counter"},
    {"galley_s3_heads_total", "counter"},
    {"galley_s3_bytes_total", "counter"},
    {"galley_s3_retries_total", "counter"},
    {"galley_s3_failures_total", "counter"},
    {"galley_s3_in_flight", "gauge"},
    {"galley_shard_descriptors_open", "gauge"},
    {"galley_shard_descriptors_limit", "gauge"},
    {"galley_shard_descriptors_evicted_total", "counter"},
    {"galley_shard_descriptors_released_total", "counter"},
    {"galley_pipeline_file_reads_total", "counter"},
    {"galley_pipeline_field_reads_total", "counter"},
    {"galley_pipeline_bytes_read_total", "counter"},
    {"galley_pipeline_decodes_total", "counter"},
    {"galley_pipeline_augments_total", "counter"},
    {"galley_pipeline_packs_total", "counter"},
    {"galley_pipeline_unpacks_total", "counter"},
    {"galley_pipeline_unpack_failures_total", "counter"},
    {"galley_pipeline_failures_total", "counter"},
    {"galley_pipeline_read_seconds_total", "counter"},
    {"galley_pipeline_decode_seconds_total", "counter"},
    {"galley_pipeline_augment_seconds_total", "counter"},
    {"galley_pipeline_pack_seconds_total", "counter"},
    {"galley_pipeline_unpack_seconds_total", "counter"},
    {"galley_sampler_requests_total", "counter"},
    {"galley_sampler_loads_total", "counter"},
    {"galley_sampler_loads_per_request", "gauge"},
    {"galley_sampler_file_reads_total", "counter"},
    {"galley_sampler_decodes_total", "counter"},
    {"galley_sampler_cache_hits_total", "counter"},
    {"galley_job_samples_total", "counter"},
    {"galley_job_batches_total", "counter"},
    {"galley_job_batches_unread_total", "counter"},
    {"galley_job_skipped_total", "counter"},
    {"galley_job_samples_per_second", "gauge"},
    {"galley_job_ring_full_seconds_total", "counter"},
    {"galley_job_consumer_wait_seconds_total", "counter"},
    {"galley_job_peer_hold_seconds_total", "counter"},
    {"galley_job_peer_holds_total", "counter"},
    {"galley_job_drawn_ahead", "gauge"},
    {"galley_job_lag", "gauge"},
    {"galley_job_lag_peak", "gauge"},
    {"galley_cache_hits_total", "counter"},
    {"galley_cache_misses_total", "counter"},
    {"galley_cache_bytes", "gauge"},
    {"galley_cache_budget_bytes", "gauge"},
    {"galley_cache_arena_populated_bytes", "gauge"},
    {"galley_cache_arena_allocated_bytes", "gauge"},
};

// Each family exactly once, as one block: HELP, TYPE with its type, then
// only its own samples.
void ExpectWellFormedFamilies(const std::string& text) {
  std::map<std::string, int> seen;
  std::string current;
  for (const auto& line : Lines(text)) {
    if (line.starts_with("# HELP ")) {
      current = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_EQ(seen[current]++, 0) << "second HELP for " << current;
      EXPECT_GT(line.size(), 8 + current.size()) << "empty help: " << line;
    } else if (line.starts_with("# TYPE ")) {
      auto family = kFamilies.find(current);
      ASSERT_NE(family, kFamilies.end()) << "unexpected family " << current;
      EXPECT_EQ(line, "# TYPE " + current + " " + family->second);
    } else {
      const std::string name = line.substr(0, line.find_first_of("{ "));
      EXPECT_EQ(name, current) << "sample outside its family: " << line;
    }
  }
  for (const auto& [family, type] : kFamilies) EXPECT_EQ(seen[family], 1) << family;
}

TEST(PrometheusTextTest, EveryMetricWithItsLabelsAndValue) {
  const std::string text = RenderPrometheus(Metrics());
  ExpectWellFormedFamilies(text);
  const std::string a = R"(dataset="/data/a",policy="uniform")";
  const std::string b = R"(dataset="/data/\"b\"\\c\nd",policy="ods")";
  const std::string j1 = R"(job="1",name="train")", j2 = R"(job="2",name="eval \"x\"")";
  std::vector<std::string> expected = {
      "galley_up_seconds 12.5",
      "galley_jobs 2",
      "galley_shm_bytes 4096",
      "galley_protocol_errors_total 3",
      "galley_batches_prepared_total 31",
      "galley_batches_unread_total 32",
      "galley_descriptors_open 1201",
      "galley_descriptors_limit 1202",
      "galley_s3_gets_total 1301",
      "galley_s3_heads_total 1302",
      "galley_s3_bytes_total 1304",
      "galley_s3_retries_total 1305",
      "galley_s3_failures_total 1306",
      "galley_s3_in_flight 1307",
      "galley_shard_descriptors_open 1203",
      "galley_shard_descriptors_limit 1204",
      "galley_shard_descriptors_evicted_total 1205",
      "galley_shard_descriptors_released_total 1206",
      "galley_descriptor_exhaustion_total 1207",
      "galley_pipeline_file_reads_total 101",
      "galley_pipeline_field_reads_total 110",
      "galley_pipeline_bytes_read_total 102",
      "galley_pipeline_decodes_total 103",
      "galley_pipeline_augments_total 105",
      "galley_pipeline_packs_total 111",
      "galley_pipeline_unpacks_total 112",
      "galley_pipeline_unpack_failures_total 113",
      "galley_pipeline_failures_total 109",
      "galley_pipeline_read_seconds_total 1.25",
      "galley_pipeline_decode_seconds_total 2.5",
      "galley_pipeline_augment_seconds_total 3.75",
      "galley_pipeline_pack_seconds_total 0.5",
      "galley_pipeline_unpack_seconds_total 0.25",
      "galley_sampler_requests_total{" + a + "} 201",
      "galley_sampler_loads_total{" + a + "} 202",
      "galley_sampler_loads_per_request{" + a + "} 200.5",
      "galley_sampler_file_reads_total{" + a + "} 205",
      "galley_sampler_decodes_total{" + a + "} 206",
      "galley_sampler_cache_hits_total{" + a + "} 207",
      "galley_sampler_requests_total{" + b + "} 301",
      "galley_sampler_loads_total{" + b + "} 302",
      "galley_sampler_loads_per_request{" + b + "} 300.5",
      "galley_sampler_file_reads_total{" + b + "} 305",
      "galley_sampler_decodes_total{" + b + "} 306",
      "galley_sampler_cache_hits_total{" + b + "} 307",
      "galley_job_samples_total{" + j1 + "} 15",
      "galley_job_batches_total{" + j1 + "} 14",
      "galley_job_batches_unread_total{" + j1 + "} 24",
      "galley_job_skipped_total{" + j1 + "} 16",
      "galley_job_samples_per_second{" + j1 + "} 10.75",
      "galley_job_ring_full_seconds_total{" + j1 + "} 10.25",
      "galley_job_consumer_wait_seconds_total{" + j1 + "} 10.5",
      "galley_job_peer_hold_seconds_total{" + j1 + "} 10.375",
      "galley_job_peer_holds_total{" + j1 + "} 25",
      "galley_job_drawn_ahead{" + j1 + "} 36",
      "galley_job_lag{" + j1 + "} 38",
      "galley_job_lag_peak{" + j1 + "} 39",
      "galley_job_samples_total{" + j2 + "} 25",
      "galley_job_batches_total{" + j2 + "} 24",
      "galley_job_batches_unread_total{" + j2 + "} 34",
      "galley_job_skipped_total{" + j2 + "} 26",
      "galley_job_samples_per_second{" + j2 + "} 20.75",
      "galley_job_ring_full_seconds_total{" + j2 + "} 20.25",
      "galley_job_consumer_wait_seconds_total{" + j2 + "} 20.5",
      "galley_job_peer_hold_seconds_total{" + j2 + "} 20.375",
      "galley_job_peer_holds_total{" + j2 + "} 35",
      "galley_job_drawn_ahead{" + j2 + "} 46",
      "galley_job_lag{" + j2 + "} 48",
      "galley_job_lag_peak{" + j2 + "} 49",
      R"(galley_cache_hits_total{tier="encoded"} 503)",
      R"(galley_cache_misses_total{tier="encoded"} 504)",
      R"(galley_cache_bytes{tier="encoded"} 501)",
      R"(galley_cache_budget_bytes{tier="encoded"} 500)",
      R"(galley_cache_hits_total{tier="decoded"} 603)",
      R"(galley_cache_misses_total{tier="decoded"} 604)",
      R"(galley_cache_bytes{tier="decoded"} 601)",
      R"(galley_cache_budget_bytes{tier="decoded"} 600)",
      R"(galley_cache_hits_total{tier="augmented"} 703)",
      R"(galley_cache_misses_total{tier="augmented"} 704)",
      R"(galley_cache_bytes{tier="augmented"} 701)",
      R"(galley_cache_budget_bytes{tier="augmented"} 700)",
      "galley_cache_arena_populated_bytes 900",
      "galley_cache_arena_allocated_bytes 800",
  };
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Samples(text), expected) << text;
}

TEST(PrometheusTextTest, WithoutJobsOrCacheEveryFamilyIsStillDeclared) {
  MetricsSnapshot idle;
  idle.status.pipeline.decodes = 7;
  const std::string text = RenderPrometheus(idle);
  ExpectWellFormedFamilies(text);
  std::vector<std::string> expected = {
      "galley_up_seconds 0",
      "galley_jobs 0",
      "galley_shm_bytes 0",
      "galley_protocol_errors_total 0",
      "galley_batches_prepared_total 0",
      "galley_batches_unread_total 0",
      "galley_descriptors_open -1",
      "galley_descriptors_limit 0",
      "galley_s3_gets_total 0",
      "galley_s3_heads_total 0",
      "galley_s3_bytes_total 0",
      "galley_s3_retries_total 0",
      "galley_s3_failures_total 0",
      "galley_s3_in_flight 0",
      "galley_shard_descriptors_open 0",
      "galley_shard_descriptors_limit 0",
      "galley_shard_descriptors_evicted_total 0",
      "galley_shard_descriptors_released_total 0",
      "galley_descriptor_exhaustion_total 0",
      "galley_pipeline_file_reads_total 0",
      "galley_pipeline_field_reads_total 0",
      "galley_pipeline_bytes_read_total 0",
      "galley_pipeline_decodes_total 7",
      "galley_pipeline_augments_total 0",
      "galley_pipeline_packs_total 0",
      "galley_pipeline_unpacks_total 0",
      "galley_pipeline_unpack_failures_total 0",
      "galley_pipeline_failures_total 0",
      "galley_pipeline_read_seconds_total 0",
      "galley_pipeline_decode_seconds_total 0",
      "galley_pipeline_augment_seconds_total 0",
      "galley_pipeline_pack_seconds_total 0",
      "galley_pipeline_unpack_seconds_total 0",
  };
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Samples(text), expected) << text;
}

TEST(PrometheusTextTest, NonFiniteValuesUseTheFormatsSpelling) {
  MetricsSnapshot odd;
  odd.status.uptime_seconds = std::numeric_limits<double>::quiet_NaN();
  odd.status.pipeline.read_seconds = std::numeric_limits<double>::infinity();
  odd.status.pipeline.decode_seconds = -std::numeric_limits<double>::infinity();
  const std::vector<std::string> samples = Samples(RenderPrometheus(odd));
  auto has = [&](const std::string& line) {
    return std::find(samples.begin(), samples.end(), line) != samples.end();
  };
  EXPECT_TRUE(has("galley_up_seconds NaN"));
  EXPECT_TRUE(has("galley_pipeline_read_seconds_total +Inf"));
  EXPECT_TRUE(has("galley_pipeline_decode_seconds_total -Inf"));
}

// The dump keeps integers and doubles apart (7 and 7.0), so a field whose
// type changes fails as well.
void ExpectJson(const json& actual, const char* expected) {
  EXPECT_EQ(actual.dump(2), json::parse(expected).dump(2));
}

constexpr const char* kPipelineJson = R"({
  "threads": 4, "cache": true, "file_reads": 101, "field_reads": 110, "bytes_read": 102,
  "decodes": 103, "region_decodes": 104, "augments": 105, "decoded_hits": 106, "encoded_hits": 107,
  "augmented_hits": 108, "failures": 109, "packs": 111, "unpacks": 112, "unpack_failures": 113,
  "read_seconds": 1.25, "decode_seconds": 2.5, "augment_seconds": 3.75, "pack_seconds": 0.5,
  "unpack_seconds": 0.25, "remote": null, "disk": null})";

TEST(SnapshotJsonTest, Status) {
  const std::string expected = R"({
    "version": "9.8.7", "protocol_version": 6, "uid": 990, "owner_only": false, "admin": true,
    "pid": 4321, "socket": "/run/galley/galleyd.sock", "uptime_seconds": 12.5, "jobs": 2,
    "your_jobs": 1, "your_memory_bytes": 5000, "jobs_opened": 11, "jobs_refused": 12, "draining": true,
    "protocol_errors": 3, "batches": {"prepared": 31, "unread": 32}, "datasets": 13,
    "shm_bytes": 4096,
    "limits": {"max_jobs": 64, "max_shm_per_job": 1048576, "max_shm_total": 1073741824,
               "max_jobs_per_uid": 8, "max_shm_per_uid": 268435456, "max_memory_per_uid": 134217728,
               "max_connections_per_uid": 32},
    "descriptors": {"open": 1201, "limit": 1202, "shards_open": 1203, "shards_limit": 1204,
                    "shards_evicted": 1205, "shards_released": 1206, "exhausted": 1207},
    "object_store": {"gets": 1301, "heads": 1302, "lists": 1303, "bytes": 1304, "retries": 1305,
                     "failures": 1306, "in_flight": 1307, "full_bodies": 1308},
    "pipeline": )" + std::string(kPipelineJson) +
                               R"(,
    "samplers": [
      {"dataset": "/data/a", "policy": "uniform", "jobs": 200, "requests": 201, "loads": 202,
       "loads_per_request": 200.5, "substitutions": 203,
       "job_seeds": 204, "orders_follow_seeds": false, "file_reads": 205, "decodes": 206,
       "cache_hits": 207, "file_reads_per_request": 200.25, "decodes_per_request": 200.125,
       "cache_hits_per_request": 200.0625},
      {"dataset": "/data/\"b\"\\c\nd", "policy": "ods", "jobs": 300, "requests": 301,
       "loads": 302, "loads_per_request": 300.5, "substitutions": 303,
       "job_seeds": 304, "orders_follow_seeds": true, "file_reads": 305, "decodes": 306,
       "cache_hits": 307, "file_reads_per_request": 300.25, "decodes_per_request": 300.125,
       "cache_hits_per_request": 300.0625}]})";
  ExpectJson(Status(), expected.c_str());
}

constexpr const char* kJobJson = R"({
  "job_id": 1, "name": "train", "dataset": "/data/a", "owner_uid": 1010, "owner_pid": 4010,
  "policy": "uniform", "batch_size": 32, "epoch_size": 11, "batches_per_epoch": 12,
  "prefetch": 4, "segment_bytes": 13, "batches": 14, "batches_unread": 24, "samples": 15,
  "skipped": 16,
  "epochs_completed": 17, "produce_seconds": 10.125, "ring_full_seconds": 10.25,
  "peer_hold_seconds": 10.375, "peer_holds": 25, "drawn_ahead": 36, "drawn_ahead_peak": 37,
  "lag": 38, "lag_peak": 39, "consumer_wait_seconds": 10.5,
  "consumer_waits": 18,
  "uptime_seconds": 10.625, "samples_per_second": 10.75, "rank": 19, "world_size": 20,
  "nodes": 21, "node_rank": 22, "shard_seed": 23, "credential_refreshes": 40,
  "credential_refreshes_refused": 41})";

TEST(SnapshotJsonTest, JobsAndAJobsStats) {
  ExpectJson(JobsSnapshot{{Job(1, "train", 10)}},
             (std::string(R"({"jobs": [)") + kJobJson + "]}").c_str());
  const JobStatsSnapshot stats{Job(1, "train", 10), {Group("/data/a", "uniform", 200)}, Pipeline()};
  ExpectJson(stats, (std::string(R"({"job": )") + kJobJson + R"(,
    "samplers": [{"dataset": "/data/a", "policy": "uniform", "jobs": 200, "requests": 201,
                  "loads": 202, "loads_per_request": 200.5, "substitutions": 203,
       "job_seeds": 204, "orders_follow_seeds": false, "file_reads": 205, "decodes": 206,
       "cache_hits": 207, "file_reads_per_request": 200.25, "decodes_per_request": 200.125,
       "cache_hits_per_request": 200.0625}],
    "pipeline": )" + kPipelineJson +
                     "}")
                        .c_str());
}

TEST(SnapshotJsonTest, Datasets) {
  DatasetsSnapshot s;
  s.datasets.push_back({"/data/a", "/data/a", 1, 100, 10, 123456, 2.5, 1,
                        "00ff00ff00ff00ff0123456789abcdef", std::nullopt});
  ShardSetSnapshot shards{4,
                          400,
                          2,
                          1,
                          "/data/s-0.tar: k, no image",
                          1,
                          "/data/s-3.tar: cut",
                          3,
                          1,
                          5,
                          0.75,
                          60.5,
                          true,
                          41,
                          44,
                          42,
                          43};
  s.datasets.push_back(
      {"shards:/data/s-0.tar", "/data/s-0.tar", 2, 400, 4, 99, 0.5, 3, "ab", shards});
  s.indexing.push_back({"/data/t-0.tar", "shards", "shards", 4, 10, 2.0, 2.0, 3.0});
  s.indexing.push_back({"/data/f", "folder", "files", 500, std::nullopt, 1.0, 500.0, -1.0, 7, 2});
  s.samplers.push_back(Group("/data/a", "uniform", 200));
  ExpectJson(s, R"({
    "datasets": [
      {"root": "/data/a", "key": "/data/a", "items": 100, "classes": 10, "bytes": 123456,
       "index": 1, "listings": 1, "fingerprint": "00ff00ff00ff00ff0123456789abcdef",
       "listed_seconds_ago": 2.5, "shards": null, "objects": null},
      {"root": "/data/s-0.tar", "key": "shards:/data/s-0.tar", "items": 400, "classes": 4,
       "bytes": 99, "index": 2, "listings": 3, "fingerprint": "ab", "listed_seconds_ago": 0.5,
       "shards": {"shards": 4, "samples": 400, "skipped_members": 2, "skipped_samples": 1,
                  "first_skipped_sample": "/data/s-0.tar: k, no image", "damaged_shards": 1,
                  "first_damage": "/data/s-3.tar: cut", "from_index_cache": 3,
                  "stale_idx": 1, "from_idx": 5, "index_seconds": 0.75, "index_age_seconds": 60.5,
                  "stale": true, "daemon_shards_scanned": 41, "daemon_idx_hints_used": 44,
                  "daemon_index_cache_hits": 42,
                  "daemon_stale_idx": 43}, "objects": null}],
    "indexing": [{"path": "/data/t-0.tar", "kind": "shards", "unit": "shards", "done": 4,
                  "total": 10, "seconds": 2.0, "rate": 2.0, "seconds_left": 3.0,
                  "first_shard": "/data/t-0.tar", "shards": 10},
                 {"path": "/data/f", "kind": "folder", "unit": "files", "done": 500,
                  "total": null, "seconds": 1.0, "rate": 500.0, "seconds_left": -1.0,
                  "classes": 7, "classes_done": 2}],
    "samplers": [{"dataset": "/data/a", "policy": "uniform", "jobs": 200, "requests": 201,
                  "loads": 202, "loads_per_request": 200.5, "substitutions": 203,
       "job_seeds": 204, "orders_follow_seeds": false, "file_reads": 205, "decodes": 206,
       "cache_hits": 207, "file_reads_per_request": 200.25, "decodes_per_request": 200.125,
       "cache_hits_per_request": 200.0625}]})");
}

constexpr const char* kInputsJson = R"({
  "storage_bytes_per_s": {"value": 1.5e8, "source": "measured"},
  "decode_augment_per_core_per_s": {"value": 400.5, "source": "override"},
  "augment_per_core_per_s": {"value": 2000.5, "source": "measured"},
  "cores": {"value": 8.0, "source": "worker threads"},
  "memory_bytes_per_s": {"value": 5e9, "source": "measured"},
  "jobs_consumption_per_s": {"value": 0.0, "source": "unbounded"},
  "dataset_items": {"value": 1000.0, "source": "datasets"},
  "encoded_item_bytes": {"value": 110000.5, "source": "datasets"},
  "inflation": {"value": 5.5, "source": "measured"},
  "augmented_item_bytes": {"value": 150528.0, "source": "jobs"},
  "identical_pipeline_jobs": {"value": 2.0, "source": "jobs"},
  "augmented_reuse_limit": {"value": 3.0, "source": "cache"},
  "cache_bytes": {"value": 1073741824.0, "source": "cache"}})";

std::string TierJson(int base) {
  return "{\"budget_bytes\": " + std::to_string(base) + ", \"bytes\": " + std::to_string(base + 1) +
         ", \"entries\": " + std::to_string(base + 2) + ", \"hits\": " + std::to_string(base + 3) +
         ", \"misses\": " + std::to_string(base + 4) + ", \"hit_rate\": 0.25" +
         ", \"inserts\": " + std::to_string(base + 5) +
         ", \"rejects\": " + std::to_string(base + 6) +
         ", \"evictions\": " + std::to_string(base + 7);
}

TEST(SnapshotJsonTest, Cache) {
  const std::string expected = R"({
    "enabled": true, "cache_bytes": 1073741824, "eviction": "refcount",
    "split": {"encoded_pct": 20, "decoded_pct": 50, "augmented_pct": 30},
    "split_source": "planner",
    "tiers": {"encoded": )" + TierJson(500) +
                               "}, \"decoded\": " + TierJson(600) +
                               "}, \"augmented\": " + TierJson(700) +
                               R"(, "retired": 71, "replaced": 72, "reuse_limit": 3}},
    "decoded_arena": {"capacity_bytes": 1073741824, "populated_bytes": 900,
                      "prefault_target_bytes": 1000, "allocated_bytes": 800, "blocks": 3,
                      "refused": 2},
    "demand": {"keys_with_demand": 81, "total_demand": 82},
    "planner_inputs": )" + kInputsJson +
                               R"(,
    "pipeline": {"file_reads": 101, "decodes": 103, "augments": 105, "decoded_hits": 106,
                 "encoded_hits": 107, "augmented_hits": 108, "packs": 111, "unpacks": 112,
                 "unpack_failures": 113},
    "remote": null})";
  ExpectJson(Cache(), expected.c_str());
  ExpectJson(CachingOffJson(), R"({"enabled": false, "cache_bytes": 0})");
}

TEST(SnapshotJsonTest, PlanBeforeAndAfterTheFirstPlan) {
  PlanSnapshot plan;
  plan.planner = "model-driven";
  plan.inputs = Inputs();
  plan.probe_seconds = 0.5;
  PlanDatasetSnapshot sampled{"/data/a", true, 100, 2048.5, 5.25, 64, 3e8, "", "storage"};
  PlanDatasetSnapshot failed{"/data/b", false, 0, 0, 0, 0, 0, "not sampled yet"};
  plan.datasets = {sampled, failed};
  plan.plans_made = 0;
  plan.split = {50, 50, 0};
  const std::string common = std::string(R"("planner": "model-driven", "inputs": )") + kInputsJson +
                             R"(, "probe_seconds": 0.5,
    "datasets": [{"root": "/data/a", "items": 100, "mean_encoded_bytes": 2048.5,
                  "inflation": 5.25, "files_sampled": 64, "storage_bytes_per_s": 3e8,
                  "sample_source": "storage"},
                 {"root": "/data/b", "error": "not sampled yet"}],
    "split": {"encoded_pct": 50, "decoded_pct": 50, "augmented_pct": 0}, )";
  ExpectJson(plan, ("{" + common +
                    R"("plans_made": 0,
    "note": "no plan yet: the planner runs when a job opens its first dataset"})")
                       .c_str());

  plan.plans_made = 2;
  plan.plan = AppliedPlanSnapshot{1234.5, {4000, 3000, 2000, 1000}, {0.125, 0.25, 0.5, 0.125}};
  ExpectJson(plan, ("{" + common + R"("plans_made": 2, "predicted_items_per_s": 1234.5,
    "source_rates": {"augmented": 4000.0, "decoded": 3000.0, "encoded": 2000.0,
                     "storage": 1000.0, "remote": 0.0},
    "hit_fractions": {"augmented": 0.125, "decoded": 0.25, "encoded": 0.5,
                      "storage": 0.125, "remote": 0.0}})")
                       .c_str());
}

RemoteTierSnapshot Remote() {
  RemoteTierSnapshot r;
  r.engine = "memcached";
  r.write_form = "decoded";
  r.lookups = 900;
  r.encoded_hits = 300;
  r.decoded_hits = 150;
  r.misses = 450;
  r.errors = 901;
  r.corrupt = 902;
  r.bytes_read = 903;
  r.lookup_seconds = 0.75;
  r.writes = 904;
  r.bytes_written = 905;
  r.write_errors = 906;
  r.writes_dropped = 907;
  r.writes_oversized = 908;
  r.write_queue_bytes = 909;
  r.servers = {{"10.0.0.1:11211", true, 0, ""}, {"[::1]:11211", false, 2, "TIMEOUT"}};
  return r;
}

TEST(PrometheusTextTest, TheRemoteTierAndEachOfItsServers) {
  MetricsSnapshot metrics;
  metrics.status.pipeline.remote = Remote();
  const std::vector<std::string> samples = Samples(RenderPrometheus(metrics));
  std::vector<std::string> remote;
  std::copy_if(samples.begin(), samples.end(), std::back_inserter(remote),
               [](const std::string& line) { return line.starts_with("galley_remote_"); });
  std::vector<std::string> expected = {
      "galley_remote_lookups_total 900",
      "galley_remote_hits_total 450",
      "galley_remote_decoded_hits_total 150",
      "galley_remote_misses_total 450",
      "galley_remote_errors_total 901",
      "galley_remote_corrupt_total 902",
      "galley_remote_bytes_read_total 903",
      "galley_remote_writes_total 904",
      "galley_remote_bytes_written_total 905",
      "galley_remote_write_errors_total 906",
      "galley_remote_writes_dropped_total 907",
      R"(galley_remote_server_up{server="10.0.0.1:11211"} 1)",
      R"(galley_remote_server_up{server="[::1]:11211"} 0)",
      R"(galley_remote_server_failures_total{server="10.0.0.1:11211"} 0)",
      R"(galley_remote_server_failures_total{server="[::1]:11211"} 2)",
  };
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(remote, expected);
}

DiskTierSnapshot Disk() {
  DiskTierSnapshot d;
  d.dir = "/var/cache/galley/disk";
  d.budget_bytes = 1000;
  d.bytes = 800;
  d.entries = 7;
  d.hits = 30;
  d.misses = 10;
  d.writes = 11;
  d.write_drops = 12;
  d.write_errors = 13;
  d.damaged = 14;
  d.evictions = 15;
  d.write_queue_bytes = 16;
  d.foreign_files = 17;
  d.indexed = true;
  d.index_seconds = 0.5;
  return d;
}

TEST(PrometheusTextTest, TheDiskTier) {
  MetricsSnapshot metrics;
  metrics.status.pipeline.disk = Disk();
  const std::vector<std::string> samples = Samples(RenderPrometheus(metrics));
  std::vector<std::string> disk;
  std::copy_if(samples.begin(), samples.end(), std::back_inserter(disk),
               [](const std::string& line) { return line.starts_with("galley_disk_"); });
  std::vector<std::string> expected = {
      "galley_disk_hits_total 30",         "galley_disk_misses_total 10",
      "galley_disk_writes_total 11",       "galley_disk_write_drops_total 12",
      "galley_disk_write_errors_total 13", "galley_disk_damaged_total 14",
      "galley_disk_evictions_total 15",    "galley_disk_bytes 800",
      "galley_disk_budget_bytes 1000",     "galley_disk_entries 7",
  };
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(disk, expected);
}

TEST(SnapshotJsonTest, TheDiskTierInThePipeline) {
  PipelineSnapshot pipeline;
  pipeline.disk = Disk();
  const json rendered = pipeline;
  ExpectJson(rendered["disk"], R"({
    "dir": "/var/cache/galley/disk", "budget_bytes": 1000, "bytes": 800, "entries": 7,
    "hits": 30, "misses": 10, "hit_rate": 0.75, "writes": 11, "write_drops": 12,
    "write_errors": 13, "damaged": 14, "evictions": 15, "write_queue_bytes": 16,
    "foreign_files": 17, "indexed": true, "index_seconds": 0.5})");
}

TEST(SnapshotJsonTest, TheRemoteTierInThePipelineAndThePlan) {
  PipelineSnapshot pipeline;
  pipeline.remote = Remote();
  const json rendered = pipeline;
  ExpectJson(rendered["remote"], R"({
    "engine": "memcached", "write_form": "decoded", "lookups": 900, "hits": 450,
    "encoded_hits": 300, "decoded_hits": 150, "misses": 450, "hit_rate": 0.5, "errors": 901,
    "corrupt": 902, "bytes_read": 903, "lookup_seconds": 0.75, "writes": 904,
    "bytes_written": 905, "write_errors": 906, "writes_dropped": 907, "writes_oversized": 908,
    "write_queue_bytes": 909,
    "servers": [{"address": "10.0.0.1:11211", "reachable": true, "failures": 0,
                 "last_error": ""},
                {"address": "[::1]:11211", "reachable": false, "failures": 2,
                 "last_error": "TIMEOUT"}]})");

  PlanSnapshot plan;
  plan.inputs = Inputs();
  plan.inputs.remote_bytes_per_s = PlanInputSnapshot{1.25e9, "measured"};
  plan.inputs.remote_capacity_bytes = PlanInputSnapshot{3e9, "servers"};
  plan.inputs.nic_bytes_per_s = PlanInputSnapshot{0, "unknown (unbounded)"};
  plan.remote_form = "encoded";
  plan.remote_form_source = "planner";
  const json reply = plan;
  EXPECT_EQ(reply["remote_form"], "encoded");
  EXPECT_EQ(reply["remote_form_source"], "planner");
  ExpectJson(reply["inputs"]["remote_bytes_per_s"], R"({"value": 1.25e9, "source": "measured"})");
  ExpectJson(reply["inputs"]["remote_capacity_bytes"], R"({"value": 3e9, "source": "servers"})");
  ExpectJson(reply["inputs"]["nic_bytes_per_s"],
             R"js({"value": 0.0, "source": "unknown (unbounded)"})js");
  // Without a remote tier the plan names none of it.
  const json local = PlanSnapshot{};
  EXPECT_FALSE(local.contains("remote_form"));
  EXPECT_FALSE(local["inputs"].contains("remote_bytes_per_s"));
}

// galleyctl's text for people. A set of 1,024 shards is one line of the
// summary, not a line per shard; the full text
// (--verbose) still names every shard.
TEST(QueryTextTest, DatasetsSummaryGivesEachDatasetOneLine) {
  DatasetsSnapshot s;
  s.datasets.push_back({"/data/train", "/data/train", 1, 1281167, 1000, 150323855360, 95.0, 1,
                        "00ff", std::nullopt});
  std::string key = "shards\njpg;png\ncls";
  for (int i = 0; i < 1024; ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "/data/in1k/train-%06d.tar", i);
    key += "\n" + std::string(name);
  }
  ShardSetSnapshot shards;
  shards.shards = 1024;
  shards.samples = 2048;
  shards.skipped_samples = 3;
  shards.first_skipped_sample = "/data/in1k/train-000007.tar: k1, no image";
  shards.damaged_shards = 1;
  shards.first_damage = "/data/in1k/train-000009.tar: cut at 512";
  s.datasets.push_back(
      {key, "/data/in1k/train-000000.tar", 2, 2048, 0, 1310720, 3600.0, 2, "ab", shards});
  s.indexing.push_back({"/data/t-0.tar", "shards", "shards", 4, 10, 2.0, 2.0, 3.0});
  s.samplers.push_back({"/data/in1k/train-000000.tar", "dsa", 2, 1000, 510, 0.51, 0});
  s.samplers.push_back({"/data/train", "ods", 1, 40, 40, 1.0, 4});
  // Two jobs sharing each decode, the second epoch from the decoded tier.
  s.samplers[0].file_reads = s.samplers[0].decodes = 250;
  s.samplers[0].cache_hits = 260;
  s.samplers[0].file_reads_per_request = s.samplers[0].decodes_per_request = 0.25;
  s.samplers[0].cache_hits_per_request = 0.26;
  const json reply = s;

  EXPECT_EQ(DatasetsSummary(reply),
            "datasets: 2 (--verbose lists every shard)\n"
            "  /data/train: 1281167 items, 1000 classes, 140.0 GiB, listed 95 s ago\n"
            "  /data/in1k/train-000000.tar .. train-001023.tar: 1024 shards, 2048 items, "
            "1.2 MiB, listed 60 min ago\n"
            "    1 damaged shard(s), first: /data/in1k/train-000009.tar: cut at 512\n"
            "    3 sample(s) left out, first: /data/in1k/train-000007.tar: k1, no image\n"
            "listing now: 1\n"
            "  /data/t-0.tar: 4 of 10 shards, 3 s left\n"
            "sampler groups: 2\n"
            "  /data/in1k/train-000000.tar .. train-001023.tar (dsa): 2 jobs, 1000 requests, "
            "510 loads (0.510 loads per request; per request 0.250 file reads, 0.250 decodes, "
            "0.260 cache hits)\n"
            "  /data/train (ods): 1 jobs, 40 requests, 40 loads (1.000 loads per request; per "
            "request 0.000 file reads, 0.000 decodes, 0.000 cache hits), 4 substitutions\n");

  const std::string full = FullText(reply);
  for (int i : {0, 1, 511, 1023}) {
    char line[64];
    std::snprintf(line, sizeof(line), "\n      | /data/in1k/train-%06d.tar\n", i);
    EXPECT_NE(full.find(line), std::string::npos) << line;
  }
  EXPECT_GT(std::count(full.begin(), full.end(), '\n'), 1024);
  EXPECT_NE(full.find("\n    fingerprint: ab\n"), std::string::npos);
}

// A prefix folder, a manifest of objects and a shard set in a bucket: their
// own reads and requests on a line, then the node's store counts; the JSON
// carries every count and no credential.
TEST(QueryTextTest, DatasetsSummaryShowsWhatAFolderOfObjectsAskedTheStoreFor) {
  ObjectFolderSnapshot prefix;
  prefix.kind = "prefix";
  prefix.prefixes = 1;
  prefix.prefetched_reads = 20;
  prefix.on_demand_reads = 2;
  prefix.gets = 22;
  prefix.bytes = 3 << 20;
  prefix.verify_heads = 22;
  prefix.listings = 3;
  prefix.object_store = {40, 25, 4, 5 << 20, 1, 0, 0, 0};
  ObjectFolderSnapshot manifest = prefix;
  manifest.kind = "manifest";
  manifest.prefixes = 2;
  manifest.verify_heads = 0;
  manifest.manifest_heads = 2;
  DatasetsSnapshot s;
  s.datasets.push_back({"s3://galley/imgs/", "s3://galley/imgs/", 1, 22, 3, 3 << 20, 5.0, 1, "cd",
                        std::nullopt, prefix});
  s.datasets.push_back({"s3://galley/train.csv", "s3://galley/train.csv", 2, 22, 3, 3 << 20, 5.0, 1,
                        "ef", std::nullopt, manifest});
  ShardSetSnapshot shards;
  shards.shards = 3;
  shards.samples = 120;
  shards.object_store = prefix.object_store;
  shards.prefetched_reads = 118;
  shards.on_demand_reads = 16;
  shards.gets = 110;
  shards.bytes = 700 << 10;
  shards.verify_heads = 3;
  shards.listing_reads = 100;
  shards.listing_kept_bytes = 64 << 10;
  s.datasets.push_back({"shards\ns3://galley/in/train-000000.tar",
                        "s3://galley/in/train-000000.tar", 3, 120, 5, 540 << 10, 5.0, 1, "01",
                        shards});
  const json reply = s;
  EXPECT_EQ(
      DatasetsSummary(reply),
      "datasets: 3\n"
      "  s3://galley/imgs/: 22 objects, 3 classes, 3.0 MiB, listed 5 s ago\n"
      "    this prefix's reads: 20 prefetched, 2 on demand, by 22 GETs of 3.0 MiB; 3 "
      "listing(s) of 1 prefix(es), 22 HEADs to admit other access keys\n"
      "    object store (the node's): 40 GETs, 5.0 MiB, 1 retries, 4 LIST pages, 0 in "
      "flight\n"
      "  s3://galley/train.csv: 22 objects, 3 classes, 3.0 MiB, listed 5 s ago\n"
      "    this manifest's reads: 20 prefetched, 2 on demand, by 22 GETs of 3.0 MiB; 3 "
      "listing(s) of 2 prefix(es), 0 HEADs to admit other access keys, 2 of the manifest\n"
      "    object store (the node's): 40 GETs, 5.0 MiB, 1 retries, 4 LIST pages, 0 in "
      "flight\n"
      "  s3://galley/in/train-000000.tar: 3 shards, 120 items, 5 classes, 540.0 KiB, listed 5 "
      "s ago\n"
      "    this set's reads: 118 prefetched, 16 on demand, by 110 GETs of 700.0 KiB; 3 HEADs "
      "to admit other access keys; 100 read from its listing's bytes, 64.0 KiB of them kept\n"
      "    object store (the node's): 40 GETs, 5.0 MiB, 1 retries, 4 LIST pages, 0 in "
      "flight\n"
      "sampler groups: 0\n");
  const json& objects = reply["datasets"][0]["objects"];
  EXPECT_EQ(objects["kind"], "prefix");
  EXPECT_EQ(objects["gets"], 22);
  EXPECT_EQ(objects["object_store"]["lists"], 4);
  EXPECT_TRUE(reply["datasets"][0]["shards"].is_null());
  const json& set = reply["datasets"][2]["shards"];
  EXPECT_EQ(set["gets"], 110);
  EXPECT_EQ(set["bytes"], 700 << 10);
  EXPECT_EQ(set["verify_heads"], 3);
  EXPECT_EQ(set["listing_reads"], 100);
  EXPECT_EQ(set["listing_kept_bytes"], 64 << 10);
  EXPECT_EQ(set["object_store"]["gets"], 40);
}

// A reply without the keys a summary reads (an older daemon's) prints what
// it has.
TEST(QueryTextTest, DatasetsSummaryOfAnEmptyOrPartialReply) {
  EXPECT_EQ(DatasetsSummary(json::object()), "datasets: 0\nsampler groups: 0\n");
  EXPECT_EQ(DatasetsSummary(json::parse(R"({"datasets": [{"root": "/d", "items": 5}]})")),
            "datasets: 1\n  /d: 5 items, 0 B, listed 0 s ago\nsampler groups: 0\n");
  EXPECT_EQ(ByteSizeText(1023), "1023 B");
  EXPECT_EQ(ByteSizeText(1536), "1.5 KiB");
  EXPECT_EQ(ByteSizeText(uint64_t{5} << 40), "5.0 TiB");
}

}  // namespace
}  // namespace galley
