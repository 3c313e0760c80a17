// Protocol round-trips over a socketpair, without a daemon.
#include "wire/protocol.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <set>
#include <thread>

#include "galley/job_spec.h"
#include "wire/connection.h"
#include "wire/field_record.h"
#include "wire/messages.h"
#include "wire/segment_layout.h"

namespace galley::wire {
namespace {

std::pair<Connection*, Connection*> MakePair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  return {new Connection(UniqueFd(fds[0])), new Connection(UniqueFd(fds[1]))};
}

TEST(FrameHeader, RoundTripsLittleEndian) {
  FrameHeader h;
  h.type = MessageType::kOpenJob;
  h.payload_length = 0x00abcdef;
  h.request_id = 0xa0b0c0d0;
  auto bytes = EncodeFrameHeader(h);
  EXPECT_EQ(bytes[0], std::byte{'G'});
  EXPECT_EQ(bytes[3], std::byte{'Y'});
  EXPECT_EQ(bytes[8], std::byte{0xef});  // least significant byte first
  auto decoded = DecodeFrameHeader(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->type, MessageType::kOpenJob);
  EXPECT_EQ(decoded->payload_length, 0x00abcdefu);
  EXPECT_EQ(decoded->request_id, 0xa0b0c0d0u);
}

TEST(FrameHeader, RejectsBadMagicVersionTypeAndLength) {
  FrameHeader good;
  good.type = MessageType::kHello;
  auto bytes = EncodeFrameHeader(good);

  auto bad_magic = bytes;
  bad_magic[0] = std::byte{'X'};
  EXPECT_EQ(DecodeFrameHeader(bad_magic).status().code(), StatusCode::kProtocolError);

  FrameHeader v = good;
  v.version = 99;
  EXPECT_EQ(DecodeFrameHeader(EncodeFrameHeader(v)).status().code(), StatusCode::kProtocolError);

  auto unknown = bytes;
  unknown[6] = std::byte{0xff};
  EXPECT_EQ(DecodeFrameHeader(unknown).status().code(), StatusCode::kProtocolError);
  auto zero = bytes;
  zero[6] = std::byte{0};
  EXPECT_EQ(DecodeFrameHeader(zero).status().code(), StatusCode::kProtocolError);

  FrameHeader big = good;
  big.payload_length = kMaxPayloadBytes + 1;
  EXPECT_EQ(DecodeFrameHeader(EncodeFrameHeader(big)).status().code(), StatusCode::kProtocolError);
}

TEST(Connection, FramesAndDescriptorsCrossASocketpair) {
  auto [a, b] = MakePair();
  std::unique_ptr<Connection> left(a), right(b);
  int memfd = ::memfd_create("galley-test", MFD_CLOEXEC);
  ASSERT_GE(memfd, 0);
  UniqueFd owned(memfd);
  ASSERT_TRUE(left->SendFrame(MessageType::kJobOpened, 7, R"({"x":1})", memfd).ok());
  auto frame = right->ReadFrame(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  EXPECT_EQ(frame->header.type, MessageType::kJobOpened);
  EXPECT_EQ(frame->header.request_id, 7u);
  EXPECT_EQ(frame->payload, R"({"x":1})");
  EXPECT_TRUE(frame->passed_fd.valid());
  EXPECT_NE(frame->passed_fd.get(), memfd);
}

TEST(Connection, LargePayloadArrivesWhole) {
  auto [a, b] = MakePair();
  std::unique_ptr<Connection> left(a), right(b);
  std::string payload(3 << 20, 'z');
  std::thread writer(
      [&] { ASSERT_TRUE(left->SendFrame(MessageType::kQueryReply, 1, payload).ok()); });
  auto frame = right->ReadFrame();
  writer.join();
  ASSERT_TRUE(frame.ok());
  EXPECT_EQ(frame->payload.size(), payload.size());
}

TEST(Connection, PeerCloseIsUnavailableAndTruncationIsProtocolError) {
  {
    auto [a, b] = MakePair();
    std::unique_ptr<Connection> left(a), right(b);
    left.reset();
    EXPECT_EQ(right->ReadFrame().status().code(), StatusCode::kUnavailable);
  }
  {
    auto [a, b] = MakePair();
    std::unique_ptr<Connection> left(a), right(b);
    FrameHeader h;
    h.type = MessageType::kQuery;
    h.payload_length = 100;
    auto bytes = EncodeFrameHeader(h);
    ASSERT_EQ(::send(left->fd(), bytes.data(), bytes.size(), 0), 16);
    ASSERT_EQ(::send(left->fd(), "abc", 3, 0), 3);
    left.reset();
    EXPECT_EQ(right->ReadFrame().status().code(), StatusCode::kProtocolError);
  }
}

TEST(Connection, DeadlineExpires) {
  auto [a, b] = MakePair();
  std::unique_ptr<Connection> left(a), right(b);
  auto status = right->ReadFrame(std::chrono::steady_clock::now() + std::chrono::milliseconds(20));
  EXPECT_EQ(status.status().code(), StatusCode::kDeadlineExceeded);
}

TEST(Messages, JobSpecRoundTrips) {
  JobSpec spec;
  spec.dataset = "/data/x";
  spec.classes = {"cat", "dog"};
  spec.id_ranges = {{0, 10}, {20, 30}};
  spec.ids = {3, 99};
  spec.batch_size = 32;
  spec.drop_last = true;
  spec.transform_json = R"({"ops":[]})";
  spec.seed = 1234567890123ULL;
  spec.epochs = 3;
  spec.rank = 1;
  spec.world_size = 4;
  spec.on_error = "raise";
  spec.shard_drop_last = true;
  spec.shuffle = false;
  spec.start_batch = 7;
  spec.resume_consumed = {0, 5, 8, 9, 1000};
  spec.native_size = true;
  spec.start_epoch = 2;
  spec.prefetch = 9;
  spec.policy = "ods";
  spec.ods_fraction = 0.25;
  spec.name = "run-7";
  spec.shards = {"/s/a.tar", "/s/b.tar"};
  spec.image_key = "png";
  spec.label_key = "json:label";
  spec.shard_seed = 0;  // set, even to 0, is not unset
  spec.local_world_size = 2;
  spec.max_resolution = 256;
  spec.image_in_fields = true;
  spec.s3 =
      ObjectStoreAccess{"http://127.0.0.1:9000", "eu-west-1", true, "AKID", "secret", "token"};
  spec.epoch_items = std::vector<uint64_t>{4, 4, 0};  // read back apart (JobSpecListsEpochs)
  // Every field of the body is set away from its default, so a field the
  // table writes but does not read (or the reverse) shows below.
  nlohmann::json body = JobSpecToJson(spec);
  std::set<std::string> keys;
  for (const auto& [key, value] : body.items()) keys.insert(key);
  const std::vector<std::string> names = JobSpecFieldNames();
  EXPECT_EQ(keys, std::set<std::string>(names.begin(), names.end()));
  body.erase("epoch_items");  // it excludes a subset and a consumed bitmap
  auto parsed = JobSpecFromJson(body);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->dataset, spec.dataset);
  EXPECT_EQ(parsed->classes, spec.classes);
  EXPECT_EQ(parsed->id_ranges, spec.id_ranges);
  EXPECT_EQ(parsed->ids, spec.ids);
  EXPECT_EQ(parsed->batch_size, 32u);
  EXPECT_TRUE(parsed->drop_last);
  EXPECT_EQ(parsed->seed, spec.seed);
  EXPECT_EQ(parsed->rank, 1u);
  EXPECT_EQ(parsed->world_size, 4u);
  EXPECT_EQ(parsed->on_error, "raise");
  EXPECT_TRUE(parsed->shard_drop_last);
  EXPECT_FALSE(parsed->shuffle);
  EXPECT_EQ(parsed->start_batch, 7u);
  EXPECT_EQ(parsed->resume_consumed, spec.resume_consumed);  // through the hex bitmap
  EXPECT_TRUE(parsed->native_size);
  EXPECT_EQ(nlohmann::json::parse(parsed->transform_json),
            nlohmann::json::parse(spec.transform_json));
  EXPECT_EQ(parsed->start_epoch, 2u);
  EXPECT_EQ(parsed->prefetch, 9u);
  EXPECT_EQ(parsed->policy, "ods");
  EXPECT_EQ(parsed->ods_fraction, 0.25);
  EXPECT_EQ(parsed->name, "run-7");
  EXPECT_EQ(parsed->shards, spec.shards);
  EXPECT_EQ(parsed->image_key, "png");
  EXPECT_EQ(parsed->label_key, "json:label");
  EXPECT_EQ(parsed->epochs, 3u);
  EXPECT_EQ(parsed->shard_seed, std::optional<uint64_t>(0));
  EXPECT_EQ(parsed->local_world_size, 2u);
  EXPECT_EQ(parsed->max_resolution, 256u);
  EXPECT_TRUE(parsed->image_in_fields);
  ASSERT_TRUE(parsed->s3.has_value());
  EXPECT_EQ(parsed->s3->endpoint_url, "http://127.0.0.1:9000");
  EXPECT_EQ(parsed->s3->region, "eu-west-1");
  EXPECT_TRUE(parsed->s3->path_style);
  EXPECT_EQ(parsed->s3->access_key_id, "AKID");
  EXPECT_EQ(parsed->s3->secret_access_key, "secret");
  EXPECT_EQ(parsed->s3->session_token, "token");
  // A field of the access galley does not know, or of the wrong type, is
  // refused, naming the field and never its value.
  nlohmann::json odd = body;
  odd["s3"]["profile"] = "x";
  EXPECT_NE(JobSpecFromJson(odd).status().message().find("unknown field 's3.profile'"),
            std::string::npos);
  odd = body;
  odd["s3"]["secret_access_key"] = 7;
  EXPECT_NE(JobSpecFromJson(odd).status().message().find("'s3.secret_access_key' must be a string"),
            std::string::npos);
  // RefreshCredentials carries the same object, checked the same way.
  Result<ObjectStoreAccess> refreshed =
      ObjectStoreAccessFromJson(ObjectStoreAccessToJson(*spec.s3), "s3");
  ASSERT_TRUE(refreshed.ok()) << refreshed.status().ToString();
  EXPECT_EQ(refreshed->session_token, "token");
  EXPECT_TRUE(refreshed->path_style);
  EXPECT_NE(ObjectStoreAccessFromJson(nlohmann::json::array(), "s3")
                .status()
                .message()
                .find("field 's3' must be an object"),
            std::string::npos);
  EXPECT_NE(ObjectStoreAccessFromJson({{"path_style", "yes"}}, "s3")
                .status()
                .message()
                .find("'s3.path_style' must be a boolean"),
            std::string::npos);
  // Unset, the split's seed stays absent from the body and unset.
  spec.epoch_items.reset();
  spec.shard_seed.reset();
  EXPECT_FALSE(JobSpecToJson(spec).contains("shard_seed"));
  EXPECT_FALSE(JobSpecFromJson(JobSpecToJson(spec))->shard_seed.has_value());
}

TEST(Messages, JobSpecListsEpochs) {
  JobSpec listed{.dataset = "/d", .batch_size = 2, .transform_json = "{}"};
  EXPECT_FALSE(JobSpecToJson(listed).contains("epoch_items"));
  EXPECT_FALSE(JobSpecFromJson(JobSpecToJson(listed))->epoch_items.has_value());
  listed.epoch_items = std::vector<uint64_t>{4, 4, 0};  // repeats and order kept
  auto parsed = JobSpecFromJson(JobSpecToJson(listed));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->epoch_items, listed.epoch_items);
  listed.epoch_items->clear();  // present but empty is still a listed job
  EXPECT_TRUE(JobSpecFromJson(JobSpecToJson(listed))->epoch_items.has_value());
  listed.epoch_items = std::vector<uint64_t>{1};
  for (auto [field, value] :
       {std::pair<const char*, nlohmann::json>{"ids", nlohmann::json::array({1u})},
        {"classes", nlohmann::json::array({"cat"})},
        {"id_ranges", nlohmann::json::array({nlohmann::json::array({0u, 2u})})},
        {"resume_consumed", "01"}}) {
    auto body = JobSpecToJson(listed);
    body[field] = value;
    auto refused = JobSpecFromJson(body);
    ASSERT_FALSE(refused.ok()) << field;
    EXPECT_NE(refused.status().message().find("'epoch_items'"), std::string::npos)
        << refused.status().message();
  }
  auto body = JobSpecToJson(listed);
  body["epoch_items"] = nlohmann::json::array({1, -2});
  EXPECT_EQ(JobSpecFromJson(body).status().code(), StatusCode::kInvalidArgument);
}

TEST(Messages, ListingRequestNamesTheDatasetAsOpenJobDoes) {
  JobSpec spec{.dataset = "/s/a.tar", .shards = {"/s/a.tar", "/s/b.tar"}, .label_key = ""};
  const nlohmann::json body = ListingRequestToJson(spec, 40, 0);
  EXPECT_EQ(body["what"], "listing");
  uint64_t begin = 0, count = 7;
  auto parsed = ListingRequestFromJson(body, &begin, &count);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(begin, 40u);
  EXPECT_EQ(count, 0u);
  EXPECT_FALSE(ListingRequestToJson(spec, 0, UINT64_MAX).contains("count"));
  ASSERT_TRUE(
      ListingRequestFromJson(ListingRequestToJson(spec, 0, UINT64_MAX), &begin, &count).ok());
  EXPECT_EQ(count, UINT64_MAX);
  EXPECT_EQ(parsed->dataset, "/s/a.tar");
  EXPECT_EQ(parsed->shards, spec.shards);
  EXPECT_EQ(parsed->label_key, "");
  auto extra = body;
  extra["batch_size"] = 4;  // a job's field, not a listing's
  auto refused = ListingRequestFromJson(extra, &begin, &count);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("'batch_size'"), std::string::npos);
  auto unnamed = body;
  unnamed.erase("dataset");
  EXPECT_EQ(ListingRequestFromJson(unnamed, &begin, &count).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(Messages, ListingFieldNamesAreTheListingRequestsDatasetFields) {
  // Every field a listing request writes, besides its own three, is one of
  // ListingFieldNames() (which the Python package sends), and each of them
  // is an OpenJob field.
  const std::vector<std::string> names = ListingFieldNames();
  std::set<std::string> written;
  JobSpec spec{.dataset = "/d", .fields = {"txt"}};
  spec.s3 = ObjectStoreAccess{};  // written only when set
  const nlohmann::json body = ListingRequestToJson(spec, 0, 5);
  for (const auto& [key, value] : body.items()) {
    if (key != "what" && key != "begin" && key != "count") written.insert(key);
  }
  EXPECT_EQ(written, std::set<std::string>(names.begin(), names.end()));
  const std::vector<std::string> job = JobSpecFieldNames();
  for (const std::string& name : names) {
    EXPECT_NE(std::find(job.begin(), job.end(), name), job.end()) << name;
  }
  EXPECT_EQ(galley::ListingFieldNames(), names);
  EXPECT_EQ(kMaxPayloadBytes, galley::kMaxRequestBytes);
}

TEST(Messages, JobSpecRefusesAFieldItDoesNotKnow) {
  auto body = JobSpecToJson(JobSpec{.dataset = "/d", .batch_size = 4, .transform_json = "{}"});
  body["prefetch_factor"] = 2;  // a torch name, not galley's
  auto parsed = JobSpecFromJson(body);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("'prefetch_factor'"), std::string::npos)
      << parsed.status().message();
}

TEST(Messages, MaxResolutionIsOffOrASensibleSide) {
  auto body = JobSpecToJson(JobSpec{.dataset = "/d", .batch_size = 4, .transform_json = "{}"});
  EXPECT_EQ(JobSpecFromJson(body)->max_resolution, 0u);  // off unless asked for
  body.erase("max_resolution");
  EXPECT_EQ(JobSpecFromJson(body)->max_resolution, 0u);
  for (uint64_t accepted : {uint64_t{16}, uint64_t{256}, uint64_t{65535}}) {
    body["max_resolution"] = accepted;
    auto parsed = JobSpecFromJson(body);
    ASSERT_TRUE(parsed.ok()) << accepted << ": " << parsed.status().ToString();
    EXPECT_EQ(parsed->max_resolution, accepted);
  }
  for (uint64_t refused : {uint64_t{1}, uint64_t{15}, uint64_t{65536}, uint64_t{1} << 31}) {
    body["max_resolution"] = refused;
    auto parsed = JobSpecFromJson(body);
    ASSERT_FALSE(parsed.ok()) << refused;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("'max_resolution' is the longest side in pixels "
                                             "images are kept at: 16 to 65535, or 0"),
              std::string::npos)
        << parsed.status().message();
  }
  for (nlohmann::json wrong : {nlohmann::json(-256), nlohmann::json(256.5), nlohmann::json("256"),
                               nlohmann::json(uint64_t{1} << 40)}) {
    body["max_resolution"] = wrong;
    auto parsed = JobSpecFromJson(body);
    ASSERT_FALSE(parsed.ok()) << wrong;
    EXPECT_NE(parsed.status().message().find("'max_resolution'"), std::string::npos)
        << parsed.status().message();
  }
}

TEST(Messages, PublicParseJobSpecReadsTheWireForm) {
  auto spec = ParseJobSpec(R"({"dataset": "/d", "batch_size": 8, "transform": {"ops": []},
                               "policy": "lockstep", "ids": [4, 2]})");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->batch_size, 8u);
  EXPECT_EQ(spec->policy, "lockstep");
  EXPECT_EQ(spec->ids, (std::vector<uint64_t>{4, 2}));
  EXPECT_EQ(ParseJobSpec(R"({"dataset": "/d"})").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseJobSpec("[1]").status().code(), StatusCode::kInvalidArgument);
}

TEST(Messages, JobSpecValidationNamesTheField) {
  auto base = JobSpecToJson(JobSpec{.dataset = "/d", .batch_size = 4, .transform_json = "{}"});
  auto expect_error = [&](nlohmann::json body, const std::string& needle) {
    auto parsed = JobSpecFromJson(body);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(needle), std::string::npos)
        << parsed.status().message();
  };
  auto b = base;
  b["batch_size"] = 0;
  expect_error(b, "batch_size");
  b = base;
  b["batch_size"] = "many";
  expect_error(b, "batch_size");
  b = base;
  b["batch_size"] = -3;
  expect_error(b, "batch_size");
  b = base;
  b.erase("dataset");
  expect_error(b, "dataset");
  b = base;
  b["rank"] = 4;
  b["world_size"] = 4;
  expect_error(b, "rank");
  b = base;
  b["resume_consumed"] = "0g";
  expect_error(b, "resume_consumed");
  b = base;
  b["resume_consumed"] = "abc";
  expect_error(b, "resume_consumed");
  b = base;
  b["shuffle"] = 1;
  expect_error(b, "shuffle");
  b = base;
  b["on_error"] = "ignore";
  expect_error(b, "on_error");
  b = base;
  b["id_ranges"] = {{5, 1}};
  expect_error(b, "id_ranges");
  b = base;
  b["ids"] = {1, "two"};
  expect_error(b, "ids");
  b = base;
  b["transform"] = 5;
  expect_error(b, "transform");
  b = base;
  b["prefetch"] = 1ULL << 40;
  expect_error(b, "prefetch");
  b = base;
  b["shard_seed"] = -1;
  expect_error(b, "shard_seed");
  b = base;
  b["world_size"] = 6;
  b["local_world_size"] = 4;
  expect_error(b, "local_world_size");
}

TEST(Messages, ParseObjectRejectsNonObjects) {
  EXPECT_TRUE(ParseObject("").ok());
  EXPECT_FALSE(ParseObject("[1,2]").ok());
  EXPECT_FALSE(ParseObject("{not json").ok());
  EXPECT_FALSE(ParseObject(std::string("\0\xff\xfe", 3)).ok());
}

TEST(Messages, ErrorRoundTrips) {
  Status s = Status::ResourceExhausted("too many jobs");
  Status back = StatusFromErrorJson(ErrorToJson(s));
  EXPECT_EQ(back.code(), s.code());
  EXPECT_EQ(back.message(), s.message());
  EXPECT_EQ(StatusFromErrorJson({{"code", "x"}}).code(), StatusCode::kProtocolError);
}

TEST(SegmentLayout, GeometryIsAlignedAndValidated) {
  auto g = ComputeGeometry(4, 64, 3 * 224 * 224);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->slots_offset % kSlotAlignment, 0u);
  EXPECT_EQ(g->tensor_offset % kSlotAlignment, 0u);
  EXPECT_EQ(g->slot_stride % kSlotAlignment, 0u);
  EXPECT_GE(g->slot_stride, g->tensor_offset + 64ull * 3 * 224 * 224);
  EXPECT_EQ(g->segment_bytes, g->slots_offset + 4 * g->slot_stride);
  EXPECT_FALSE(ComputeGeometry(0, 64, 10).ok());
  EXPECT_FALSE(ComputeGeometry(4, 0, 10).ok());
  EXPECT_FALSE(ComputeGeometry(4, 1u << 31, 1ull << 40).ok());
}

TEST(SegmentLayout, AFieldAreaFollowsTheTensorAndIsValidated) {
  auto plain = ComputeGeometry(4, 8, 3 * 32 * 32);
  auto g = ComputeGeometry(4, 8, 3 * 32 * 32, 1000);
  ASSERT_TRUE(plain.ok() && g.ok());
  EXPECT_EQ(plain->fields_offset, 0u);
  EXPECT_EQ(g->fields_offset, plain->slot_stride);  // the tensor keeps its place
  EXPECT_EQ(g->field_bytes, 1000u);
  EXPECT_GE(g->slot_stride, g->fields_offset + 8 * sizeof(uint64_t) + 1000);
  EXPECT_EQ(g->slot_stride % kSlotAlignment, 0u);
  EXPECT_FALSE(ComputeGeometry(4, 8, 10, (uint64_t{1} << 32) + 1).ok());
  // A segment announcing another field area is refused.
  alignas(SegmentHeader) std::byte storage[sizeof(SegmentHeader)];
  SegmentHeader* header = MakeSegmentHeader(storage, *g, {.height = 32, .width = 32});
  EXPECT_TRUE(ValidateHeader(*header, *g, g->segment_bytes).ok());
  header->field_bytes = 2000;
  EXPECT_FALSE(ValidateHeader(*header, *g, g->segment_bytes).ok());
}

TEST(SegmentLayout, AMadeHeaderIsValidAndRecordsTheSamples) {
  auto g = ComputeGeometry(3, 8, 4 * 3 * 20 * 10, 64);
  ASSERT_TRUE(g.ok());
  alignas(SegmentHeader) std::byte storage[sizeof(SegmentHeader)];
  std::memset(storage, 0xA5, sizeof(storage));  // what a reused page could hold
  const SegmentHeader* header = MakeSegmentHeader(storage, *g,
                                                  {.channels = 3,
                                                   .height = 20,
                                                   .width = 10,
                                                   .dtype = ElementType::kFloat32,
                                                   .layout = TensorLayout::kNHWC});
  EXPECT_EQ(static_cast<const void*>(header), static_cast<const void*>(storage));
  EXPECT_TRUE(ValidateHeader(*header, *g, g->segment_bytes).ok());
  EXPECT_EQ(header->channels, 3u);
  EXPECT_EQ(header->height, 20u);
  EXPECT_EQ(header->width, 10u);
  EXPECT_EQ(header->dtype, ElementType::kFloat32);
  EXPECT_EQ(header->layout, TensorLayout::kNHWC);
  EXPECT_EQ(header->fields_offset, g->fields_offset);
  EXPECT_EQ(header->field_bytes, 64u);
  // Open, nothing waited for, no reason yet.
  EXPECT_EQ(header->closed.load(), 0u);
  EXPECT_EQ(header->close_code, 0);
  EXPECT_EQ(header->close_reason[0], '\0');
  EXPECT_EQ(header->consumer_wait_ns.load(), 0u);
  EXPECT_EQ(header->consumer_waits.load(), 0u);
  EXPECT_EQ(header->reserved, 0u);
}

TEST(FieldRecord, RoundTripsAndRefusesRecordsThatDoNotAddUp) {
  std::vector<uint8_t> record;
  const std::string caption = "a caption", json = R"({"a": 1})";
  AppendFieldValue(&record,
                   std::span(reinterpret_cast<const uint8_t*>(caption.data()), caption.size()));
  AppendFieldValue(&record, {});
  AppendFieldValue(&record, std::span(reinterpret_cast<const uint8_t*>(json.data()), json.size()));
  auto values = SplitFieldRecord(record, 3);
  ASSERT_TRUE(values.ok()) << values.status().ToString();
  EXPECT_EQ(std::string((*values)[0].begin(), (*values)[0].end()), caption);
  EXPECT_TRUE((*values)[1].empty());
  EXPECT_EQ(std::string((*values)[2].begin(), (*values)[2].end()), json);
  EXPECT_EQ(SplitFieldRecord(record, 2).status().code(), StatusCode::kProtocolError);
  EXPECT_EQ(SplitFieldRecord(record, 4).status().code(), StatusCode::kProtocolError);
  for (size_t cut = 0; cut < record.size(); ++cut) {
    EXPECT_FALSE(SplitFieldRecord(std::span(record).first(cut), 3).ok()) << cut;
  }
  std::vector<uint8_t> huge(8, 0xff);  // a length past any record
  EXPECT_FALSE(SplitFieldRecord(huge, 1).ok());
}

TEST(FieldRecord, ASlotsEndOffsetsAreCheckedBeforeARecordIsRead) {
  auto g = ComputeGeometry(1, 3, 16, 64);
  ASSERT_TRUE(g.ok());
  std::vector<uint64_t> memory(g->slot_stride / sizeof(uint64_t), 0);
  auto* slot = reinterpret_cast<SlotHeader*>(memory.data());
  uint64_t* ends = SlotFieldEnds(slot, *g);
  auto* data = reinterpret_cast<uint8_t*>(SlotFieldData(slot, *g));
  data[0] = 'a';
  data[1] = 'b';
  data[2] = 'c';
  ends[0] = 1;
  ends[1] = 3;
  ends[2] = 3;
  auto second = SlotFieldRecord(slot, *g, 1);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(std::string(second->begin(), second->end()), "bc");
  EXPECT_TRUE(SlotFieldRecord(slot, *g, 2)->empty());
  EXPECT_EQ(SlotFieldRecord(slot, *g, 3).status().code(), StatusCode::kInvalidArgument);
  ends[1] = 0;  // decreasing
  EXPECT_EQ(SlotFieldRecord(slot, *g, 1).status().code(), StatusCode::kProtocolError);
  ends[1] = 65;  // past the area
  EXPECT_EQ(SlotFieldRecord(slot, *g, 1).status().code(), StatusCode::kProtocolError);
  ends[1] = ~uint64_t{0};
  EXPECT_EQ(SlotFieldRecord(slot, *g, 2).status().code(), StatusCode::kProtocolError);
}

TEST(JobSpecFields, FieldNamesAreCheckedAndTheAreaSized) {
  auto parse = [](const std::string& fields) {
    return ParseJobSpec(R"({"dataset": "d", "batch_size": 4, "transform": {}, "fields": )" +
                        fields + "}");
  };
  ASSERT_TRUE(parse(R"(["txt", "json"])").ok());
  EXPECT_NE(parse(R"(["txt", "txt"])").status().message().find("names 'txt' twice"),
            std::string::npos);
  EXPECT_FALSE(parse(R"([""])").ok());
  JobSpec spec;
  spec.batch_size = 4;
  EXPECT_EQ(FieldAreaBytes(spec), 0u);
  spec.fields = {"txt"};
  EXPECT_EQ(FieldAreaBytes(spec), spec.max_member_bytes);  // 4 * 64 KiB is less
  spec.batch_size = 64;
  EXPECT_EQ(FieldAreaBytes(spec), 64u << 16);
  spec.field_batch_bytes = 123;
  EXPECT_EQ(FieldAreaBytes(spec), 123u);
}

TEST(Json, TextThatIsNotUtf8IsEscapedOrRefusedNeverThrown) {
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("caf\xe9"));           // Latin-1
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_EQ(EscapeBytes("caf\xe9\n\\ok"), "caf\\xe9\\x0a\\x5cok");
  const nlohmann::json body = {{"dataset", "d\xff"}};
  EXPECT_NO_THROW((void)DumpJson(body));
  auto encoded = EncodeJson(body);
  ASSERT_FALSE(encoded.ok());
  EXPECT_EQ(encoded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(encoded.status().message().find("UTF-8"), std::string::npos);
}

TEST(Json, NestingBeyondTheLimitIsRefusedBeforeParsing) {
  auto nested = [](int depth) {
    return "{\"a\":" + std::string(depth - 1, '[') + std::string(depth - 1, ']') + "}";
  };
  EXPECT_TRUE(ParseObject(nested(kMaxJsonDepth)).ok());
  EXPECT_EQ(ParseObject(nested(kMaxJsonDepth + 1)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseObject(nested(70000)).status().code(), StatusCode::kInvalidArgument);
  // Brackets inside strings do not count.
  EXPECT_TRUE(ParseObject("{\"a\":\"" + std::string(1000, '[') + "\\\"\"}").ok());
}

TEST(Json, TheParsedSizeIsMeasuredBeforeAnythingIsBuilt) {
  // Three bytes per empty array, about a hundred once parsed.
  std::string arrays = "{\"ids\":[";
  for (int i = 0; i < 100000; ++i) arrays += i == 0 ? "[]" : ",[]";
  arrays += "]}";
  auto cost = MeasureJson(arrays, kMaxParsedBytes);
  ASSERT_TRUE(cost.ok()) << cost.status().ToString();
  EXPECT_GT(*cost, uint64_t{90} * 100000);
  EXPECT_LT(*cost, uint64_t{100} * 100000 + 1000);
  auto refused = MeasureJson(arrays, *cost - 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("once parsed"), std::string::npos);
  // Numbers: 32 bytes each in an array; strings their length and more.
  EXPECT_EQ(*MeasureJson("[1,2,3]"), 16u + 64 + 3 * 32);
  EXPECT_EQ(*MeasureJson(R"({"k":"abc"})"), 16u + 64 + (96 + 1) + (16 + 48 + 3));
  EXPECT_EQ(MeasureJson("[1,").status().code(), StatusCode::kInvalidArgument);
  // A request at the limit of the largest frame is refused by ParseObject.
  std::string numbers = "{\"ids\":[0";
  while (numbers.size() < kMaxPayloadBytes - 16) numbers += ",0";
  numbers += "]}";
  EXPECT_EQ(ParseObject(numbers).status().code(), StatusCode::kInvalidArgument);
  // A realistic one passes: a million ids of seven digits.
  std::string ids = "{\"ids\":[1000000";
  for (int i = 1; i < 1000000; ++i) {
    ids += ',';
    ids += std::to_string(1000000 + i);
  }
  ids += "]}";
  EXPECT_TRUE(ParseObject(ids).ok());
}

TEST(FrameHeader, ControlMessagesHaveASmallerPayloadLimit) {
  for (MessageType type :
       {MessageType::kHello, MessageType::kQuery, MessageType::kSlotReleased,
        MessageType::kSeekEpoch, MessageType::kStatsRequest, MessageType::kCloseJob,
        MessageType::kConsumerReady, MessageType::kRefreshCredentials}) {
    FrameHeader h;
    h.type = type;
    h.payload_length = kMaxControlPayloadBytes;
    EXPECT_TRUE(DecodeFrameHeader(EncodeFrameHeader(h)).ok()) << MessageTypeName(type);
    h.payload_length = kMaxControlPayloadBytes + 1;
    auto refused = DecodeFrameHeader(EncodeFrameHeader(h));
    ASSERT_FALSE(refused.ok()) << MessageTypeName(type);
    EXPECT_EQ(refused.status().code(), StatusCode::kProtocolError);
    EXPECT_NE(refused.status().message().find(std::string(MessageTypeName(type)) + " frame"),
              std::string::npos)
        << refused.status().message();
  }
  for (MessageType type : {MessageType::kOpenJob, MessageType::kQueryReply, MessageType::kStats,
                           MessageType::kJobOpened, MessageType::kError}) {
    FrameHeader h;
    h.type = type;
    h.payload_length = kMaxPayloadBytes;
    EXPECT_TRUE(DecodeFrameHeader(EncodeFrameHeader(h)).ok()) << MessageTypeName(type);
  }
  // The sender refuses too, before anything goes out.
  auto [a, b] = MakePair();
  std::unique_ptr<Connection> left(a), right(b);
  const std::string big(kMaxControlPayloadBytes + 1, ' ');
  EXPECT_EQ(left->SendFrame(MessageType::kQuery, 1, big).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(left->TrySendFrame(MessageType::kQuery, 1, big));
}

}  // namespace
}  // namespace galley::wire
