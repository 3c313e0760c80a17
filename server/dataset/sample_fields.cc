#include "galley/dataset/sample_fields.h"

#include <cctype>
#include <charconv>
#include <cstring>
#include <vector>

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
        if (p_ != end_ && *p_ == (c == '{' ? '}' : ']')) {
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
        if (*p_ == (in_object.back() ? '}' : ']')) {
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

Status CheckFieldValue(std::string_view name, std::span<const uint8_t> value) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string_view text(reinterpret_cast<const char*>(value.data()), value.size());
  if (lower == "json") {
    // The job decodes it with Python's json module; this check keeps a
    // broken member from reaching it. It builds no document and copies
    // nothing, so neither a deep nesting nor a large member costs more than
    // a scan.
    if (!IsJsonText(text)) return Status::InvalidArgument("is not valid JSON");
    return Status::Ok();
  }
  if (lower == "cls" || lower == "index") {
    int64_t parsed = 0;
    if (!ParseIntegerText(text, &parsed)) return Status::InvalidArgument("is not an integer");
  }
  return Status::Ok();
}

}  // namespace galley
