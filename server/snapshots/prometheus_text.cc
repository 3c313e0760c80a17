#include "galley/snapshots/prometheus_text.h"

#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace galley {
namespace {

// A sample's value: counts print as integers, measurements in the shortest
// form that reads back to the same double.
class SampleValue {
 public:
  template <std::unsigned_integral Count>
  SampleValue(Count count) : is_count_(true), count_(count) {}  // NOLINT: implicit by design
  SampleValue(double measure) : measure_(measure) {}            // NOLINT: implicit by design

  std::string Text() const {
    if (is_count_) return std::to_string(count_);
    if (std::isnan(measure_)) return "NaN";
    if (std::isinf(measure_)) return measure_ > 0 ? "+Inf" : "-Inf";
    char buffer[32];
    const auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), measure_);
    return ec == std::errc() ? std::string(buffer, end) : "NaN";
  }

 private:
  bool is_count_ = false;
  uint64_t count_ = 0;
  double measure_ = 0;
};

// One metric family over snapshots of type `Of`: its name (without the
// "galley_" prefix), type, help and the field it reads.
template <typename Of>
struct Family {
  std::string_view name;
  std::string_view type;
  std::string_view help;
  SampleValue (*value)(const Of&);
};

std::string Label(std::string_view key, std::string_view value) {
  std::string out(key);
  out += "=\"";
  for (char c : value) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

// A snapshot with the labels that tell it apart from its siblings ("" for
// the daemon's own figures).
template <typename Of>
struct Labelled {
  const Of* snapshot;
  std::string labels;
};

// Each family as one group: HELP, TYPE, then one sample per item.
template <typename Of>
void WriteFamilies(std::span<const Family<Of>> families, const std::vector<Labelled<Of>>& items,
                   std::string* out) {
  for (const Family<Of>& family : families) {
    *out += "# HELP galley_";
    *out += family.name;
    *out += ' ';
    *out += family.help;
    *out += "\n# TYPE galley_";
    *out += family.name;
    *out += ' ';
    *out += family.type;
    *out += '\n';
    for (const auto& item : items) {
      *out += "galley_";
      *out += family.name;
      if (!item.labels.empty()) *out += '{' + item.labels + '}';
      *out += ' ' + family.value(*item.snapshot).Text() + '\n';
    }
  }
}

const Family<DaemonStatusSnapshot> kDaemonFamilies[] = {
    {"up_seconds", "gauge", "Seconds since galleyd started.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.uptime_seconds; }},
    {"jobs", "gauge", "Open jobs.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.jobs; }},
    {"shm_bytes", "gauge", "Shared memory held by job rings.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.shm_bytes; }},
    {"protocol_errors_total", "counter", "Connections closed for breaking the protocol.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.protocol_errors; }},
    {"batches_prepared_total", "counter", "Batches prepared for jobs.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.batches.prepared; }},
    {"batches_unread_total", "counter",
     "Batches prepared that no consumer took: their job sought or closed first.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.batches.unread; }},
    {"descriptors_open", "gauge", "File descriptors galleyd has open (-1: none left to count).",
     [](const DaemonStatusSnapshot& s) -> SampleValue {
       return static_cast<double>(s.descriptors.open);
     }},
    {"descriptors_limit", "gauge", "galleyd's file descriptor limit (RLIMIT_NOFILE, soft).",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.descriptors.limit; }},
    {"descriptor_exhaustion_total", "counter",
     "Times galleyd found no file descriptor free (EMFILE, ENFILE): a sample, listing or "
     "connection failed for it.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.descriptors.exhausted; }},
    {"s3_gets_total", "counter", "GET requests sent to the object store, retries included.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.object_store.gets; }},
    {"s3_heads_total", "counter", "HEAD requests sent to the object store.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.object_store.heads; }},
    {"s3_bytes_total", "counter", "Body bytes the object store's GETs received.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.object_store.bytes; }},
    {"s3_retries_total", "counter", "Object store requests sent again after a retryable failure.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.object_store.retries; }},
    {"s3_failures_total", "counter", "Object store requests that failed after their retries.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.object_store.failures; }},
    {"s3_in_flight", "gauge", "Object store requests on the wire now.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.object_store.in_flight; }},
    {"shard_descriptors_open", "gauge", "Tar shard descriptors kept open between reads.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.descriptors.shards_open; }},
    {"shard_descriptors_limit", "gauge",
     "The most tar shard descriptors kept open (max_open_shards_total).",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.descriptors.shards_limit; }},
    {"shard_descriptors_evicted_total", "counter",
     "Tar shard descriptors closed to stay within max_open_shards or max_open_shards_total.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.descriptors.shards_evicted; }},
    {"shard_descriptors_released_total", "counter",
     "Tar shard descriptors closed because their dataset's last job ended.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.descriptors.shards_released; }},
    {"pipeline_file_reads_total", "counter", "Files read from storage.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.pipeline.file_reads; }},
    {"pipeline_field_reads_total", "counter",
     "Field records read from storage apart from their item's bytes.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.pipeline.field_reads; }},
    {"pipeline_bytes_read_total", "counter", "Bytes read from storage.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.pipeline.bytes_read; }},
    {"pipeline_decodes_total", "counter", "Images decoded.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.pipeline.decodes; }},
    {"pipeline_augments_total", "counter", "Samples transformed into a job's batch.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.pipeline.augments; }},
    {"pipeline_packs_total", "counter",
     "Shrunk images (max_resolution) packed for an encoded cache tier.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.pipeline.packs; }},
    {"pipeline_unpacks_total", "counter", "Packed images unpacked from an encoded cache tier.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.pipeline.unpacks; }},
    {"pipeline_unpack_failures_total", "counter",
     "Packed cache entries that did not unpack and were read again from storage.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.pipeline.unpack_failures; }},
    {"pipeline_failures_total", "counter", "Samples that failed to read, decode or transform.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.pipeline.failures; }},
    {"pipeline_read_seconds_total", "counter", "Time spent reading files.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.pipeline.read_seconds; }},
    {"pipeline_decode_seconds_total", "counter", "Time spent decoding.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.pipeline.decode_seconds; }},
    {"pipeline_augment_seconds_total", "counter", "Time spent transforming.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.pipeline.augment_seconds; }},
    {"pipeline_pack_seconds_total", "counter", "Time spent packing shrunk images.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.pipeline.pack_seconds; }},
    {"pipeline_unpack_seconds_total", "counter", "Time spent unpacking packed images.",
     [](const DaemonStatusSnapshot& s) -> SampleValue { return s.pipeline.unpack_seconds; }},
};

const Family<SamplerGroupSnapshot> kSamplerFamilies[] = {
    {"sampler_requests_total", "counter", "Item deliveries to jobs, per dataset and policy.",
     [](const SamplerGroupSnapshot& s) -> SampleValue { return s.requests; }},
    {"sampler_loads_total", "counter", "Distinct item preparations, per dataset and policy.",
     [](const SamplerGroupSnapshot& s) -> SampleValue { return s.loads; }},
    {"sampler_loads_per_request", "gauge", "Loads divided by requests (1 = no sharing).",
     [](const SamplerGroupSnapshot& s) -> SampleValue { return s.loads_per_request; }},
    {"sampler_file_reads_total", "counter", "Items prepared that were read from storage.",
     [](const SamplerGroupSnapshot& s) -> SampleValue { return s.file_reads; }},
    {"sampler_decodes_total", "counter", "Items prepared that were decoded.",
     [](const SamplerGroupSnapshot& s) -> SampleValue { return s.decodes; }},
    {"sampler_cache_hits_total", "counter",
     "Items prepared from a cache tier, neither read nor decoded.",
     [](const SamplerGroupSnapshot& s) -> SampleValue { return s.cache_hits; }},
};

const Family<JobSnapshot> kJobFamilies[] = {
    {"job_samples_total", "counter", "Samples delivered to the job.",
     [](const JobSnapshot& j) -> SampleValue { return j.samples; }},
    {"job_batches_total", "counter", "Batches delivered to the job.",
     [](const JobSnapshot& j) -> SampleValue { return j.batches; }},
    {"job_batches_unread_total", "counter",
     "Batches prepared for the job that its consumer never took (it sought to another epoch).",
     [](const JobSnapshot& j) -> SampleValue { return j.batches_unread; }},
    {"job_skipped_total", "counter", "Samples the job lost to bad files.",
     [](const JobSnapshot& j) -> SampleValue { return j.skipped; }},
    {"job_samples_per_second", "gauge", "The job's mean delivery rate since it opened.",
     [](const JobSnapshot& j) -> SampleValue { return j.samples_per_second; }},
    {"job_ring_full_seconds_total", "counter",
     "Time the job's ring was full (the consumer was slower than galleyd).",
     [](const JobSnapshot& j) -> SampleValue { return j.ring_full_seconds; }},
    {"job_consumer_wait_seconds_total", "counter",
     "Time the job's consumer waited for a batch (galleyd was slower than the consumer).",
     [](const JobSnapshot& j) -> SampleValue { return j.consumer_wait_seconds; }},
    {"job_peer_hold_seconds_total", "counter",
     "Time the job was held back so that a slower peer could share a wave.",
     [](const JobSnapshot& j) -> SampleValue { return j.peer_hold_seconds; }},
    {"job_peer_holds_total", "counter",
     "Times the job was held back so that a slower peer could share a wave.",
     [](const JobSnapshot& j) -> SampleValue { return j.peer_holds; }},
    {"job_drawn_ahead", "gauge",
     "Items the job drew in rounds shared with its peers while its ring was full, not yet in "
     "its batches.",
     [](const JobSnapshot& j) -> SampleValue { return j.drawn_ahead; }},
    {"job_lag", "gauge",
     "Items the job's batches are behind the furthest job of its sampler group.",
     [](const JobSnapshot& j) -> SampleValue { return j.lag; }},
    {"job_lag_peak", "gauge", "The most items the job's batches have been behind that job.",
     [](const JobSnapshot& j) -> SampleValue { return j.lag_peak; }},
};

const Family<RemoteTierSnapshot> kRemoteFamilies[] = {
    {"remote_lookups_total", "counter", "Lookups in the remote tier shared by every node.",
     [](const RemoteTierSnapshot& r) -> SampleValue { return r.lookups; }},
    {"remote_hits_total", "counter", "Remote-tier lookups that found the item (either form).",
     [](const RemoteTierSnapshot& r) -> SampleValue { return r.encoded_hits + r.decoded_hits; }},
    {"remote_decoded_hits_total", "counter", "Remote-tier hits on decoded pixels.",
     [](const RemoteTierSnapshot& r) -> SampleValue { return r.decoded_hits; }},
    {"remote_misses_total", "counter", "Remote-tier lookups that found nothing usable.",
     [](const RemoteTierSnapshot& r) -> SampleValue { return r.misses; }},
    {"remote_errors_total", "counter",
     "Remote-tier lookups that met a failing server (served from storage).",
     [](const RemoteTierSnapshot& r) -> SampleValue { return r.errors; }},
    {"remote_corrupt_total", "counter", "Remote values refused by the length and checksum check.",
     [](const RemoteTierSnapshot& r) -> SampleValue { return r.corrupt; }},
    {"remote_bytes_read_total", "counter", "Bytes read from the remote tier.",
     [](const RemoteTierSnapshot& r) -> SampleValue { return r.bytes_read; }},
    {"remote_writes_total", "counter", "Values written to the remote tier.",
     [](const RemoteTierSnapshot& r) -> SampleValue { return r.writes; }},
    {"remote_bytes_written_total", "counter", "Bytes written to the remote tier.",
     [](const RemoteTierSnapshot& r) -> SampleValue { return r.bytes_written; }},
    {"remote_write_errors_total", "counter", "Remote-tier writes that failed.",
     [](const RemoteTierSnapshot& r) -> SampleValue { return r.write_errors; }},
    {"remote_writes_dropped_total", "counter", "Remote-tier writes dropped: the queue was full.",
     [](const RemoteTierSnapshot& r) -> SampleValue { return r.writes_dropped; }},
};

const Family<DiskTierSnapshot> kDiskFamilies[] = {
    {"disk_hits_total", "counter", "Disk-tier lookups that found a sound entry.",
     [](const DiskTierSnapshot& d) -> SampleValue { return d.hits; }},
    {"disk_misses_total", "counter", "Disk-tier lookups that found nothing usable.",
     [](const DiskTierSnapshot& d) -> SampleValue { return d.misses; }},
    {"disk_writes_total", "counter", "Entries written to the disk tier.",
     [](const DiskTierSnapshot& d) -> SampleValue { return d.writes; }},
    {"disk_write_drops_total", "counter", "Disk-tier writes dropped: the queue was full.",
     [](const DiskTierSnapshot& d) -> SampleValue { return d.write_drops; }},
    {"disk_write_errors_total", "counter", "Disk-tier writes the file system refused.",
     [](const DiskTierSnapshot& d) -> SampleValue { return d.write_errors; }},
    {"disk_damaged_total", "counter", "Disk-tier entries that failed their checks (removed).",
     [](const DiskTierSnapshot& d) -> SampleValue { return d.damaged; }},
    {"disk_evictions_total", "counter", "Disk-tier entries evicted to fit the budget.",
     [](const DiskTierSnapshot& d) -> SampleValue { return d.evictions; }},
    {"disk_bytes", "gauge", "Bytes the disk tier's entries take (4 KiB blocks).",
     [](const DiskTierSnapshot& d) -> SampleValue { return d.bytes; }},
    {"disk_budget_bytes", "gauge", "The disk tier's budget (disk_cache_bytes).",
     [](const DiskTierSnapshot& d) -> SampleValue { return d.budget_bytes; }},
    {"disk_entries", "gauge", "Entries in the disk tier.",
     [](const DiskTierSnapshot& d) -> SampleValue { return d.entries; }},
};

const Family<RemoteServerSnapshot> kRemoteServerFamilies[] = {
    {"remote_server_up", "gauge", "1 while the remote cache server answers, 0 after a failure.",
     [](const RemoteServerSnapshot& s) -> SampleValue { return uint64_t{s.reachable ? 1u : 0u}; }},
    {"remote_server_failures_total", "counter", "Times the remote cache server stopped answering.",
     [](const RemoteServerSnapshot& s) -> SampleValue { return s.failures; }},
};

const Family<TierSnapshot> kTierFamilies[] = {
    {"cache_hits_total", "counter", "Cache hits per tier.",
     [](const TierSnapshot& t) -> SampleValue { return t.hits; }},
    {"cache_misses_total", "counter", "Cache misses per tier.",
     [](const TierSnapshot& t) -> SampleValue { return t.misses; }},
    {"cache_bytes", "gauge", "Bytes held per tier.",
     [](const TierSnapshot& t) -> SampleValue { return t.bytes; }},
    {"cache_budget_bytes", "gauge", "Budget per tier.",
     [](const TierSnapshot& t) -> SampleValue { return t.budget_bytes; }},
};

const Family<ArenaSnapshot> kArenaFamilies[] = {
    {"cache_arena_populated_bytes", "gauge",
     "Bytes of the decoded tier's arena committed ahead of use (cache_prefault).",
     [](const ArenaSnapshot& a) -> SampleValue { return a.populated_bytes; }},
    {"cache_arena_allocated_bytes", "gauge",
     "Bytes of the decoded tier's arena held by entries, with the allocator's headers.",
     [](const ArenaSnapshot& a) -> SampleValue { return a.allocated_bytes; }},
};

}  // namespace

std::string RenderPrometheus(const MetricsSnapshot& metrics) {
  std::string out;
  const DaemonStatusSnapshot& status = metrics.status;
  WriteFamilies<DaemonStatusSnapshot>(kDaemonFamilies, {{&status, ""}}, &out);

  std::vector<Labelled<SamplerGroupSnapshot>> groups;
  for (const auto& group : status.samplers) {
    groups.push_back(
        {&group, Label("dataset", group.dataset) + "," + Label("policy", group.policy)});
  }
  WriteFamilies<SamplerGroupSnapshot>(kSamplerFamilies, groups, &out);

  std::vector<Labelled<JobSnapshot>> jobs;
  for (const auto& job : metrics.jobs) {
    jobs.push_back(
        {&job, Label("job", std::to_string(job.job_id)) + "," + Label("name", job.name)});
  }
  WriteFamilies<JobSnapshot>(kJobFamilies, jobs, &out);

  std::vector<Labelled<TierSnapshot>> tiers;
  if (metrics.cache) {
    tiers = {{&metrics.cache->augmented.tier, Label("tier", "augmented")},
             {&metrics.cache->decoded, Label("tier", "decoded")},
             {&metrics.cache->encoded, Label("tier", "encoded")}};
  }
  WriteFamilies<TierSnapshot>(kTierFamilies, tiers, &out);
  std::vector<Labelled<ArenaSnapshot>> arenas;
  if (metrics.cache && metrics.cache->decoded_arena) {
    arenas.push_back({&*metrics.cache->decoded_arena, ""});
  }
  WriteFamilies<ArenaSnapshot>(kArenaFamilies, arenas, &out);

  if (status.pipeline.disk) {
    WriteFamilies<DiskTierSnapshot>(kDiskFamilies, {{&*status.pipeline.disk, ""}}, &out);
  }
  if (status.pipeline.remote) {
    const RemoteTierSnapshot& remote = *status.pipeline.remote;
    WriteFamilies<RemoteTierSnapshot>(kRemoteFamilies, {{&remote, ""}}, &out);
    std::vector<Labelled<RemoteServerSnapshot>> servers;
    for (const auto& server : remote.servers) {
      servers.push_back({&server, Label("server", server.address)});
    }
    WriteFamilies<RemoteServerSnapshot>(kRemoteServerFamilies, servers, &out);
  }
  return out;
}

}  // namespace galley
