#include "wire/messages.h"

#include <algorithm>
#include <limits>

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
  const auto error = Status::InvalidArgument(std::string("field '") + name +
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

// Scans `payload` for its deepest nesting of arrays and objects without
// building anything (brackets inside strings do not count).
bool NestedDeeperThan(std::string_view payload, int limit) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : payload) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

Result<json> ParseObject(std::string_view payload) {
  if (payload.empty()) return json::object();
  if (NestedDeeperThan(payload, kMaxJsonDepth)) {
    return Status::InvalidArgument("message body is nested more than " +
                                   std::to_string(kMaxJsonDepth) + " levels deep");
  }
  json body = json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return Status::InvalidArgument("message body is not valid JSON");
  if (!body.is_object()) return Status::InvalidArgument("message body must be a JSON object");
  return body;
}

json JobSpecToJson(const JobSpec& spec) {
  json body = {
      {"dataset", spec.dataset},
      {"batch_size", spec.batch_size},
      {"drop_last", spec.drop_last},
      {"seed", spec.seed},
      {"epochs", spec.epochs},
      {"start_epoch", spec.start_epoch},
      {"rank", spec.rank},
      {"world_size", spec.world_size},
      {"prefetch", spec.prefetch},
      {"on_error", spec.on_error},
      {"policy", spec.policy},
      {"name", spec.name},
      {"classes", spec.classes},
      {"ids", spec.ids},
      {"ods_fraction", spec.ods_fraction},
      {"shards", spec.shards},
      {"image_key", spec.image_key},
      {"label_key", spec.label_key},
      {"shard_drop_last", spec.shard_drop_last},
      {"shuffle", spec.shuffle},
      {"start_batch", spec.start_batch},
      {"native_size", spec.native_size},
  };
  if (!spec.resume_consumed.empty()) body["resume_consumed"] = IdsToHexBitmap(spec.resume_consumed);
  json ranges = json::array();
  for (const auto& [begin, end] : spec.id_ranges) ranges.push_back({begin, end});
  body["id_ranges"] = std::move(ranges);
  if (!spec.transform_json.empty()) {
    body["transform"] = json::parse(spec.transform_json, nullptr, false);
  }
  return body;
}

Result<JobSpec> JobSpecFromJson(const json& body) {
  JobSpec spec;
  FieldReader r(body);
  GALLEY_RETURN_IF_ERROR(r.String("dataset", &spec.dataset, /*required=*/true));
  GALLEY_RETURN_IF_ERROR(r.StringList("classes", &spec.classes));
  GALLEY_RETURN_IF_ERROR(r.RangeList("id_ranges", &spec.id_ranges));
  GALLEY_RETURN_IF_ERROR(r.UnsignedList("ids", &spec.ids));
  GALLEY_RETURN_IF_ERROR(r.Unsigned("batch_size", &spec.batch_size, /*required=*/true));
  GALLEY_RETURN_IF_ERROR(r.Bool("drop_last", &spec.drop_last));
  GALLEY_RETURN_IF_ERROR(r.Unsigned("seed", &spec.seed));
  GALLEY_RETURN_IF_ERROR(r.Unsigned("epochs", &spec.epochs));
  GALLEY_RETURN_IF_ERROR(r.Unsigned("start_epoch", &spec.start_epoch));
  GALLEY_RETURN_IF_ERROR(r.Unsigned("rank", &spec.rank));
  GALLEY_RETURN_IF_ERROR(r.Unsigned("world_size", &spec.world_size));
  GALLEY_RETURN_IF_ERROR(r.Unsigned("prefetch", &spec.prefetch));
  GALLEY_RETURN_IF_ERROR(r.String("on_error", &spec.on_error));
  GALLEY_RETURN_IF_ERROR(r.String("policy", &spec.policy));
  GALLEY_RETURN_IF_ERROR(r.Fraction("ods_fraction", &spec.ods_fraction));
  GALLEY_RETURN_IF_ERROR(r.String("name", &spec.name));
  GALLEY_RETURN_IF_ERROR(r.StringList("shards", &spec.shards));
  GALLEY_RETURN_IF_ERROR(r.String("image_key", &spec.image_key));
  GALLEY_RETURN_IF_ERROR(r.String("label_key", &spec.label_key));
  GALLEY_RETURN_IF_ERROR(r.Bool("shard_drop_last", &spec.shard_drop_last));
  GALLEY_RETURN_IF_ERROR(r.Bool("shuffle", &spec.shuffle));
  GALLEY_RETURN_IF_ERROR(r.Unsigned("start_batch", &spec.start_batch));
  GALLEY_RETURN_IF_ERROR(r.Bool("native_size", &spec.native_size));
  GALLEY_RETURN_IF_ERROR(HexBitmapToIds(body, "resume_consumed", &spec.resume_consumed));
  auto transform = body.find("transform");
  if (transform == body.end() || !transform->is_object()) {
    return Status::InvalidArgument("field 'transform' must be a transform pipeline object");
  }
  spec.transform_json = transform->dump();

  if (spec.dataset.empty()) return Status::InvalidArgument("'dataset' must not be empty");
  if (spec.batch_size == 0) return Status::InvalidArgument("'batch_size' must be at least 1");
  if (spec.world_size == 0) return Status::InvalidArgument("'world_size' must be at least 1");
  if (spec.rank >= spec.world_size) {
    return Status::InvalidArgument("'rank' must be smaller than 'world_size'");
  }
  if (spec.prefetch == 0) return Status::InvalidArgument("'prefetch' must be at least 1");
  if (spec.on_error != "skip" && spec.on_error != "raise") {
    return Status::InvalidArgument("'on_error' must be \"skip\" or \"raise\"");
  }
  if (spec.name.size() > 256) return Status::InvalidArgument("'name' is longer than 256 bytes");
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
          {"dtype", info.dtype == DType::kUInt8 ? "uint8" : "float32"},
          {"layout", info.layout == Layout::kNCHW ? "NCHW" : "NHWC"},
          {"slots", info.slots},
          {"segment_bytes", info.segment_bytes}};
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
  if (dtype != "uint8" && dtype != "float32") return Status::ProtocolError("bad dtype " + dtype);
  if (layout != "NCHW" && layout != "NHWC") return Status::ProtocolError("bad layout " + layout);
  info.dtype = dtype == "uint8" ? DType::kUInt8 : DType::kFloat32;
  info.layout = layout == "NCHW" ? Layout::kNCHW : Layout::kNHWC;
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

}  // namespace galley::wire
