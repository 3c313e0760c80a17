#include "galley/dataset/sample_fields.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <span>
#include <vector>

#include "galley/shard_members.h"
#include "wire/messages.h"

namespace galley {
namespace {

// Checks a JSON text in place, one byte at a time: RFC 8259's grammar,
// strings of well-formed UTF-8 without control characters, \u escapes whose
// surrogates pair up, an optional UTF-8 byte order mark, as
// nlohmann::json::accept reads them (numbers too large for a double
// excepted: Python's json, which decodes the member in the job, takes them).
// accept() gathers each string and number in a buffer of its own, so a
// 100 MB string cost another 100 MB and more while it grew; here a member
// costs a scan and one bit per level of nesting.
class JsonChecker {
 public:
  explicit JsonChecker(std::string_view text)
      : p_(reinterpret_cast<const unsigned char*>(text.data())), end_(p_ + text.size()) {}

  bool Valid() {
    if (end_ - p_ >= 3 && p_[0] == 0xEF && p_[1] == 0xBB && p_[2] == 0xBF) p_ += 3;
    std::vector<bool> in_object;  // the open containers, innermost last
    while (true) {
      // A value is expected.
      SkipSpace();
      if (p_ == end_) return false;
      const unsigned char c = *p_;
      if (c == '{' || c == '[') {
        ++p_;
        SkipSpace();
        if (p_ != end_ && *p_ == static_cast<unsigned char>(c == '{' ? '}' : ']')) {
          ++p_;  // empty: a complete value
        } else {
          in_object.push_back(c == '{');
          if (c == '{' && !Key()) return false;
          continue;
        }
      } else if (!Scalar()) {
        return false;
      }
      // A value is complete: close what it completes, then expect the next.
      while (true) {
        SkipSpace();
        if (in_object.empty()) return p_ == end_;
        if (p_ == end_) return false;
        if (*p_ == static_cast<unsigned char>(in_object.back() ? '}' : ']')) {
          ++p_;
          in_object.pop_back();
          continue;
        }
        if (*p_ != ',') return false;
        ++p_;
        if (in_object.back() && !Key()) return false;
        break;
      }
    }
  }

 private:
  void SkipSpace() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }

  // `"name" :`
  bool Key() {
    SkipSpace();
    if (!String()) return false;
    SkipSpace();
    if (p_ == end_ || *p_ != ':') return false;
    ++p_;
    return true;
  }

  bool Scalar() {
    switch (*p_) {
      case '"':
        return String();
      case 't':
        return Word("true");
      case 'f':
        return Word("false");
      case 'n':
        return Word("null");
      default:
        return Number();
    }
  }

  bool Word(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() ||
        std::memcmp(p_, word.data(), word.size()) != 0) {
      return false;
    }
    p_ += word.size();
    return true;
  }

  bool Digits() {
    const unsigned char* start = p_;
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    return p_ != start;
  }

  bool Number() {
    if (*p_ == '-') ++p_;
    if (p_ == end_) return false;
    if (*p_ == '0') {
      ++p_;
    } else if (!Digits()) {
      return false;
    }
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      if (!Digits()) return false;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (!Digits()) return false;
    }
    return true;
  }

  // Four hex digits of a \u escape, or -1.
  int Hex4() {
    if (end_ - p_ < 4) return -1;
    int value = 0;
    for (int i = 0; i < 4; ++i) {
      const unsigned char c = *p_++;
      int digit = 0;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        digit = c - 'A' + 10;
      } else {
        return -1;
      }
      value = value * 16 + digit;
    }
    return value;
  }

  // After the backslash.
  bool Escape() {
    if (p_ == end_) return false;
    switch (*p_++) {
      case '"':
      case '\\':
      case '/':
      case 'b':
      case 'f':
      case 'n':
      case 'r':
      case 't':
        return true;
      case 'u': {
        const int unit = Hex4();
        if (unit < 0 || (unit >= 0xDC00 && unit <= 0xDFFF)) return false;
        if (unit < 0xD800 || unit > 0xDBFF) return true;
        // A high surrogate: its low one must follow.
        if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
        p_ += 2;
        const int low = Hex4();
        return low >= 0xDC00 && low <= 0xDFFF;
      }
      default:
        return false;
    }
  }

  // One UTF-8 sequence of 2 to 4 bytes (RFC 3629: no overlong forms, no
  // surrogates, nothing above U+10FFFF).
  bool Utf8() {
    const unsigned char lead = *p_;
    int length = 0;
    unsigned char low = 0x80, high = 0xBF;  // the second byte's range
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      return false;
    }
    if (end_ - p_ < length || p_[1] < low || p_[1] > high) return false;
    for (int i = 2; i < length; ++i) {
      if (p_[i] < 0x80 || p_[i] > 0xBF) return false;
    }
    p_ += length;
    return true;
  }

  bool String() {
    if (p_ == end_ || *p_ != '"') return false;
    ++p_;
    while (p_ != end_) {
      const unsigned char c = *p_;
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        ++p_;
        if (!Escape()) return false;
      } else if (c < 0x80) {
        ++p_;
      } else if (!Utf8()) {
        return false;
      }
    }
    return false;
  }

  const unsigned char* p_;
  const unsigned char* const end_;
};

}  // namespace

bool IsJsonText(std::string_view text) { return JsonChecker(text).Valid(); }

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

bool OneOf(const std::string& extension, std::span<const std::string_view> names) {
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
  if (OneOf(extension, kJsonMemberExtensions)) {
    // The job decodes it with Python's json module; this check keeps a
    // broken member from reaching it. It builds no document and copies
    // nothing, so neither a deep nesting nor a large member costs more than
    // a scan.
    if (!IsJsonText(text)) return Status::InvalidArgument("is not valid JSON");
    return CheckJsonDepth(text);
  }
  if (OneOf(extension, kIntegerMemberExtensions)) {
    int64_t parsed = 0;
    if (!ParseIntegerText(text, &parsed)) return Status::InvalidArgument("is not an integer");
  }
  if (OneOf(extension, kTextMemberExtensions) && !wire::IsValidUtf8(text)) {
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
