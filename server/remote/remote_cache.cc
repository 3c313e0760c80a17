#include "galley/remote/remote_cache.h"

#include <charconv>

namespace galley {

bool ParseServerAddress(const std::string& text, std::string* host, uint16_t* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  std::string name = text.substr(0, colon);
  const bool bracketed = name.front() == '[';
  if (bracketed != (name.back() == ']')) return false;
  if (!bracketed && name.find(':') != std::string::npos) return false;  // IPv6 needs [...]
  if (bracketed && name.size() < 3) return false;
  for (const char c : name) {
    if (c <= ' ' || c == '/' || c == 0x7f) return false;
  }
  unsigned value = 0;
  const char* begin = text.data() + colon + 1;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (begin == end || ec != std::errc() || ptr != end || value == 0 || value > 65535) return false;
  *host = std::move(name);
  *port = static_cast<uint16_t>(value);
  return true;
}

}  // namespace galley
