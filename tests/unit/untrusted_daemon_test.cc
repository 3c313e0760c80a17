// The client does not trust the descriptors a daemon passes in JobOpened,
// nor the figures beside them. A fake daemon on a temporary socket answers
// the handshake like galleyd and opens a job with crafted descriptors and
// announcements: the client refuses, with a clear error and before it maps
// the segment, a wake-up descriptor that is not a Unix SOCK_SEQPACKET socket,
// a segment not sealed against shrinking or of another size than announced,
// and an announcement that does not add up; then a segment whose header
// disagrees with the announcement, and a batch larger than its slot. A
// well-formed but blocking, silent or closed wake-up socket never holds it
// past its timeout.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <new>
#include <thread>
#include <tuple>
#include <vector>

#include "galley/client.h"
#include "wire/connection.h"
#include "wire/messages.h"
#include "wire/segment_layout.h"

namespace galley {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kSlots = 2;
constexpr uint32_t kBatch = 2;
constexpr int64_t kSide = 8;  // samples are 3 x 8 x 8 uint8

wire::SegmentGeometry Geometry() {
  return wire::ComputeGeometry(kSlots, kBatch, 3 * kSide * kSide).value();
}

JobInfo Info() {
  JobInfo info;
  info.job_id = 1;
  info.dataset_size = info.subset_size = info.epoch_size = 4;
  info.batches_per_epoch = 2;
  info.classes = {"a"};
  info.sample_shape = {3, kSide, kSide};
  info.slots = kSlots;
  info.segment_bytes = Geometry().segment_bytes;
  return info;
}

// What a fake daemon's segment is: by default as galleyd makes one, a
// memfd of the announced size holding a valid header, sealed as galleyd
// seals it.
struct SegmentForm {
  bool sealable = true;
  int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;  // none when not sealable
  uint64_t bytes = Geometry().segment_bytes;              // the memfd's size
  // Changes to the header galleyd would write (none: a valid one).
  std::function<void(wire::SegmentHeader&)> edit;
};

UniqueFd MakeSegment(const SegmentForm& form) {
  const auto g = Geometry();
  UniqueFd fd(::memfd_create("fake-ring", MFD_CLOEXEC | (form.sealable ? MFD_ALLOW_SEALING : 0)));
  if (!fd.valid() || ::ftruncate(fd.get(), static_cast<off_t>(form.bytes)) != 0) return {};
  // The header and slots are written as far as the memfd reaches.
  const uint64_t mapped = std::min(form.bytes, g.segment_bytes);
  void* base = mapped >= g.slots_offset
                   ? ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0)
                   : nullptr;
  if (base == MAP_FAILED) return {};
  if (base != nullptr) {
    wire::SegmentHeader* header = wire::MakeSegmentHeader(base, g,
                                                          {.channels = 3,
                                                           .height = kSide,
                                                           .width = kSide,
                                                           .dtype = wire::ElementType::kUInt8,
                                                           .layout = wire::TensorLayout::kNCHW});
    for (uint32_t i = 0; i < g.slot_count; ++i) {
      const uint64_t at = g.slots_offset + g.slot_stride * i;
      if (at + sizeof(wire::SlotHeader) <= mapped)
        new (wire::SlotAt(base, g, i)) wire::SlotHeader{};
    }
    if (form.edit) form.edit(*header);
    ::munmap(base, mapped);
  }
  if (form.sealable && form.seals != 0 && ::fcntl(fd.get(), F_ADD_SEALS, form.seals) != 0) {
    return {};
  }
  return fd;
}

// A segment with `seals` added (none when `sealable` is false).
UniqueFd MakeSegment(bool sealable, int seals) {
  return MakeSegment(SegmentForm{.sealable = sealable, .seals = seals});
}

// A connected SOCK_SEQPACKET pair in blocking mode, as a daemon could pass
// it: first the daemon's end, then the client's.
std::pair<UniqueFd, UniqueFd> MakeWakeupPair(int type = SOCK_SEQPACKET) {
  int ends[2] = {-1, -1};
  EXPECT_EQ(::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, ends), 0);
  return {UniqueFd(ends[0]), UniqueFd(ends[1])};
}

// What a fake daemon passes with JobOpened.
struct Descriptors {
  UniqueFd segment;
  UniqueFd wakeup;
};

// Answers Hello with Welcome and OpenJob with JobOpened announcing `info`
// and carrying the descriptors `make` returns, like galleyd; keeps each job
// connection open (reading nothing more) until it is destroyed.
class FakeDaemon {
 public:
  explicit FakeDaemon(std::function<Descriptors()> make, JobInfo info = Info())
      : make_(std::move(make)), info_(std::move(info)) {
    char pattern[] = "/tmp/galley-fake-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    socket_path_ = dir_ + "/galleyd.sock";
    listener_.Reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket_path_.c_str());
    EXPECT_EQ(::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(listener_.get(), 8), 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeDaemon() {
    stop_ = true;
    thread_.join();
    std::filesystem::remove_all(dir_);
  }

  const std::string& socket_path() const { return socket_path_; }

 private:
  void Serve() {
    while (!stop_) {
      pollfd pfd{listener_.get(), POLLIN, 0};
      if (::poll(&pfd, 1, 20) <= 0) continue;
      UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!fd.valid()) continue;
      auto connection = std::make_unique<wire::Connection>(std::move(fd));
      auto hello = connection->ReadFrame(Clock::now() + 5s);
      if (!hello.ok() || hello->header.type != wire::MessageType::kHello) continue;
      const nlohmann::json welcome = {{"protocol_version", wire::kProtocolVersion},
                                      {"server_version", "fake"},
                                      {"pid", static_cast<int64_t>(::getpid())}};
      (void)connection->SendFrame(wire::MessageType::kWelcome, hello->header.request_id,
                                  welcome.dump());
      auto open = connection->ReadFrame(Clock::now() + 5s);
      if (!open.ok() || open->header.type != wire::MessageType::kOpenJob) continue;
      Descriptors passed = make_();
      (void)connection->SendFrame(wire::MessageType::kJobOpened, open->header.request_id,
                                  wire::JobInfoToJson(info_).dump(), passed.segment.get(),
                                  passed.wakeup.get());
      jobs_.push_back(std::move(connection));
    }
  }

  std::function<Descriptors()> make_;
  const JobInfo info_;
  std::string dir_, socket_path_;
  UniqueFd listener_;
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<wire::Connection>> jobs_;  // Serve's thread only
  std::thread thread_;
};

// Runs `call` on a thread of its own and returns its result, or nullopt if
// it has not returned after a minute: the bound catches a hang, it times
// nothing.
template <typename T>
std::optional<T> WithinAMinute(std::function<T()> call) {
  auto result = std::async(std::launch::async, std::move(call));
  if (result.wait_for(60s) != std::future_status::ready) {
    // The thread cannot be stopped: leave it behind and report the hang.
    new auto(std::move(result));
    return std::nullopt;
  }
  return result.get();
}

ClientOptions Options(const FakeDaemon& daemon) {
  ClientOptions options;
  options.socket_path = daemon.socket_path();
  options.request_timeout = 2s;
  return options;
}

JobSpec Spec() {
  JobSpec spec;
  spec.dataset = "/fake";
  spec.batch_size = kBatch;
  spec.prefetch = kSlots - 1;
  spec.transform_json = R"({"ops":[]})";
  return spec;
}

Result<Job> OpenJob(const FakeDaemon& daemon) {
  GALLEY_ASSIGN_OR_RETURN(auto client, Client::Connect(Options(daemon)));
  return client.OpenJob(Spec());
}

// Opens a job on `daemon` on a thread of its own: its status.
std::optional<Status> OpenStatus(const FakeDaemon& daemon) {
  return WithinAMinute<Status>([&] { return OpenJob(daemon).status(); });
}

// Opens a job on `daemon` and checks that the client refused it with a
// ProtocolError whose message holds `says`; `what` names the case in
// failures. Returns the message ("" when the client hung).
std::string ExpectRefused(const FakeDaemon& daemon, const std::string& what,
                          const std::string& says) {
  auto status = OpenStatus(daemon);
  if (!status) {
    ADD_FAILURE() << what << ": the client hung";
    return "";
  }
  EXPECT_EQ(status->code(), StatusCode::kProtocolError) << what << ": " << status->ToString();
  EXPECT_NE(status->message().find(says), std::string::npos) << what << ": " << status->ToString();
  return status->message();
}

UniqueFd SealedSegment() { return MakeSegment(true, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL); }

TEST(UntrustedDaemon, AnEventfdAsTheWakeupDescriptorIsRefused) {
  // A blocking eventfd: the client that read it before polling hung here.
  FakeDaemon daemon([] { return Descriptors{SealedSegment(), UniqueFd(::eventfd(0, 0))}; });
  auto status = OpenStatus(daemon);
  ASSERT_TRUE(status) << "the client hung on a blocking eventfd";
  EXPECT_EQ(status->code(), StatusCode::kProtocolError) << status->ToString();
  EXPECT_NE(status->message().find("not a socket"), std::string::npos) << status->ToString();
  EXPECT_NE(status->message().find("wake-up"), std::string::npos) << status->ToString();
}

TEST(UntrustedDaemon, APipeOrAStreamSocketAsTheWakeupDescriptorIsRefused) {
  FakeDaemon with_pipe([] {
    int ends[2];
    EXPECT_EQ(::pipe2(ends, O_CLOEXEC), 0);
    ::close(ends[1]);
    return Descriptors{SealedSegment(), UniqueFd(ends[0])};
  });
  auto status = OpenStatus(with_pipe);
  ASSERT_TRUE(status) << "the client hung on a pipe";
  EXPECT_EQ(status->code(), StatusCode::kProtocolError) << status->ToString();
  EXPECT_NE(status->message().find("not a socket"), std::string::npos) << status->ToString();

  FakeDaemon with_stream([] {
    auto [daemon_end, client_end] = MakeWakeupPair(SOCK_STREAM);
    return Descriptors{SealedSegment(), std::move(client_end)};
  });
  status = OpenStatus(with_stream);
  ASSERT_TRUE(status) << "the client hung on a stream socket";
  EXPECT_EQ(status->code(), StatusCode::kProtocolError) << status->ToString();
  EXPECT_NE(status->message().find("SOCK_SEQPACKET"), std::string::npos) << status->ToString();
}

TEST(UntrustedDaemon, ASegmentNotSealedAgainstShrinkingIsRefused) {
  const std::vector<std::pair<std::string, std::function<UniqueFd()>>> segments = {
      {"unsealable memfd", [] { return MakeSegment(false, 0); }},
      {"memfd without seals", [] { return MakeSegment(true, 0); }},
      {"memfd sealed against growing only", [] { return MakeSegment(true, F_SEAL_GROW); }},
  };
  for (const auto& segment : segments) {
    const std::string& what = segment.first;
    const auto& make = segment.second;
    FakeDaemon daemon([&make] {
      auto [daemon_end, client_end] = MakeWakeupPair();
      return Descriptors{make(), std::move(client_end)};
    });
    auto status = OpenStatus(daemon);
    ASSERT_TRUE(status) << what << ": the client hung";
    EXPECT_EQ(status->code(), StatusCode::kProtocolError) << what << ": " << status->ToString();
    EXPECT_NE(status->message().find("shrink"), std::string::npos)
        << what << ": " << status->ToString();
  }
}

TEST(UntrustedDaemon, ARegularFileOrAWriteSealedSegmentIsRefused) {
  FakeDaemon with_file([] {
    // A file its sender could truncate at will: not a memfd, so no seals.
    UniqueFd file(::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    EXPECT_TRUE(file.valid());
    EXPECT_EQ(::ftruncate(file.get(), static_cast<off_t>(Geometry().segment_bytes)), 0);
    auto [daemon_end, client_end] = MakeWakeupPair();
    return Descriptors{std::move(file), std::move(client_end)};
  });
  auto status = OpenStatus(with_file);
  ASSERT_TRUE(status) << "the client hung on a regular file";
  EXPECT_EQ(status->code(), StatusCode::kProtocolError) << status->ToString();
  EXPECT_NE(status->message().find("memfd"), std::string::npos) << status->ToString();

  FakeDaemon write_sealed([] {
    auto [daemon_end, client_end] = MakeWakeupPair();
    return Descriptors{MakeSegment(true, F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE),
                       std::move(client_end)};
  });
  status = OpenStatus(write_sealed);
  ASSERT_TRUE(status) << "the client hung on a write-sealed segment";
  EXPECT_EQ(status->code(), StatusCode::kProtocolError) << status->ToString();
  EXPECT_NE(status->message().find("sealed against writing"), std::string::npos)
      << status->ToString();
}

TEST(UntrustedDaemon, AWakeupSocketOfAnotherTypeOrFamilyIsRefused) {
  // galleyd passes a Unix SOCK_SEQPACKET socket: a datagram one (whose
  // messages could come from anyone holding its peer's address) and a UDP
  // socket are refused like the stream socket above.
  FakeDaemon with_datagram([] {
    auto [daemon_end, client_end] = MakeWakeupPair(SOCK_DGRAM);
    return Descriptors{SealedSegment(), std::move(client_end)};
  });
  ExpectRefused(with_datagram, "a datagram socket", "not a SOCK_SEQPACKET socket");

  FakeDaemon with_udp([] {
    return Descriptors{SealedSegment(), UniqueFd(::socket(AF_INET, SOCK_DGRAM, 0))};
  });
  ExpectRefused(with_udp, "a UDP socket", "not a Unix domain socket");
}

TEST(UntrustedDaemon, AFileOrAMemfdAsTheWakeupDescriptorIsRefused) {
  const std::vector<std::pair<std::string, std::function<UniqueFd()>>> wakeups = {
      {"regular file",
       [] { return UniqueFd(::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)); }},
      {"memfd", [] { return UniqueFd(::memfd_create("fake-wakeup", MFD_CLOEXEC)); }},
      // A second copy of the segment where the wake-up socket belongs.
      {"the segment", [] { return SealedSegment(); }},
  };
  for (const auto& [what, make] : wakeups) {
    FakeDaemon daemon([&make = make] {
      UniqueFd wakeup = make();
      EXPECT_TRUE(wakeup.valid());
      return Descriptors{SealedSegment(), std::move(wakeup)};
    });
    ExpectRefused(daemon, what, "not a socket");
  }
}

// A well-formed wake-up socket beside `segment`.
Descriptors WithSegment(UniqueFd segment) {
  auto [daemon_end, client_end] = MakeWakeupPair();
  return Descriptors{std::move(segment), std::move(client_end)};
}

TEST(UntrustedDaemon, ASegmentOfAnotherSizeThanAnnouncedIsRefusedBeforeItIsMapped) {
  const auto g = Geometry();
  const std::vector<std::tuple<std::string, uint64_t, std::string>> sizes = {
      // Reading any of these past their end would raise SIGBUS in this
      // process: empty (the header), and short of the last slot.
      {"empty", 0, "less than"},
      {"without its last slot", g.segment_bytes - g.slot_stride, "less than"},
      {"a page short", g.segment_bytes - 4096, "less than"},
      {"a page more", g.segment_bytes + 4096, "more than"},
      {"twice the size", 2 * g.segment_bytes, "more than"},
  };
  for (const auto& [what, bytes, says] : sizes) {
    FakeDaemon daemon([bytes = bytes] { return WithSegment(MakeSegment({.bytes = bytes})); });
    const std::string message =
        ExpectRefused(daemon, what, says + " the " + std::to_string(g.segment_bytes));
    EXPECT_NE(message.find("before mapping it"), std::string::npos) << what << ": " << message;
  }
}

TEST(UntrustedDaemon, AnAnnouncementThatDoesNotAddUpIsRefusedBeforeTheRingIsMapped) {
  const auto g = Geometry();
  // What the client derives the ring from: slots, sample shape and dtype
  // (the batch size and fields are its own), and segment_bytes, which must
  // be what they add up to. Each forged announcement comes with a segment
  // of exactly the size it announces, so only the arithmetic can refuse it.
  struct Forged {
    std::string what;
    std::function<void(JobInfo&)> edit;
    std::string says;
    // Whether the announcement alone is refused; otherwise it adds up to
    // the segment's size and the segment's header, which it does not match,
    // is what refuses it.
    bool before_mapping = true;
  };
  const std::vector<Forged> forgeries = {
      {"segment_bytes a page more than the geometry",
       [&](JobInfo& info) { info.segment_bytes += 4096; }, "announces a batch ring of"},
      {"segment_bytes a slot short", [&](JobInfo& info) { info.segment_bytes -= g.slot_stride; },
       "announces a batch ring of"},
      {"one slot more than the segment holds", [](JobInfo& info) { info.slots += 1; },
       "announces a batch ring of"},
      {"samples 64 times the segment's",
       [](JobInfo& info) {
         info.sample_shape = {3, 8 * kSide, 8 * kSide};
       },
       "announces a batch ring of"},
      // Within the slots' page alignment: the same ring size, so the header
      // tells.
      {"samples twice as tall as the segment's",
       [](JobInfo& info) {
         info.sample_shape = {3, 2 * kSide, kSide};
       },
       "geometry does not match", false},
      {"float32 samples in a uint8 ring", [](JobInfo& info) { info.dtype = DType::kFloat32; },
       "geometry does not match", false},
      {"no slots", [](JobInfo& info) { info.slots = 0; }, "cannot be laid out"},
      // 2^31 * 2^31 * 8 bytes wraps a 64-bit size to 0, and 2^32 + 1 rows
      // do not fit the segment header: a client that multiplied blindly
      // would hand out tensors far larger than its mapping.
      {"a sample shape whose size wraps",
       [](JobInfo& info) {
         info.sample_shape = {int64_t{1} << 31, int64_t{1} << 31, 8};
       },
       "no segment can hold"},
      {"a dimension past 32 bits",
       [](JobInfo& info) {
         info.sample_shape = {3, (int64_t{1} << 32) + 1, 1};
       },
       "no segment can hold"},
  };
  for (const Forged& forged : forgeries) {
    JobInfo info = Info();
    forged.edit(info);
    // The segment: as long as announced (no longer than 64 MiB).
    const uint64_t bytes = std::min<uint64_t>(info.segment_bytes, uint64_t{64} << 20);
    FakeDaemon daemon([bytes] { return WithSegment(MakeSegment({.bytes = bytes})); }, info);
    const std::string message = ExpectRefused(daemon, forged.what, forged.says);
    EXPECT_EQ(message.find("before mapping it") != std::string::npos, forged.before_mapping)
        << forged.what << ": " << message;
  }
}

TEST(UntrustedDaemon, ASegmentWhoseHeaderDisagreesWithTheAnnouncementIsRefused) {
  // The announcement adds up and the segment is of its size, but the
  // header galleyd writes into it describes another ring or other samples.
  const std::vector<std::tuple<std::string, std::function<void(wire::SegmentHeader&)>, std::string>>
      headers = {
          {"another slot count", [](wire::SegmentHeader& h) { h.slot_count = kSlots + 1; },
           "geometry does not match"},
          {"another batch capacity", [](wire::SegmentHeader& h) { h.batch_capacity = 1; },
           "geometry does not match"},
          {"another sample size", [](wire::SegmentHeader& h) { h.sample_bytes /= 2; },
           "geometry does not match"},
          {"another segment size", [](wire::SegmentHeader& h) { h.segment_bytes -= 4096; },
           "geometry does not match"},
          // Same bytes per sample, another shape: 3 x 4 x 16 for 3 x 8 x 8.
          {"another sample shape",
           [](wire::SegmentHeader& h) {
             h.height = kSide / 2;
             h.width = kSide * 2;
           },
           "holds samples of shape [3, 4, 16] where its JobOpened announced [3, 8, 8]"},
          {"another layout", [](wire::SegmentHeader& h) { h.layout = wire::TensorLayout::kNHWC; },
           "holds samples of shape"},
          {"an unknown layout version", [](wire::SegmentHeader& h) { h.layout_version += 1; },
           "unknown layout"},
      };
  for (const auto& [what, edit, says] : headers) {
    FakeDaemon daemon([&edit = edit] { return WithSegment(MakeSegment({.edit = edit})); });
    ExpectRefused(daemon, what, says);
  }
}

// A fake daemon whose descriptors are well formed; it keeps its end of the
// wake-up socket and the segment so that a test can publish, stay silent,
// wake without publishing, or hang up.
struct WellFormed {
  UniqueFd segment = SealedSegment();
  UniqueFd daemon_end, client_end;
  std::unique_ptr<FakeDaemon> daemon;

  WellFormed() {
    std::tie(daemon_end, client_end) = MakeWakeupPair();
    // Blocking on purpose: a client that read it before polling, or relied
    // on the daemon's choice of mode, would hang.
    const int flags = ::fcntl(client_end.get(), F_GETFL);
    EXPECT_EQ(::fcntl(client_end.get(), F_SETFL, flags & ~O_NONBLOCK), 0);
    daemon = std::make_unique<FakeDaemon>([this] {
      return Descriptors{UniqueFd(::fcntl(segment.get(), F_DUPFD_CLOEXEC, 0)),
                         UniqueFd(::fcntl(client_end.get(), F_DUPFD_CLOEXEC, 0))};
    });
  }
  // Publishes slot 0 as the job's first batch and wakes the client.
  void PublishFirst(uint32_t sample_count = 1) {
    const auto g = Geometry();
    void* base =
        ::mmap(nullptr, g.segment_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, segment.get(), 0);
    ASSERT_NE(base, MAP_FAILED);
    auto* slot = wire::SlotAt(base, g, 0);
    slot->sequence = 0;
    slot->sample_count = sample_count;
    slot->state.store(static_cast<uint32_t>(wire::SlotState::kReady), std::memory_order_release);
    ::munmap(base, g.segment_bytes);
    ASSERT_EQ(::send(daemon_end.get(), "w", 1, MSG_NOSIGNAL), 1);
  }
};

TEST(UntrustedDaemon, AWellFormedDaemonIsServedAndItsBlockingSocketNeverHoldsTheClient) {
  WellFormed fake;
  auto job = OpenJob(*fake.daemon);
  ASSERT_TRUE(job.ok()) << job.status().ToString();

  // Silent: the client returns at its timeout, though its end blocks.
  auto silent = WithinAMinute<Status>([&] { return job->Next(300ms).status(); });
  ASSERT_TRUE(silent) << "Next() hung on a blocking wake-up socket";
  EXPECT_EQ(silent->code(), StatusCode::kDeadlineExceeded) << silent->ToString();

  // Woken with nothing published: a wake-up is a hint, not a count.
  ASSERT_EQ(::send(fake.daemon_end.get(), "w", 1, MSG_NOSIGNAL), 1);
  auto spurious = WithinAMinute<Status>([&] { return job->Next(300ms).status(); });
  ASSERT_TRUE(spurious) << "Next() hung after a wake-up without a batch";
  EXPECT_EQ(spurious->code(), StatusCode::kDeadlineExceeded) << spurious->ToString();

  // Published: the batch arrives (the fake speaks the protocol right, so
  // the refusals above are the descriptors' doing).
  fake.PublishFirst();
  auto batch = job->Next(10s);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->size(), 1u);
}

TEST(UntrustedDaemon, ABatchLargerThanItsSlotIsRefused) {
  WellFormed fake;
  auto job = OpenJob(*fake.daemon);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  // A count past the slot's capacity would have the batch's ids, labels
  // and tensor reach into the next slot, or past the mapping.
  fake.PublishFirst(/*sample_count=*/kBatch + 1000);
  auto batch = WithinAMinute<Status>([&] { return job->Next(10s).status(); });
  ASSERT_TRUE(batch) << "Next() hung on an oversized batch";
  EXPECT_EQ(batch->code(), StatusCode::kProtocolError) << batch->ToString();
  EXPECT_NE(batch->message().find("a batch of 1002 samples in a slot that holds 2"),
            std::string::npos)
      << batch->ToString();
}

TEST(UntrustedDaemon, AClosedWakeupSocketEndsTheWaitAsUnavailable) {
  WellFormed fake;
  auto job = OpenJob(*fake.daemon);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  fake.daemon_end.Reset();  // the connection stays open
  // Only the hang-up can end this wait before its timeout.
  auto status = WithinAMinute<Status>([&] { return job->Next(30s).status(); });
  ASSERT_TRUE(status) << "Next() hung after the daemon closed its wake-up socket";
  EXPECT_EQ(status->code(), StatusCode::kUnavailable) << status->ToString();
}

}  // namespace
}  // namespace galley
