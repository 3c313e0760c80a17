#include "wire/messages.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <type_traits>

namespace galley::wire {
namespace {

using nlohmann::json;

// Small strict readers: each returns InvalidArgument naming the field.
class FieldReader {
 public:
  explicit FieldReader(const json& body) : body_(body) {}

  template <typename T>
  Status Unsigned(const char* name, T* out, bool required = false) {
    auto it = body_.find(name);
    if (it == body_.end()) return required ? Missing(name) : Status::Ok();
    if (!it->is_number_unsigned() &&
        !(it->is_number_integer() && it->template get<int64_t>() >= 0)) {
      return Status::InvalidArgument(std::string("field '") + name +
                                     "' must be a non-negative integer");
    }
    const auto value = it->template get<uint64_t>();
    if (value > std::numeric_limits<T>::max()) {
      return Status::InvalidArgument(std::string("field '") + name + "' is out of range");
    }
    *out = static_cast<T>(value);
    return Status::Ok();
  }

  Status String(const char* name, std::string* out, bool required = false) {
    auto it = body_.find(name);
    if (it == body_.end()) return required ? Missing(name) : Status::Ok();
    if (!it->is_string()) {
      return Status::InvalidArgument(std::string("field '") + name + "' must be a string");
    }
    *out = it->get<std::string>();
    return Status::Ok();
  }

  // A number in [0, 1].
  Status Fraction(const char* name, double* out) {
    auto it = body_.find(name);
    if (it == body_.end()) return Status::Ok();
    if (!it->is_number() || !(it->get<double>() >= 0.0 && it->get<double>() <= 1.0)) {
      return Status::InvalidArgument(std::string("field '") + name +
                                     "' must be a number in [0, 1]");
    }
    *out = it->get<double>();
    return Status::Ok();
  }

  Status Bool(const char* name, bool* out) {
    auto it = body_.find(name);
    if (it == body_.end()) return Status::Ok();
    if (!it->is_boolean()) {
      return Status::InvalidArgument(std::string("field '") + name + "' must be true or false");
    }
    *out = it->get<bool>();
    return Status::Ok();
  }

  Status StringList(const char* name, std::vector<std::string>* out) {
    auto it = body_.find(name);
    if (it == body_.end()) return Status::Ok();
    if (!it->is_array()) return ListError(name, "strings");
    for (const auto& v : *it) {
      if (!v.is_string()) return ListError(name, "strings");
      out->push_back(v.get<std::string>());
    }
    return Status::Ok();
  }

  Status UnsignedList(const char* name, std::vector<uint64_t>* out) {
    auto it = body_.find(name);
    if (it == body_.end()) return Status::Ok();
    if (!it->is_array()) return ListError(name, "non-negative integers");
    out->reserve(it->size());
    for (const auto& v : *it) {
      if (!v.is_number_unsigned()) return ListError(name, "non-negative integers");
      out->push_back(v.get<uint64_t>());
    }
    return Status::Ok();
  }

  Status RangeList(const char* name, std::vector<std::pair<uint64_t, uint64_t>>* out) {
    auto it = body_.find(name);
    if (it == body_.end()) return Status::Ok();
    if (!it->is_array()) return ListError(name, "[begin, end) pairs");
    for (const auto& v : *it) {
      if (!v.is_array() || v.size() != 2 || !v[0].is_number_unsigned() ||
          !v[1].is_number_unsigned()) {
        return ListError(name, "[begin, end) pairs");
      }
      const auto begin = v[0].get<uint64_t>();
      const auto end = v[1].get<uint64_t>();
      if (end < begin) {
        return Status::InvalidArgument(std::string("field '") + name +
                                       "' has a range with end < begin");
      }
      out->emplace_back(begin, end);
    }
    return Status::Ok();
  }

 private:
  static Status Missing(const char* name) {
    return Status::InvalidArgument(std::string("missing required field '") + name + "'");
  }
  static Status ListError(const char* name, const char* what) {
    return Status::InvalidArgument(std::string("field '") + name + "' must be a list of " + what);
  }
  const json& body_;
};

// A set of item ids as a hex bitmap: byte i is two hex digits, its bit j
// (least significant first) stands for id 8i + j. Far denser than a list for
// the large random sets a mid-epoch resume carries.
std::string IdsToHexBitmap(const std::vector<uint64_t>& ids) {
  uint64_t bytes = 0;
  for (uint64_t id : ids) bytes = std::max(bytes, id / 8 + 1);
  std::vector<uint8_t> bitmap(bytes, 0);
  for (uint64_t id : ids) bitmap[id / 8] |= static_cast<uint8_t>(1u << (id % 8));
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes * 2);
  for (uint8_t b : bitmap) {
    hex.push_back(kDigits[b >> 4]);
    hex.push_back(kDigits[b & 15]);
  }
  return hex;
}

Status HexBitmapToIds(const json& body, const char* name, std::vector<uint64_t>* out) {
  auto it = body.find(name);
  if (it == body.end()) return Status::Ok();
  auto error = Status::InvalidArgument(std::string("field '") + name +
                                       "' must be a hex bitmap string of even length");
  if (!it->is_string()) return error;
  const std::string& hex = it->get_ref<const std::string&>();
  if (hex.size() % 2 != 0) return error;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]);
    const int lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return error;
    const unsigned byte = static_cast<unsigned>(hi * 16 + lo);
    for (unsigned bit = 0; bit < 8; ++bit) {
      if (byte & (1u << bit)) out->push_back(uint64_t{i / 2} * 8 + bit);
    }
  }
  return Status::Ok();
}

}  // namespace

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t length;
    uint32_t code;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      length = 2, code = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3, code = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4, code = c & 0x07;
    } else {
      return false;
    }
    if (i + length > text.size()) return false;
    for (size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    static constexpr uint32_t kMinimum[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kMinimum[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += length;
  }
  return true;
}

std::string EscapeBytes(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t length = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    if (c >= 0x20 && c != 0x7F && i + length <= text.size() &&
        IsValidUtf8(text.substr(i, length)) && (c >= 0x80 || c != '\\')) {
      out.append(text.substr(i, length));
      i += length;
      continue;
    }
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 0xF];
    ++i;
  }
  return out;
}

std::string DumpJson(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<std::string> EncodeJson(const json& value) {
  try {
    return value.dump();
  } catch (const json::exception&) {
    return Status::InvalidArgument(
        "a text field is not valid UTF-8 (galley's protocol carries UTF-8 text): " +
        EscapeBytes(DumpJson(value).substr(0, 200)));
  }
}

namespace {

// What MeasureJson counts (the model in messages.h, close to what nlohmann's
// document takes with glibc's allocator).
constexpr uint64_t kValueBytes = 16, kElementBytes = 16, kContainerBytes = 64, kMemberBytes = 96,
                   kStringBytes = 48;

bool EndsToken(char c) {
  return c == ',' || c == ':' || c == ']' || c == '}' || c == '[' || c == '{' || c == '"' ||
         c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

// A scan of the text, not a parse: it allocates nothing but the stack of
// open containers (nlohmann's own SAX pass keeps every structural character
// it reads, megabytes for a body of `[],[],...`). It checks what it needs
// to count right (brackets that match, strings that end); ParseObject's
// parse checks the rest.
Result<uint64_t> MeasureJson(std::string_view text, uint64_t max_parsed_bytes) {
  const auto not_json = [] { return Status::InvalidArgument("message body is not valid JSON"); };
  uint64_t bytes = 0;
  std::vector<char> open;  // '[' or '{' for each container not closed yet
  const auto add_value = [&](uint64_t extra) {
    bytes += kValueBytes + extra + (!open.empty() && open.back() == '[' ? kElementBytes : 0);
  };
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (IsJsonSpace(c) || c == ',' || c == ':') {
      ++i;
      continue;
    }
    if (c == '[' || c == '{') {
      add_value(kContainerBytes);
      if (open.size() >= static_cast<size_t>(kMaxJsonDepth)) {
        return Status::InvalidArgument("message body is nested more than " +
                                       std::to_string(kMaxJsonDepth) + " levels deep");
      }
      open.push_back(c);
      ++i;
    } else if (c == ']' || c == '}') {
      if (open.empty() || open.back() != (c == ']' ? '[' : '{')) return not_json();
      open.pop_back();
      ++i;
    } else if (c == '"') {
      size_t end = i + 1;
      while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
      if (end >= text.size()) return not_json();
      const uint64_t length = end - i - 1;  // as written: at least its decoded length
      i = end + 1;
      size_t next = i;
      while (next < text.size() && IsJsonSpace(text[next])) ++next;
      const bool key =
          !open.empty() && open.back() == '{' && next < text.size() && text[next] == ':';
      if (key) {
        bytes += kMemberBytes + length;
      } else {
        add_value(kStringBytes + length);
      }
    } else {
      add_value(0);  // a number or a literal, up to the next delimiter
      while (i < text.size() && !EndsToken(text[i])) ++i;
    }
    if (bytes > max_parsed_bytes) {
      return Status::InvalidArgument(
          "message body would take more than " + std::to_string(max_parsed_bytes >> 20) +
          " MiB once parsed (many small arrays, objects or numbers); send fewer items, for "
          "example id_ranges instead of single ids");
    }
  }
  if (!open.empty()) return not_json();
  return bytes;
}

Result<json> ParseObject(std::string_view payload) {
  if (payload.empty()) return json::object();
  GALLEY_RETURN_IF_ERROR(MeasureJson(payload).status());
  json body = json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return Status::InvalidArgument("message body is not valid JSON");
  if (!body.is_object()) return Status::InvalidArgument("message body must be a JSON object");
  return body;
}

namespace {

// One JobSpec field on the wire (docs/protocol.md §1.4): its name, and how
// it is written into and read from an OpenJob body. kJobSpecFields is the
// one list of them; JobSpecFieldNames() gives it to the Python package.
struct JobSpecField {
  const char* name;
  bool required;  // a body without it is refused
  void (*write)(const JobSpec& spec, const JobSpecField& field, json& body);
  Status (*read)(FieldReader& reader, const json& body, const JobSpecField& field, JobSpec& spec);
};

// Typed readers: one per member type, each strict about the JSON type.
Status ReadValue(FieldReader& r, const char* name, std::string* out, bool required) {
  return r.String(name, out, required);
}
Status ReadValue(FieldReader& r, const char* name, bool* out, bool /*required*/) {
  return r.Bool(name, out);
}
Status ReadValue(FieldReader& r, const char* name, double* out, bool /*required*/) {
  return r.Fraction(name, out);
}
Status ReadValue(FieldReader& r, const char* name, std::vector<std::string>* out,
                 bool /*required*/) {
  return r.StringList(name, out);
}
Status ReadValue(FieldReader& r, const char* name, std::vector<uint64_t>* out, bool /*required*/) {
  return r.UnsignedList(name, out);
}
Status ReadValue(FieldReader& r, const char* name, std::vector<std::pair<uint64_t, uint64_t>>* out,
                 bool /*required*/) {
  return r.RangeList(name, out);
}
template <typename T>
requires std::is_unsigned_v<T> &&(!std::is_same_v<T, bool>)Status
    ReadValue(FieldReader& r, const char* name, T* out, bool required) {
  return r.Unsigned(name, out, required);
}

// A field that is one JobSpec member, written as JSON of its own type.
template <auto Member>
constexpr JobSpecField Plain(const char* name, bool required = false) {
  return {name, required,
          [](const JobSpec& spec, const JobSpecField& field, json& body) {
            body[field.name] = spec.*Member;
          },
          [](FieldReader& r, const json&, const JobSpecField& field, JobSpec& spec) {
            return ReadValue(r, field.name, &(spec.*Member), field.required);
          }};
}

// An optional unsigned member: absent from the body while unset.
template <auto Member>
constexpr JobSpecField Optional(const char* name) {
  return {name, false,
          [](const JobSpec& spec, const JobSpecField& field, json& body) {
            if ((spec.*Member).has_value()) body[field.name] = *(spec.*Member);
          },
          [](FieldReader& r, const json& body, const JobSpecField& field, JobSpec& spec) {
            if (!body.contains(field.name)) return Status::Ok();
            uint64_t value = 0;
            GALLEY_RETURN_IF_ERROR(r.Unsigned(field.name, &value));
            spec.*Member = value;
            return Status::Ok();
          }};
}

// The pipeline travels as a JSON object; JobSpec keeps its text.
void WriteTransform(const JobSpec& spec, const JobSpecField& field, json& body) {
  if (!spec.transform_json.empty()) {
    body[field.name] = json::parse(spec.transform_json, nullptr, false);
  }
}
Status ReadTransform(FieldReader&, const json& body, const JobSpecField& field, JobSpec& spec) {
  auto transform = body.find(field.name);
  if (transform == body.end() || !transform->is_object()) {
    return Status::InvalidArgument(std::string("field '") + field.name +
                                   "' must be a transform pipeline object");
  }
  spec.transform_json = transform->dump();
  return Status::Ok();
}

// A list absent from the body while unset (JobSpec::epoch_items).
void WriteEpochItems(const JobSpec& spec, const JobSpecField& field, json& body) {
  if (spec.epoch_items) body[field.name] = *spec.epoch_items;
}
Status ReadEpochItems(FieldReader& r, const json& body, const JobSpecField& field, JobSpec& spec) {
  if (!body.contains(field.name)) return Status::Ok();
  spec.epoch_items.emplace();
  return r.UnsignedList(field.name, &*spec.epoch_items);
}

void WriteConsumed(const JobSpec& spec, const JobSpecField& field, json& body) {
  if (!spec.resume_consumed.empty()) body[field.name] = IdsToHexBitmap(spec.resume_consumed);
}
Status ReadConsumed(FieldReader&, const json& body, const JobSpecField& field, JobSpec& spec) {
  return HexBitmapToIds(body, field.name, &spec.resume_consumed);
}

// The job's object storage access, an object of strings (and path_style).
void WriteS3(const JobSpec& spec, const JobSpecField& field, json& body) {
  if (spec.s3) body[field.name] = ObjectStoreAccessToJson(*spec.s3);
}
Status ReadS3(FieldReader&, const json& body, const JobSpecField& field, JobSpec& spec) {
  auto it = body.find(field.name);
  if (it == body.end()) return Status::Ok();
  GALLEY_ASSIGN_OR_RETURN(spec.s3, ObjectStoreAccessFromJson(*it, field.name));
  return Status::Ok();
}

// In protocol order: fields after `name` were appended in this order.
const JobSpecField kJobSpecFields[] = {
    Plain<&JobSpec::dataset>("dataset", /*required=*/true),
    Plain<&JobSpec::classes>("classes"),
    Plain<&JobSpec::id_ranges>("id_ranges"),  // [[begin, end), ...]
    Plain<&JobSpec::ids>("ids"),
    Plain<&JobSpec::batch_size>("batch_size", /*required=*/true),
    Plain<&JobSpec::drop_last>("drop_last"),
    {"transform", true, WriteTransform, ReadTransform},
    Plain<&JobSpec::seed>("seed"),
    Plain<&JobSpec::epochs>("epochs"),
    Plain<&JobSpec::start_epoch>("start_epoch"),
    Plain<&JobSpec::rank>("rank"),
    Plain<&JobSpec::world_size>("world_size"),
    Plain<&JobSpec::prefetch>("prefetch"),
    Plain<&JobSpec::on_error>("on_error"),
    Plain<&JobSpec::policy>("policy"),
    Plain<&JobSpec::ods_fraction>("ods_fraction"),
    Plain<&JobSpec::name>("name"),
    Plain<&JobSpec::shard_drop_last>("shard_drop_last"),
    Plain<&JobSpec::shuffle>("shuffle"),
    Plain<&JobSpec::start_batch>("start_batch"),
    {"resume_consumed", false, WriteConsumed, ReadConsumed},
    Plain<&JobSpec::native_size>("native_size"),
    Plain<&JobSpec::shards>("shards"),
    Plain<&JobSpec::image_key>("image_key"),
    Plain<&JobSpec::label_key>("label_key"),
    Optional<&JobSpec::shard_seed>("shard_seed"),
    Plain<&JobSpec::local_world_size>("local_world_size"),
    {"epoch_items", false, WriteEpochItems, ReadEpochItems},
    Plain<&JobSpec::fields>("fields"),
    Plain<&JobSpec::max_member_bytes>("max_member_bytes"),
    Plain<&JobSpec::field_batch_bytes>("field_batch_bytes"),
    Plain<&JobSpec::max_resolution>("max_resolution"),
    {"s3", false, WriteS3, ReadS3},
    Plain<&JobSpec::image_in_fields>("image_in_fields"),
};

const JobSpecField* FindJobSpecField(std::string_view name) {
  for (const JobSpecField& field : kJobSpecFields) {
    if (name == field.name) return &field;
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> JobSpecFieldNames() {
  std::vector<std::string> names;
  for (const JobSpecField& field : kJobSpecFields) names.emplace_back(field.name);
  return names;
}

json JobSpecToJson(const JobSpec& spec) {
  json body = json::object();
  for (const JobSpecField& field : kJobSpecFields) field.write(spec, field, body);
  return body;
}

namespace {
// Field names are the client's keys for the values of each sample: unique
// and bounded.
Status CheckFieldNames(const std::vector<std::string>& fields) {
  constexpr size_t kMaxFields = 64;
  if (fields.size() > kMaxFields) {
    return Status::InvalidArgument("'fields' names more than " + std::to_string(kMaxFields) +
                                   " fields");
  }
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::string& name = fields[i];
    if (name.empty() || name.size() > 256 || name.find('\0') != std::string::npos) {
      return Status::InvalidArgument("'fields' holds an empty or over-long name");
    }
    for (size_t j = 0; j < i; ++j) {
      if (fields[j] == name) {
        return Status::InvalidArgument("'fields' names '" + EscapeBytes(name) + "' twice");
      }
    }
  }
  return Status::Ok();
}
}  // namespace

Result<JobSpec> JobSpecFromJson(const json& body) {
  // Client and daemon speak one protocol version (the handshake checks), so
  // a field this side does not know is a mistake, never a newer client:
  // refused, named, rather than ignored.
  for (const auto& [key, value] : body.items()) {
    if (FindJobSpecField(key) == nullptr) {
      return Status::InvalidArgument("unknown job spec field '" + EscapeBytes(key) + "'");
    }
  }
  JobSpec spec;
  FieldReader r(body);
  for (const JobSpecField& field : kJobSpecFields) {
    GALLEY_RETURN_IF_ERROR(field.read(r, body, field, spec));
  }

  if (spec.dataset.empty()) return Status::InvalidArgument("'dataset' must not be empty");
  if (spec.batch_size == 0) return Status::InvalidArgument("'batch_size' must be at least 1");
  if (spec.world_size == 0) return Status::InvalidArgument("'world_size' must be at least 1");
  if (spec.rank >= spec.world_size) {
    return Status::InvalidArgument("'rank' must be smaller than 'world_size'");
  }
  if (spec.local_world_size != 0 && spec.world_size % spec.local_world_size != 0) {
    return Status::InvalidArgument(
        "'world_size' must be a multiple of 'local_world_size' (ranks per node, every node "
        "running as many)");
  }
  if (spec.prefetch == 0) return Status::InvalidArgument("'prefetch' must be at least 1");
  if (spec.on_error != "skip" && spec.on_error != "raise") {
    return Status::InvalidArgument("'on_error' must be \"skip\" or \"raise\"");
  }
  if (spec.name.size() > 256) return Status::InvalidArgument("'name' is longer than 256 bytes");
  if (spec.epoch_items && (!spec.classes.empty() || !spec.id_ranges.empty() || !spec.ids.empty())) {
    return Status::InvalidArgument(
        "'epoch_items' lists the epoch's items; leave 'classes', 'id_ranges' and 'ids' empty");
  }
  if (spec.epoch_items && !spec.resume_consumed.empty()) {
    return Status::InvalidArgument(
        "'epoch_items' lists the items left to serve; a resume leaves the consumed ones out "
        "of it instead of sending 'resume_consumed'");
  }
  GALLEY_RETURN_IF_ERROR(CheckFieldNames(spec.fields));
  if (spec.field_batch_bytes > (uint64_t{1} << 32)) {
    return Status::InvalidArgument("'field_batch_bytes' must be at most 4 GiB");
  }
  if (spec.max_resolution != 0 &&
      (spec.max_resolution < kMinMaxResolution || spec.max_resolution > kMaxMaxResolution)) {
    return Status::InvalidArgument(
        "'max_resolution' is the longest side in pixels images are kept at: " +
        std::to_string(kMinMaxResolution) + " to " + std::to_string(kMaxMaxResolution) +
        ", or 0 for every image at its own size; got " + std::to_string(spec.max_resolution));
  }
  return spec;
}

namespace {
// The OpenJob fields that name a dataset, which a "listing" request shares.
constexpr const char* kDatasetFields[] = {"dataset",   "shards", "image_key",
                                          "label_key", "fields", "s3"};

}  // namespace

std::vector<std::string> ListingFieldNames() {
  return std::vector<std::string>(std::begin(kDatasetFields), std::end(kDatasetFields));
}

namespace {
bool IsListingField(std::string_view name) {
  if (name == "what" || name == "begin" || name == "count") return true;
  for (const char* field : kDatasetFields) {
    if (name == field) return true;
  }
  return false;
}
}  // namespace

json ListingRequestToJson(const JobSpec& spec, uint64_t begin, uint64_t count) {
  json body = {{"what", "listing"}, {"begin", begin}};
  if (count != UINT64_MAX) body["count"] = count;
  for (const char* name : kDatasetFields) {
    const JobSpecField& field = *FindJobSpecField(name);
    field.write(spec, field, body);
  }
  return body;
}

Result<JobSpec> ListingRequestFromJson(const json& body, uint64_t* begin, uint64_t* count) {
  for (const auto& [key, value] : body.items()) {
    if (!IsListingField(key)) {
      return Status::InvalidArgument("unknown listing field '" + EscapeBytes(key) + "'");
    }
  }
  JobSpec spec;
  FieldReader r(body);
  for (const char* name : kDatasetFields) {
    const JobSpecField& field = *FindJobSpecField(name);
    GALLEY_RETURN_IF_ERROR(field.read(r, body, field, spec));
  }
  if (spec.dataset.empty()) return Status::InvalidArgument("'dataset' must not be empty");
  *begin = 0;
  *count = UINT64_MAX;
  GALLEY_RETURN_IF_ERROR(r.Unsigned("begin", begin));
  GALLEY_RETURN_IF_ERROR(r.Unsigned("count", count));
  return spec;
}

json JobInfoToJson(const JobInfo& info) {
  return {{"job_id", info.job_id},
          {"dataset_size", info.dataset_size},
          {"subset_size", info.subset_size},
          {"epoch_size", info.epoch_size},
          {"batches_per_epoch", info.batches_per_epoch},
          {"classes", info.classes},
          {"sample_shape", info.sample_shape},
          {"dtype", DTypeName(info.dtype)},
          {"layout", LayoutName(info.layout)},
          {"slots", info.slots},
          {"segment_bytes", info.segment_bytes},
          {"content_key", info.content_key},
          {"mtimes_key", info.mtimes_key},
          {"dataset_bytes", info.dataset_bytes},
          {"left_out", info.left_out},
          {"left_out_samples", info.left_out_samples},
          {"field_collations", info.field_collations},
          {"image_key", info.image_key}};
}

Result<JobInfo> JobInfoFromJson(const json& body) {
  JobInfo info;
  FieldReader r(body);
  std::string dtype, layout;
  GALLEY_RETURN_IF_ERROR(r.Unsigned("job_id", &info.job_id, true));
  GALLEY_RETURN_IF_ERROR(r.Unsigned("dataset_size", &info.dataset_size, true));
  GALLEY_RETURN_IF_ERROR(r.Unsigned("subset_size", &info.subset_size, true));
  GALLEY_RETURN_IF_ERROR(r.Unsigned("epoch_size", &info.epoch_size, true));
  GALLEY_RETURN_IF_ERROR(r.Unsigned("batches_per_epoch", &info.batches_per_epoch, true));
  GALLEY_RETURN_IF_ERROR(r.StringList("classes", &info.classes));
  GALLEY_RETURN_IF_ERROR(r.String("dtype", &dtype, true));
  GALLEY_RETURN_IF_ERROR(r.String("layout", &layout, true));
  GALLEY_RETURN_IF_ERROR(r.Unsigned("slots", &info.slots, true));
  GALLEY_RETURN_IF_ERROR(r.Unsigned("segment_bytes", &info.segment_bytes, true));
  GALLEY_RETURN_IF_ERROR(r.String("content_key", &info.content_key));
  GALLEY_RETURN_IF_ERROR(r.String("mtimes_key", &info.mtimes_key));
  GALLEY_RETURN_IF_ERROR(r.Unsigned("dataset_bytes", &info.dataset_bytes));
  GALLEY_RETURN_IF_ERROR(r.Unsigned("left_out", &info.left_out));
  GALLEY_RETURN_IF_ERROR(r.StringList("left_out_samples", &info.left_out_samples));
  GALLEY_RETURN_IF_ERROR(r.StringList("field_collations", &info.field_collations));
  GALLEY_RETURN_IF_ERROR(r.String("image_key", &info.image_key));
  auto shape = body.find("sample_shape");
  if (shape == body.end() || !shape->is_array() || shape->size() != 3) {
    return Status::ProtocolError("JobOpened lacks a 3-dimensional sample_shape");
  }
  for (const auto& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() <= 0) {
      return Status::ProtocolError("JobOpened has a bad sample_shape");
    }
    info.sample_shape.push_back(d.get<int64_t>());
  }
  const auto parsed_dtype = ParseDType(dtype);
  const auto parsed_layout = ParseLayout(layout);
  if (!parsed_dtype) return Status::ProtocolError("bad dtype " + EscapeBytes(dtype));
  if (!parsed_layout) return Status::ProtocolError("bad layout " + EscapeBytes(layout));
  info.dtype = *parsed_dtype;
  info.layout = *parsed_layout;
  return info;
}

json ErrorToJson(const Status& status) {
  return {{"code", static_cast<uint16_t>(status.code())}, {"message", status.message()}};
}

Status StatusFromErrorJson(const json& body) {
  auto code = body.find("code");
  auto message = body.find("message");
  if (code == body.end() || !code->is_number_unsigned() || message == body.end() ||
      !message->is_string()) {
    return Status::ProtocolError("malformed Error message from galleyd");
  }
  const auto value = code->get<uint64_t>();
  if (value == 0 || value > static_cast<uint64_t>(StatusCode::kCancelled)) {
    return Status::Internal("galleyd: " + message->get<std::string>());
  }
  return Status(static_cast<StatusCode>(value), message->get<std::string>());
}

json ObjectStoreAccessToJson(const ObjectStoreAccess& a) {
  return {{"endpoint_url", a.endpoint_url},
          {"region", a.region},
          {"path_style", a.path_style},
          {"access_key_id", a.access_key_id},
          {"secret_access_key", a.secret_access_key},
          {"session_token", a.session_token}};
}

Result<ObjectStoreAccess> ObjectStoreAccessFromJson(const json& value, std::string_view field) {
  const std::string prefix = std::string(field) + ".";
  if (!value.is_object()) {
    return Status::InvalidArgument("field '" + std::string(field) + "' must be an object");
  }
  ObjectStoreAccess access;
  const std::pair<const char*, std::string*> strings[] = {
      {"endpoint_url", &access.endpoint_url},
      {"region", &access.region},
      {"access_key_id", &access.access_key_id},
      {"secret_access_key", &access.secret_access_key},
      {"session_token", &access.session_token}};
  for (const auto& [key, item] : value.items()) {
    bool known = key == "path_style";
    for (const auto& [name, target] : strings) {
      if (key != name) continue;
      if (!item.is_string() || item.get_ref<const std::string&>().size() > 4096) {
        return Status::InvalidArgument("field '" + prefix + key +
                                       "' must be a string of at most 4096 bytes");
      }
      *target = item.get<std::string>();
      known = true;
    }
    if (!known) return Status::InvalidArgument("unknown field '" + prefix + EscapeBytes(key) + "'");
    if (key == "path_style") {
      if (!item.is_boolean()) {
        return Status::InvalidArgument("field '" + prefix + "path_style' must be a boolean");
      }
      access.path_style = item.get<bool>();
    }
  }
  return access;
}

}  // namespace galley::wire
