#include "galley/client.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "daemon_trust.h"
#include "galley/version.h"
#include "job_channel.h"
#include "wire/connection.h"
#include "wire/messages.h"

namespace galley {
namespace {

using Clock = std::chrono::steady_clock;

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

Status RefuseRing(const std::string& why) {
  return Status::ProtocolError("galleyd's JobOpened " + why +
                               "; refusing its batch ring before mapping it (the client and "
                               "daemon must be of the same protocol version)");
}

// The ring the announcement describes: `info`'s slots and sample shape,
// with `spec`'s batch size and field area. Each dimension must fit the
// segment header's 32 bits and their product a 64-bit size, and the
// segment_bytes announced must be what they add up to: the client lays
// the ring out from these, never from the segment, so a figure that does
// not agree is refused before anything is mapped.
Result<wire::SegmentGeometry> AnnouncedGeometry(const JobInfo& info, const JobSpec& spec) {
  uint64_t sample_bytes = info.dtype == DType::kUInt8 ? 1 : 4;
  for (const int64_t dimension : info.sample_shape) {
    if (dimension <= 0 || static_cast<uint64_t>(dimension) > UINT32_MAX ||
        __builtin_mul_overflow(sample_bytes, static_cast<uint64_t>(dimension), &sample_bytes)) {
      return RefuseRing("announces a sample shape " + ShapeText(info.sample_shape) +
                        " no segment can hold");
    }
  }
  auto geometry =
      wire::ComputeGeometry(info.slots, spec.batch_size, sample_bytes, FieldAreaBytes(spec));
  if (!geometry.ok()) {
    return RefuseRing("announces " + std::to_string(info.slots) + " slots of samples of shape " +
                      ShapeText(info.sample_shape) + ", which cannot be laid out (" +
                      geometry.status().message() + ")");
  }
  if (info.segment_bytes != geometry->segment_bytes) {
    return RefuseRing("announces a batch ring of " + std::to_string(info.segment_bytes) +
                      " bytes, but " + std::to_string(info.slots) + " slots of " +
                      std::to_string(spec.batch_size) + " samples of shape " +
                      ShapeText(info.sample_shape) +
                      (geometry->field_bytes > 0
                           ? " with " + std::to_string(geometry->field_bytes) + " bytes of fields"
                           : std::string()) +
                      " take " + std::to_string(geometry->segment_bytes));
  }
  return geometry;
}

// The segment header's tensor description against the announcement's: the
// tensors a batch hands out take their shape from the announcement.
Status CheckRingTensor(const wire::SegmentHeader& header, const JobInfo& info) {
  const bool nchw = info.layout == Layout::kNCHW;
  const std::vector<int64_t> in_header =
      nchw ? std::vector<int64_t>{header.channels, header.height, header.width}
           : std::vector<int64_t>{header.height, header.width, header.channels};
  const wire::ElementType dtype =
      info.dtype == DType::kUInt8 ? wire::ElementType::kUInt8 : wire::ElementType::kFloat32;
  const wire::TensorLayout layout = nchw ? wire::TensorLayout::kNCHW : wire::TensorLayout::kNHWC;
  if (in_header != info.sample_shape || header.dtype != dtype || header.layout != layout) {
    return Status::ProtocolError("galleyd's batch ring holds samples of shape " +
                                 ShapeText(in_header) + " where its JobOpened announced " +
                                 ShapeText(info.sample_shape) +
                                 " (or another dtype or layout); refusing it");
  }
  return Status::Ok();
}

// Opens a connection, checks who serves it and performs the hello/welcome
// handshake on it; `daemon`, if given, receives the checked peer.
Result<std::unique_ptr<wire::Connection>> Handshake(const ClientOptions& options,
                                                    DaemonProcess* daemon = nullptr) {
  if (options.socket_path == UserSocketPath()) {
    GALLEY_RETURN_IF_ERROR(CheckUserSocketFolder(options.socket_path));
  }
  GALLEY_ASSIGN_OR_RETURN(auto fd, wire::Connection::ConnectUnix(options.socket_path));
  auto connection = std::make_unique<wire::Connection>(std::move(fd));
  // Nothing is sent before this: not even the Hello, which names our pid.
  GALLEY_ASSIGN_OR_RETURN(const DaemonProcess peer,
                          internal::CheckDaemonPeer(*connection, options));
  if (daemon != nullptr) *daemon = peer;
  nlohmann::json hello = {{"protocol_version", wire::kProtocolVersion},
                          {"client", options.client_name},
                          {"pid", static_cast<int64_t>(::getpid())}};
  GALLEY_ASSIGN_OR_RETURN(auto hello_text, wire::EncodeJson(hello));
  // A daemon that refuses the connection (a per-user limit, a personal
  // daemon of another user) says why and closes, possibly before the Hello
  // arrives: a failed send still reads that answer.
  const Status sent = connection->SendFrame(wire::MessageType::kHello, 0, hello_text);
  auto frame = connection->ReadFrame(Clock::now() + options.request_timeout);
  if (!sent.ok() && (!frame.ok() || frame->header.type != wire::MessageType::kError)) return sent;
  if (!frame.ok() && frame.status().code() == StatusCode::kProtocolError) {
    // A daemon of another release answers in its own protocol version.
    return Status::ProtocolError("galleyd at " + options.socket_path +
                                 " cannot serve this client: " + frame.status().message() +
                                 ". This client is galley " + kVersion + " (protocol " +
                                 std::to_string(kProtocolVersion) +
                                 "); use a client and daemon of the same protocol version "
                                 "(compare `galleyctl --version` with galley.__version__).");
  }
  if (!frame.ok()) {
    return Status::Unavailable("galleyd at " + options.socket_path +
                               " did not answer the handshake: " + frame.status().message());
  }
  GALLEY_ASSIGN_OR_RETURN(auto body, wire::ParseObject(frame->payload));
  if (frame->header.type == wire::MessageType::kError) return wire::StatusFromErrorJson(body);
  if (frame->header.type != wire::MessageType::kWelcome) {
    return Status::ProtocolError("galleyd answered Hello with " +
                                 std::string(wire::MessageTypeName(frame->header.type)));
  }
  return connection;
}

// One request/reply on a connection of its own.
Result<nlohmann::json> RoundTrip(const ClientOptions& options, wire::MessageType type,
                                 const nlohmann::json& body, wire::MessageType reply_type,
                                 wire::Frame* reply_frame = nullptr,
                                 std::unique_ptr<wire::Connection>* keep = nullptr) {
  // Encoded first: a request that cannot be sent needs no connection.
  GALLEY_ASSIGN_OR_RETURN(auto text, wire::EncodeJson(body));
  GALLEY_ASSIGN_OR_RETURN(auto connection, Handshake(options));
  GALLEY_RETURN_IF_ERROR(connection->SendFrame(type, 1, text));
  GALLEY_ASSIGN_OR_RETURN(auto frame,
                          connection->ReadFrame(Clock::now() + options.request_timeout));
  GALLEY_ASSIGN_OR_RETURN(auto reply, wire::ParseObject(frame.payload));
  if (frame.header.type == wire::MessageType::kError) return wire::StatusFromErrorJson(reply);
  if (frame.header.type != reply_type) {
    return Status::ProtocolError("unexpected reply " +
                                 std::string(wire::MessageTypeName(frame.header.type)));
  }
  if (reply_frame != nullptr) *reply_frame = std::move(frame);
  if (keep != nullptr) *keep = std::move(connection);
  return reply;
}

}  // namespace

std::string UserSocketPath() {
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR"); runtime && *runtime) {
    return std::string(runtime) + "/galley/galleyd.sock";
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::string base = tmp != nullptr && *tmp ? tmp : "/tmp";
  return base + "/galley-" + std::to_string(::getuid()) + "/galleyd.sock";
}

std::string SystemSocketPath() { return "/run/galley/galleyd.sock"; }

std::string DefaultSocketPath() {
  if (const char* explicit_path = std::getenv("GALLEY_SOCKET"); explicit_path && *explicit_path) {
    return explicit_path;
  }
  struct stat st {};
  std::string user = UserSocketPath();
  if (::stat(user.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) return user;
  std::string system = SystemSocketPath();
  if (::stat(system.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) return system;
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  return runtime != nullptr && *runtime ? user : system;
}

Result<Client> Client::Connect(const ClientOptions& options) {
  DaemonProcess daemon;
  GALLEY_ASSIGN_OR_RETURN(auto connection, Handshake(options, &daemon));
  (void)connection;  // reachable; each job and query uses a connection of its own
  return Client(options, daemon);
}

Result<Job> Client::OpenJob(const JobSpec& spec) const {
  if (!spec.transform_json.empty()) {
    auto parsed = nlohmann::json::parse(spec.transform_json, nullptr, false);
    if (parsed.is_discarded()) return Status::InvalidArgument("transform_json is not valid JSON");
  }
  wire::Frame frame;
  std::unique_ptr<wire::Connection> connection;
  GALLEY_ASSIGN_OR_RETURN(
      auto reply, RoundTrip(options_, wire::MessageType::kOpenJob, wire::JobSpecToJson(spec),
                            wire::MessageType::kJobOpened, &frame, &connection));
  GALLEY_ASSIGN_OR_RETURN(JobInfo info, wire::JobInfoFromJson(reply));
  info.fields = spec.fields;
  if (spec.image_in_fields) {
    // The images travel as the batch's images, not as a field.
    std::erase(info.fields, info.image_key);
  }
  if (!frame.passed_fd.valid() || !frame.second_fd.valid()) {
    return Status::ProtocolError(
        "JobOpened arrived without the segment and wake-up socket descriptors");
  }
  // Everything that can be checked without touching the ring is, first:
  // the announcement, the wake-up socket, then the descriptor's seals and
  // size; only then is the ring mapped and its header read.
  GALLEY_ASSIGN_OR_RETURN(const wire::SegmentGeometry geometry, AnnouncedGeometry(info, spec));
  GALLEY_ASSIGN_OR_RETURN(auto wakeup, wire::WakeupReceiver::Adopt(std::move(frame.second_fd)));
  GALLEY_ASSIGN_OR_RETURN(auto region,
                          wire::MappedRegion::Map(frame.passed_fd.get(), geometry.segment_bytes));
  const wire::SegmentHeader& header = *wire::HeaderAt(region.base());
  GALLEY_RETURN_IF_ERROR(wire::ValidateHeader(header, geometry, region.size()));
  GALLEY_RETURN_IF_ERROR(CheckRingTensor(header, info));
  auto channel = std::make_shared<internal::JobChannel>(connection.release(), std::move(info),
                                                        std::move(region), std::move(wakeup),
                                                        geometry, options_.request_timeout);
  return Job(std::move(channel));
}

Result<std::string> Client::Query(const std::string& what) const {
  GALLEY_ASSIGN_OR_RETURN(auto reply, RoundTrip(options_, wire::MessageType::kQuery,
                                                {{"what", what}}, wire::MessageType::kQueryReply));
  return reply.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<std::string> Client::Listing(const JobSpec& spec, uint64_t begin, uint64_t count) const {
  GALLEY_ASSIGN_OR_RETURN(auto reply, RoundTrip(options_, wire::MessageType::kQuery,
                                                wire::ListingRequestToJson(spec, begin, count),
                                                wire::MessageType::kQueryReply));
  return reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status Client::Cancel(uint64_t job_id) const {
  return RoundTrip(options_, wire::MessageType::kQuery, {{"what", "cancel"}, {"job", job_id}},
                   wire::MessageType::kQueryReply)
      .status();
}

Status Client::Drain() const {
  return RoundTrip(options_, wire::MessageType::kQuery, {{"what", "drain"}},
                   wire::MessageType::kQueryReply)
      .status();
}

Status Client::Forget(const std::string& dataset) const {
  return RoundTrip(options_, wire::MessageType::kQuery, {{"what", "forget"}, {"dataset", dataset}},
                   wire::MessageType::kQueryReply)
      .status();
}

Job::Job(std::shared_ptr<internal::JobChannel> channel) : channel_(std::move(channel)) {}
Job::Job(Job&&) noexcept = default;
Job& Job::operator=(Job&& other) noexcept {
  if (this != &other) {
    Close();
    channel_ = std::move(other.channel_);
  }
  return *this;
}
Job::~Job() { Close(); }

const JobInfo& Job::info() const { return channel_->info(); }

Result<Batch> Job::Next(std::chrono::milliseconds timeout) {
  if (!channel_) return Status::Cancelled("the job is closed");
  GALLEY_ASSIGN_OR_RETURN(uint32_t slot, channel_->WaitNext(timeout));
  return Batch(channel_, slot);
}

Status Job::SeekEpoch(uint64_t epoch) {
  if (!channel_) return Status::Cancelled("the job is closed");
  return channel_->Seek(epoch, nullptr);
}

Status Job::SeekEpoch(uint64_t epoch, const std::vector<uint64_t>& items) {
  if (!channel_) return Status::Cancelled("the job is closed");
  return channel_->Seek(epoch, &items);
}

Result<std::string> Job::Stats() {
  if (!channel_) return Status::Cancelled("the job is closed");
  GALLEY_ASSIGN_OR_RETURN(auto stats, channel_->Stats());
  return stats.dump(2);
}

Status Job::RefreshCredentials(const ObjectStoreAccess& access) {
  if (!channel_) return Status::Cancelled("the job is closed");
  return channel_->RefreshCredentials(access);
}

void Job::Close() {
  // The channel stays until the Job goes: a Next() another thread is in
  // returns Cancelled instead of running on a freed channel.
  if (channel_) channel_->Close();
}

}  // namespace galley
