#include "galley/dataset/sample_fields.h"

#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>

namespace galley {

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
    // broken member from reaching it. accept() builds no document, so
    // neither a deep nesting nor a large member costs more than a scan.
    if (!nlohmann::json::accept(text)) return Status::InvalidArgument("is not valid JSON");
    return Status::Ok();
  }
  if (lower == "cls" || lower == "index") {
    int64_t parsed = 0;
    if (!ParseIntegerText(text, &parsed)) return Status::InvalidArgument("is not an integer");
  }
  return Status::Ok();
}

}  // namespace galley
