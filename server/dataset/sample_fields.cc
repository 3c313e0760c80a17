#include "galley/dataset/sample_fields.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <initializer_list>
#include <nlohmann/json.hpp>

#include "wire/messages.h"

namespace galley {

bool ParseIntegerText(std::string_view text, int64_t* value) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
}

JsonShape ScanJsonShape(std::string_view text) {
  JsonShape shape;
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      shape.depth = std::max(shape.depth, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 1) {
      ++shape.top_level_members;
    }
  }
  return shape;
}

namespace {

std::string Extension(std::string_view name) {
  const size_t dot = name.rfind('.');
  std::string lower(dot == std::string_view::npos ? name : name.substr(dot + 1));
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

bool OneOf(const std::string& extension, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), extension) != names.end();
}

// What numpy.load(allow_pickle=False) refuses of a .npy member: not the
// format, a header longer than its max_header_size, or a dtype holding
// Python objects (which only unpickling reads).
Status CheckNpy(std::string_view data) {
  constexpr std::string_view kMagic = "\x93NUMPY";
  if (data.size() < 10 || data.substr(0, kMagic.size()) != kMagic) {
    return Status::InvalidArgument("is not a NumPy .npy file");
  }
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(data[i]); };
  const unsigned major = byte(6);
  size_t length = 0, start = 0;
  if (major == 1) {
    length = byte(8) | (size_t{byte(9)} << 8);
    start = 10;
  } else if ((major == 2 || major == 3) && data.size() >= 12) {
    length = byte(8) | (size_t{byte(9)} << 8) | (size_t{byte(10)} << 16) | (size_t{byte(11)} << 24);
    start = 12;
  } else {
    return Status::InvalidArgument("is not a NumPy .npy file (format version " +
                                   std::to_string(major) + ")");
  }
  if (length > kMaxNpyHeaderBytes) {
    return Status::InvalidArgument("has a .npy header of " + std::to_string(length) +
                                   " bytes, more than numpy.load reads (" +
                                   std::to_string(kMaxNpyHeaderBytes) + ")");
  }
  if (data.size() < start + length) return Status::InvalidArgument("is a truncated .npy file");
  const std::string_view header = data.substr(start, length);
  // An object field is the type code O, quoted, with or without a byte
  // order: 'O', '|O', "<O".
  for (size_t i = header.find('O'); i != std::string_view::npos; i = header.find('O', i + 1)) {
    const bool quoted_after =
        i + 1 < header.size() && (header[i + 1] == '\'' || header[i + 1] == '"');
    size_t before = i;
    if (before > 0 && std::string_view("|<>=").find(header[before - 1]) != std::string_view::npos)
      --before;
    const bool quoted_before =
        before > 0 && (header[before - 1] == '\'' || header[before - 1] == '"');
    if (quoted_after && quoted_before) {
      return Status::InvalidArgument(
          "holds Python objects (a pickled .npy), which galley does not unpickle");
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckFieldValue(std::string_view name, std::span<const uint8_t> value) {
  const std::string extension = Extension(name);
  const std::string_view text(reinterpret_cast<const char*>(value.data()), value.size());
  if (OneOf(extension, {"json", "jsn"})) {
    // The job decodes it with Python's json module; this check keeps a
    // broken member from reaching it. accept() builds no document, so
    // neither a deep nesting nor a large member costs more than a scan.
    if (!nlohmann::json::accept(text)) return Status::InvalidArgument("is not valid JSON");
    return CheckJsonDepth(text);
  }
  if (OneOf(extension, {"cls", "cls2", "class", "count", "index", "inx", "id"})) {
    int64_t parsed = 0;
    if (!ParseIntegerText(text, &parsed)) return Status::InvalidArgument("is not an integer");
  }
  if (OneOf(extension, {"txt", "text", "transcript"}) && !wire::IsValidUtf8(text)) {
    return Status::InvalidArgument("is not UTF-8 text");
  }
  if (extension == "npy") return CheckNpy(text);
  return Status::Ok();
}

Status CheckJsonDepth(std::string_view text) {
  if (ScanJsonShape(text).depth <= kMaxFieldJsonDepth) return Status::Ok();
  return Status::InvalidArgument("nests deeper than " + std::to_string(kMaxFieldJsonDepth) +
                                 " levels, more than Python's json module decodes safely");
}

Status CheckManifestValue(std::string_view text) {
  if (!wire::IsValidUtf8(text)) return Status::InvalidArgument("is not UTF-8 text");
  return CheckJsonDepth(text);
}

}  // namespace galley
