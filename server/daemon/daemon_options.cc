#include "galley/daemon/daemon_options.h"

#include <arpa/inet.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "galley/client.h"
#include "galley/daemon/socket_access.h"
#include "galley/errno_text.h"
#include "galley/remote/remote_cache.h"
#include "galley/remote/remote_credentials.h"
#include "galley/sampler/sampling_policy.h"
#include "galley/version.h"

namespace galley {
namespace {

namespace fs = std::filesystem;

// TOML value types a key accepts (for a list key: of its elements).
enum TomlType : unsigned { kString = 1, kInteger = 2, kFloat = 4, kBoolean = 8 };

// One configuration key: its names, what it accepts, and how it is parsed,
// written back and copied. Values reach `set` as text whether they came from
// a flag or from the file, so both give the same message for the same value.
struct Key {
  std::string name;      // TOML key
  std::string flag;      // command-line flag
  std::string help;      // for --help
  std::string expected;  // what is accepted, in words, for error messages
  bool reloadable = false;
  bool list = false;        // TOML array; a repeated flag
  bool comma_list = false;  // a list given to the flag as A,B,C
  bool table = false;       // TOML table of strings; flag PATH=VALUE, repeated
  bool boolean = false;     // a flag without a value
  unsigned toml_types = kString;
  // Parses `values` (exactly one for a scalar key) into *options. Returns ""
  // or what was wrong, starting "got ...".
  std::function<std::string(const std::vector<std::string>& values, DaemonOptions*)> set;
  // The value in TOML syntax.
  std::function<std::string(const DaemonOptions&)> render;
  std::function<void(const DaemonOptions& from, DaemonOptions* to)> copy;
};

template <typename T>
using Field = T DaemonOptions::*;

Key Named(std::string name, std::string flag, std::string help, std::string expected,
          bool reloadable) {
  Key key;
  key.name = std::move(name);
  key.flag = std::move(flag);
  key.help = std::move(help);
  key.expected = std::move(expected);
  key.reloadable = reloadable;
  return key;
}

template <typename T>
std::function<void(const DaemonOptions&, DaemonOptions*)> CopyOf(Field<T> field) {
  return [field](const DaemonOptions& from, DaemonOptions* to) { to->*field = from.*field; };
}

// A TOML basic string.
std::string Quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned char>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string Join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : std::string(separator)) + item;
  return out;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// " (did you mean 'x'?)" for the closest candidate within a few edits, else "".
std::string DidYouMean(std::string_view given, const std::vector<std::string>& candidates) {
  const std::string lowered = Lower(given);
  const size_t tolerance = std::max<size_t>(1, std::min<size_t>(3, lowered.size() / 3));
  size_t best = tolerance + 1;
  std::string suggestion;
  for (const std::string& candidate : candidates) {
    const std::string normalised = Lower(candidate);
    const bool prefix = std::min(lowered.size(), normalised.size()) >= 3 &&
                        (lowered.rfind(normalised, 0) == 0 || normalised.rfind(lowered, 0) == 0);
    const size_t distance = prefix ? 1 : EditDistance(lowered, normalised);
    if (distance < best) {
      best = distance;
      suggestion = candidate;
    }
  }
  return suggestion.empty() ? "" : " (did you mean '" + suggestion + "'?)";
}

std::optional<uint64_t> ParseUnsigned(std::string_view text) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

std::optional<double> ParseNumber(std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// "got 'text'" for words, "got 12" for numbers.
std::string Got(std::string_view text) {
  const bool numeric =
      ParseNumber(text).has_value() && std::isdigit(static_cast<unsigned char>(text.back()));
  return numeric ? "got " + std::string(text) : "got '" + std::string(text) + "'";
}

std::string RenderNumber(double value) {
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return ec == std::errc() ? std::string(buffer, end) : std::to_string(value);
}

// Sizes are written back in the largest binary unit from MiB up that
// divides them, else in bytes.
std::string RenderSize(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"MiB", "GiB", "TiB", "PiB"};
  if (bytes == 0 || bytes % (uint64_t{1} << 20) != 0) return std::to_string(bytes);
  int unit = 0;
  uint64_t value = bytes >> 20;
  while (unit < 3 && value % 1024 == 0) {
    value /= 1024;
    ++unit;
  }
  return Quote(std::to_string(value) + kUnits[unit]);
}

std::string RenderStrings(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  quoted.reserve(items.size());
  for (const std::string& item : items) quoted.push_back(Quote(item));
  return "[" + Join(quoted, ", ") + "]";
}

std::string Names(const std::vector<std::string>& names) { return Join(names, ", "); }

const std::vector<std::string>& LogLevels() {
  static const std::vector<std::string> kLevels = {"trace", "debug",    "info", "warn",
                                                   "error", "critical", "off"};
  return kLevels;
}

// Keys of one scalar value: `parse` turns the text into the field's value or
// returns the problem.
template <typename T>
Key ScalarKey(std::string name, std::string flag, std::string help, std::string expected,
              unsigned toml_types, bool reloadable, Field<T> field,
              std::function<std::string(const std::string&, T*)> parse,
              std::function<std::string(const T&)> render) {
  Key key =
      Named(std::move(name), std::move(flag), std::move(help), std::move(expected), reloadable);
  key.toml_types = toml_types;
  key.set = [field, parse](const std::vector<std::string>& values, DaemonOptions* options) {
    T value{};
    std::string problem = parse(values.front(), &value);
    if (problem.empty()) options->*field = std::move(value);
    return problem;
  };
  key.render = [field, render](const DaemonOptions& options) { return render(options.*field); };
  key.copy = CopyOf(field);
  return key;
}

template <typename T>
Key IntegerKey(std::string name, std::string flag, std::string help, Field<T> field, uint64_t min,
               uint64_t max, bool reloadable, const std::string& note = "") {
  std::string expected = "an integer from " + std::to_string(min) + " to " + std::to_string(max);
  if (!note.empty()) expected += " (" + note + ")";
  return ScalarKey<T>(
      std::move(name), std::move(flag), std::move(help), std::move(expected), kInteger, reloadable,
      field,
      [min, max](const std::string& text, T* out) -> std::string {
        auto value = ParseUnsigned(text);
        if (!value || *value < min || *value > max) return Got(text);
        *out = static_cast<T>(*value);
        return "";
      },
      [](const T& value) { return std::to_string(value); });
}

Key SizeKey(std::string name, std::string flag, std::string help, Field<uint64_t> field,
            uint64_t min, bool reloadable, const std::string& note = "") {
  std::string expected = "a size such as 8G, 512M, 1.5GiB or a number of bytes";
  if (min > 0) expected += ", at least " + std::to_string(min);
  if (!note.empty()) expected += " (" + note + ")";
  return ScalarKey<uint64_t>(
      std::move(name), std::move(flag), std::move(help), std::move(expected),
      kString | kInteger | kFloat, reloadable, field,
      [min](const std::string& text, uint64_t* out) -> std::string {
        auto value = ParseSize(text);
        if (!value.ok() || *value < min) return Got(text);
        *out = *value;
        return "";
      },
      RenderSize);
}

Key NumberKey(std::string name, std::string flag, std::string help, Field<double> field,
              bool reloadable, const std::string& note) {
  return ScalarKey<double>(
      std::move(name), std::move(flag), std::move(help), "a number, 0 or more (" + note + ")",
      kInteger | kFloat, reloadable, field,
      [](const std::string& text, double* out) -> std::string {
        auto value = ParseNumber(text);
        if (!value || !std::isfinite(*value) || *value < 0) return Got(text);
        *out = *value;
        return "";
      },
      RenderNumber);
}

// A switch with a value, "true" or "false" on the command line and a TOML
// boolean in the file, for switches that default to on.
Key SwitchKey(std::string name, std::string flag, std::string help, Field<bool> field,
              bool reloadable) {
  return ScalarKey<bool>(
      std::move(name), std::move(flag), std::move(help), "true or false", kBoolean, reloadable,
      field,
      [](const std::string& text, bool* out) -> std::string {
        if (text != "true" && text != "false") return Got(text);
        *out = text == "true";
        return "";
      },
      [](const bool& on) { return std::string(on ? "true" : "false"); });
}

Key ChoiceKey(std::string name, std::string flag, std::string help, Field<std::string> field,
              const std::vector<std::string>& choices, bool reloadable) {
  return ScalarKey<std::string>(
      std::move(name), std::move(flag), std::move(help), "one of " + Names(choices), kString,
      reloadable, field,
      [choices](const std::string& text, std::string* out) -> std::string {
        if (std::find(choices.begin(), choices.end(), text) == choices.end()) {
          return Got(text) + DidYouMean(text, choices);
        }
        *out = text;
        return "";
      },
      Quote);
}

Key TextKey(std::string name, std::string flag, std::string help, Field<std::string> field,
            std::string expected, const std::function<std::string(const std::string&)>& check) {
  return ScalarKey<std::string>(
      std::move(name), std::move(flag), std::move(help), std::move(expected), kString,
      /*reloadable=*/false, field,
      [check](const std::string& text, std::string* out) -> std::string {
        std::string problem = check(text);
        if (problem.empty()) *out = text;
        return problem;
      },
      Quote);
}

// A list of strings, each checked by `check` ("" or what is wrong with it).
Key StringListKey(std::string name, std::string flag, std::string help, std::string expected,
                  Field<std::vector<std::string>> field, bool reloadable,
                  std::function<std::string(const std::string&)> check) {
  Key key =
      Named(std::move(name), std::move(flag), std::move(help), std::move(expected), reloadable);
  key.list = true;
  key.set = [field, check = std::move(check)](const std::vector<std::string>& values,
                                              DaemonOptions* options) {
    for (const std::string& value : values) {
      if (std::string problem = check(value); !problem.empty()) return problem;
    }
    options->*field = values;
    return std::string();
  };
  key.render = [field](const DaemonOptions& options) { return RenderStrings(options.*field); };
  key.copy = CopyOf(field);
  return key;
}

// "" for no path or an absolute one.
std::string AbsolutePathOrNone(const std::string& text) {
  return !text.empty() && text.front() != '/' ? Got(text) : std::string();
}

// "" for no group or one the node has.
std::string GroupProblem(const std::string& text) {
  if (text.empty() || GroupIdByName(text).has_value()) return "";
  return Got(text) + ", a group this node does not have";
}

// The log file must be named absolutely, so that where it lands does not
// depend on the directory galleyd happened to be started from.
std::string LogFileProblem(const std::string& text) {
  if (text.empty() || text.front() == '/') return "";
  return Got(text) + ", which is not an absolute path";
}

// "HOST:PORT" with HOST an IPv4 address, [IPv6] or localhost.
std::string ParseAddress(const std::string& text, std::string* host, uint16_t* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return Got(text) + ", which has no :PORT";
  std::string name = text.substr(0, colon);
  auto number = ParseUnsigned(std::string_view(text).substr(colon + 1));
  if (!number || *number == 0 || *number > 65535) return Got(text);
  unsigned char buffer[sizeof(in6_addr)];
  if (name == "localhost") {
    name = "127.0.0.1";
  } else if (name.size() > 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);
    if (::inet_pton(AF_INET6, name.c_str(), buffer) != 1) return Got(text);
  } else if (::inet_pton(AF_INET, name.c_str(), buffer) != 1) {
    return Got(text);
  }
  *host = name;
  *port = static_cast<uint16_t>(*number);
  return "";
}

std::string RenderAddress(const DaemonOptions& options) {
  if (options.metrics_port == 0) return Quote("");
  const bool v6 = options.metrics_host.find(':') != std::string::npos;
  return Quote((v6 ? "[" + options.metrics_host + "]" : options.metrics_host) + ":" +
               std::to_string(options.metrics_port));
}

// Every key galleyd knows, in the order --check-config prints them.
const std::vector<Key>& Keys() {
  static const std::vector<Key> keys = [] {
    std::vector<Key> k;
    k.push_back(TextKey("socket", "--socket", "control socket path", &DaemonOptions::socket_path,
                        "an absolute socket path of at most 107 bytes",
                        [](const std::string& text) -> std::string {
                          if (text.empty() || text.front() != '/' ||
                              text.size() >= sizeof(sockaddr_un{}.sun_path)) {
                            return Got(text);
                          }
                          return "";
                        }));
    k.push_back(TextKey(
        "socket_group", "--socket-group",
        "group owning the control socket (default: galley if it exists, else galleyd's own)",
        &DaemonOptions::socket_group, "the name of a group on this node, or \"\" for galleyd's own",
        GroupProblem));
    k.push_back(ScalarKey<uint32_t>(
        "socket_mode", "--socket-mode",
        "control socket mode, octal (default 0660; 0666 owner-only)",
        "an octal mode such as \"0660\", at most 0777", kString | kInteger,
        /*reloadable=*/false, &DaemonOptions::socket_mode,
        [](const std::string& text, uint32_t* out) -> std::string {
          uint32_t mode = 0;
          const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), mode, 8);
          if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
              mode > 0777) {
            return Got(text);
          }
          *out = mode;
          return "";
        },
        [](const uint32_t& mode) {
          char buffer[8];
          std::snprintf(buffer, sizeof(buffer), "%04o", mode);
          return Quote(buffer);
        }));
    k.push_back(StringListKey(
        "allowed_roots", "--allowed-root",
        "directory datasets may be served from (repeatable; required unless --owner-only)",
        "a list of absolute directory paths", &DaemonOptions::allowed_roots, true,
        [](const std::string& root) {
          return root.empty() || root.front() != '/' ? Got(root) + ", not an absolute path"
                                                     : std::string();
        }));
    k.push_back(SizeKey("cache_bytes", "--cache-bytes", "cache budget (0 disables caching)",
                        &DaemonOptions::cache_bytes, 0, false, "0 disables the cache"));
    k.push_back(SwitchKey("cache_prefault", "--cache-prefault",
                          "commit the decoded tier's memory ahead of use, at idle priority "
                          "(default true; false with --owner-only)",
                          &DaemonOptions::cache_prefault, false));
    k.push_back(ChoiceKey("cache_eviction", "--cache-eviction",
                          "cache eviction policy: refcount (default) or lru",
                          &DaemonOptions::cache_eviction, {"refcount", "lru"}, false));
    {
      Key split = Named(
          "cache_split", "--cache-split",
          "fix the cache split as E,D,A percent (encoded, decoded, augmented)",
          "three percentages E,D,A (encoded, decoded, augmented), each 0..100, adding up to at "
          "most 100; or none ([]) to let the planner choose",
          false);
      split.list = true;
      split.comma_list = true;
      split.toml_types = kInteger;
      split.set = [](const std::vector<std::string>& values, DaemonOptions* options) {
        const std::string given = Join(values, ",");
        std::vector<int> shares;
        int sum = 0;
        for (const std::string& text : values) {
          auto value = ParseUnsigned(text);
          if (!value || *value > 100) return "got " + given;
          shares.push_back(static_cast<int>(*value));
          sum += shares.back();
        }
        if (shares.size() != 0 && shares.size() != 3) {
          return "got " + given + " (" + std::to_string(shares.size()) + " values)";
        }
        if (sum > 100) return "got " + given + ", which adds up to " + std::to_string(sum) + "%";
        options->cache_split = shares;
        return std::string();
      };
      split.render = [](const DaemonOptions& options) {
        std::vector<std::string> shares;
        for (int share : options.cache_split) shares.push_back(std::to_string(share));
        return "[" + Join(shares, ", ") + "]";
      };
      split.copy = CopyOf(&DaemonOptions::cache_split);
      k.push_back(std::move(split));
    }
    k.push_back(TextKey("disk_cache", "--disk-cache",
                        "folder of the node-local disk tier, kept across restarts (none: no "
                        "disk tier)",
                        &DaemonOptions::disk_cache, "an absolute folder path, or \"\" for none",
                        AbsolutePathOrNone));
    k.push_back(SizeKey("disk_cache_bytes", "--disk-cache-bytes",
                        "bytes the disk tier's entries may take on disk (default 16GiB)",
                        &DaemonOptions::disk_cache_bytes, uint64_t{1} << 20, false));
    k.push_back(NumberKey("storage_bytes_per_s", "--storage-bytes-per-s",
                          "planner input: storage read rate", &DaemonOptions::storage_bytes_per_s,
                          false, "0 = measure"));
    k.push_back(NumberKey("decode_per_core_per_s", "--decode-per-core-per-s",
                          "planner input: decode+augment items/s per core",
                          &DaemonOptions::decode_per_core_per_s, false, "0 = measure"));
    k.push_back(NumberKey("augment_per_core_per_s", "--augment-per-core-per-s",
                          "planner input: augment-only items/s per core",
                          &DaemonOptions::augment_per_core_per_s, false, "0 = measure"));
    k.push_back(NumberKey("memory_bytes_per_s", "--memory-bytes-per-s",
                          "planner input: memory copy bandwidth",
                          &DaemonOptions::memory_bytes_per_s, false, "0 = measure"));
    k.push_back(IntegerKey("cores", "--cores", "planner input: cores preparing items",
                           &DaemonOptions::cores, 0, 4096, false, "0 = the worker threads"));
    k.push_back(StringListKey(
        "remote_cache_servers", "--remote-cache-server",
        "memcached server HOST:PORT of the remote cache tier shared by every node (repeatable)",
        "a list of HOST:PORT, HOST a name, an IPv4 address or [IPv6 address]",
        &DaemonOptions::remote_cache_servers, false, [](const std::string& server) {
          std::string host;
          uint16_t port = 0;
          return ParseServerAddress(server, &host, &port) ? std::string() : Got(server);
        }));
    k.push_back(TextKey("remote_cache_credentials", "--remote-cache-credentials",
                        "TOML file with the remote tier's SASL username and password and the "
                        "mac_key that signs its values (mode 0600)",
                        &DaemonOptions::remote_cache_credentials, "an absolute file path",
                        AbsolutePathOrNone));
    k.push_back(IntegerKey("remote_cache_connect_timeout_ms", "--remote-cache-connect-timeout-ms",
                           "most a connection to a remote cache server may take",
                           &DaemonOptions::remote_cache_connect_timeout_ms, 1, 60000, false));
    k.push_back(IntegerKey("remote_cache_io_timeout_ms", "--remote-cache-io-timeout-ms",
                           "most one wait for a remote cache server's answer may take",
                           &DaemonOptions::remote_cache_io_timeout_ms, 1, 60000, false));
    k.push_back(IntegerKey("remote_cache_retry_s", "--remote-cache-retry-s",
                           "seconds a failed remote cache server is left out before a retry",
                           &DaemonOptions::remote_cache_retry_s, 1, 3600, false));
    k.push_back(
        ChoiceKey("remote_cache_form", "--remote-cache-form",
                  "what the remote tier holds: auto (the planner decides), encoded, decoded",
                  &DaemonOptions::remote_cache_form, {"auto", "encoded", "decoded"}, false));
    k.push_back(SizeKey("remote_cache_max_value_bytes", "--remote-cache-max-value-bytes",
                        "largest value written to the remote tier (memcached's -I)",
                        &DaemonOptions::remote_cache_max_value_bytes, 1024, false));
    k.push_back(NumberKey("remote_cache_bytes_per_s", "--remote-cache-bytes-per-s",
                          "planner input: B_cache, bytes/s this node reads from the remote tier",
                          &DaemonOptions::remote_cache_bytes_per_s, false, "0 = measure"));
    k.push_back(SizeKey("remote_cache_capacity_bytes", "--remote-cache-capacity-bytes",
                        "planner input: the remote tier's capacity",
                        &DaemonOptions::remote_cache_capacity_bytes, 0, false,
                        "0 = the servers' memory limits"));
    k.push_back(NumberKey("nic_bytes_per_s", "--nic-bytes-per-s",
                          "planner input: B_NIC, this node's network link in bytes/s",
                          &DaemonOptions::nic_bytes_per_s, false, "0 = the link speed"));
    k.push_back(NumberKey("storage_throttle_bytes_per_s", "--storage-throttle-bytes-per-s",
                          "benchmarks only: slow storage reads to this rate",
                          &DaemonOptions::storage_throttle_bytes_per_s, false, "0 = off"));
    k.push_back(TextKey("storage_throttle_file", "--storage-throttle-file",
                        "benchmarks only: share the storage throttle with every galleyd naming "
                        "this file",
                        &DaemonOptions::storage_throttle_file, "an absolute file path, or \"\"",
                        AbsolutePathOrNone));
    k.push_back(IntegerKey("worker_threads", "--worker-threads", "pipeline threads",
                           &DaemonOptions::worker_threads, 0, 1024, false, "0 = one per core"));
    k.push_back(IntegerKey("sampler_seed", "--sampler-seed",
                           "mixed into every job's order; 0 = orders depend on the job's seed only",
                           &DaemonOptions::sampler_seed, 0,
                           uint64_t{std::numeric_limits<int64_t>::max()}, false));
    k.push_back(ChoiceKey("default_policy", "--default-policy",
                          "sampling policy for jobs that name none", &DaemonOptions::default_policy,
                          RandomOrderPolicyNames(), true));
    {
      Key policies =
          Named("dataset_policies", "--dataset-policy",
                "PATH=POLICY: default sampling policy for one dataset (repeatable)",
                "PATH=POLICY pairs (a TOML table \"PATH\" = \"POLICY\"), POLICY one of " +
                    Names(RandomOrderPolicyNames()),
                true);
      policies.table = true;
      policies.set = [](const std::vector<std::string>& values, DaemonOptions* options) {
        const std::vector<std::string> known = RandomOrderPolicyNames();
        for (const std::string& pair : values) {
          const size_t eq = pair.rfind('=');
          if (eq == std::string::npos || eq == 0) return Got(pair);
          const std::string policy = pair.substr(eq + 1);
          if (std::find(known.begin(), known.end(), policy) == known.end()) {
            return "got policy '" + policy + "' for " + pair.substr(0, eq) +
                   DidYouMean(policy, known);
          }
          options->dataset_policies[pair.substr(0, eq)] = policy;
        }
        return std::string();
      };
      policies.render = [](const DaemonOptions& options) {
        std::vector<std::string> entries;
        for (const auto& [path, policy] : options.dataset_policies) {
          entries.push_back(Quote(path) + " = " + Quote(policy));
        }
        return entries.empty() ? std::string("{}") : "{ " + Join(entries, ", ") + " }";
      };
      policies.copy = CopyOf(&DaemonOptions::dataset_policies);
      k.push_back(std::move(policies));
    }
    k.push_back(TextKey("tar_index_dir", "--tar-index-dir",
                        "folder of the tar shard index cache (none disables)",
                        &DaemonOptions::tar_index_dir, "a folder path, or \"none\"",
                        [](const std::string&) { return std::string(); }));
    k.push_back(SizeKey("tar_index_max_bytes", "--tar-index-max-bytes",
                        "size cap of the tar shard index cache",
                        &DaemonOptions::tar_index_max_bytes, 0, false));
    k.push_back(StringListKey(
        "allowed_s3_endpoints", "--allowed-s3-endpoint",
        "S3-compatible endpoint jobs may read datasets from (repeatable; \"aws\" for AWS's own)",
        "a list of endpoint URLs (scheme and authority, e.g. \"http://10.0.0.5:9000\"), or "
        "\"aws\"",
        &DaemonOptions::allowed_s3_endpoints, false, [](const std::string& endpoint) {
          const bool url = endpoint.rfind("http://", 0) == 0 || endpoint.rfind("https://", 0) == 0;
          return endpoint == "aws" || url ? std::string()
                                          : Got(endpoint) + ", not http(s)://HOST[:PORT] or aws";
        }));
    k.push_back(ChoiceKey("s3_folder_sharing", "--s3-folder-sharing",
                          "how jobs with other access keys share an s3:// folder or manifest of "
                          "objects: verify (a HEAD per object, default) or per_key (never)",
                          &DaemonOptions::s3_folder_sharing, {"verify", "per_key"}, false));
    k.push_back(TextKey("s3_ca_file", "--s3-ca-file",
                        "PEM file of the CA certificates an https S3 endpoint's certificate "
                        "must chain to (\"\" = the system's CA store)",
                        &DaemonOptions::s3_ca_file, "a PEM file path, or \"\"",
                        [](const std::string&) { return std::string(); }));
    k.push_back(IntegerKey("s3_refresh_wait_ms", "--s3-refresh-wait-ms",
                           "how long a read whose S3 credentials all expired waits for a job's "
                           "refreshed ones",
                           &DaemonOptions::s3_refresh_wait_ms, 0, 3600000, false));
    k.push_back(IntegerKey("s3_retries", "--s3-retries",
                           "times an S3 request that failed in a way another try may mend "
                           "(unreachable, reset, 5xx) is sent again",
                           &DaemonOptions::s3_retries, 0, 20, false));
    k.push_back(IntegerKey("s3_retry_cap_ms", "--s3-retry-cap-ms",
                           "the longest wait between two tries of an S3 request",
                           &DaemonOptions::s3_retry_cap_ms, 1, 60000, false));
    k.push_back(IntegerKey("s3_requests_in_flight", "--s3-requests-in-flight",
                           "ranged GETs of prefetched members each S3 dataset keeps in flight",
                           &DaemonOptions::s3_requests_in_flight, 1, 4096, false));
    k.push_back(SizeKey("s3_prefetch_bytes", "--s3-prefetch-bytes",
                        "bytes each S3 dataset's prefetched members may hold, in flight or "
                        "fetched and not yet read",
                        &DaemonOptions::s3_prefetch_bytes, 1 << 20, false));
    k.push_back(SizeKey("s3_listing_keep_bytes", "--s3-listing-keep-bytes",
                        "bytes of the shards an S3 shard set's listing streams that the set "
                        "keeps for its first reads (0 keeps none)",
                        &DaemonOptions::s3_listing_keep_bytes, 0, false));
    k.push_back(IntegerKey("max_open_shards", "--max-open-shards",
                           "open shard descriptors kept per dataset",
                           &DaemonOptions::max_open_shards, 1, 65536, false));
    k.push_back(IntegerKey("max_open_shards_total", "--max-open-shards-total",
                           "open shard descriptors kept for every dataset together (0 = a "
                           "quarter of the descriptor limit, 16 to 4096)",
                           &DaemonOptions::max_open_shards_total, 0, 1 << 20, false,
                           "0 = a quarter of RLIMIT_NOFILE, from 16 to 4096"));
    k.push_back(SizeKey("max_manifest_line_bytes", "--max-manifest-line-bytes",
                        "longest manifest line read, the header included",
                        &DaemonOptions::max_manifest_line_bytes, 256, false));
    k.push_back(IntegerKey("max_manifest_columns", "--max-manifest-columns",
                           "most columns a manifest's header may name",
                           &DaemonOptions::max_manifest_columns, 1, 1 << 20, false));
    k.push_back(IntegerKey("hold_budget_ms", "--hold-budget-ms",
                           "most a job is held per epoch for a slower peer (0: never)",
                           &DaemonOptions::hold_budget_ms, 0, 600000, false, "0 = never hold"));
    k.push_back(IntegerKey("thin_hold_ms", "--thin-hold-ms",
                           "longest single hold of a job whose consumer has little buffered",
                           &DaemonOptions::thin_hold_ms, 0, 60000, false));
    k.push_back(IntegerKey("peer_stall_ms", "--peer-stall-ms",
                           "a peer whose ring stays full this long is not waited for",
                           &DaemonOptions::peer_stall_ms, 0, 600000, false));
    k.push_back(IntegerKey("draw_ahead_batches", "--draw-ahead-batches",
                           "most batches a job whose ring is full draws beside its peers (0: none)",
                           &DaemonOptions::draw_ahead_batches, 0, 4096, false));
    k.push_back(
        SwitchKey("draw_across_epochs", "--draw-across-epochs",
                  "a job that has drawn its whole epoch ahead draws its next one beside its "
                  "peers (default true)",
                  &DaemonOptions::draw_across_epochs, false));
    k.push_back(IntegerKey("max_jobs", "--max-jobs", "most concurrent jobs",
                           &DaemonOptions::max_jobs, 1, 65536, true));
    k.push_back(IntegerKey("max_jobs_per_uid", "--max-jobs-per-uid",
                           "most concurrent jobs of one user (0 = half of --max-jobs; all of "
                           "it with --owner-only)",
                           &DaemonOptions::max_jobs_per_uid, 0, 65536, true,
                           "0 = max_jobs / 2, or max_jobs with owner_only"));
    k.push_back(IntegerKey("max_connections_per_uid", "--max-connections-per-uid",
                           "most open connections of one user (0 = the user's job limit + 8)",
                           &DaemonOptions::max_connections_per_uid, 0, 65536, true,
                           "0 = the user's job limit + 8"));
    k.push_back(SizeKey("max_shm_per_job", "--max-shm-per-job", "shared memory per job",
                        &DaemonOptions::max_shm_per_job, 1, true));
    k.push_back(SizeKey("max_shm_total", "--max-shm-total", "shared memory for all jobs",
                        &DaemonOptions::max_shm_total, 0, true,
                        "0 = a quarter of memory, at most 16GiB"));
    k.push_back(SizeKey("max_shm_per_uid", "--max-shm-per-uid",
                        "shared memory for one user's jobs (0 = half of --max-shm-total; all "
                        "of it with --owner-only)",
                        &DaemonOptions::max_shm_per_uid, 0, true,
                        "0 = max_shm_total / 2, or max_shm_total with owner_only"));
    k.push_back(SizeKey("max_memory_per_uid", "--max-memory-per-uid",
                        "galleyd memory one user's listings and item lists may hold (0 = the "
                        "user's shared-memory share)",
                        &DaemonOptions::max_memory_per_uid, 0, true,
                        "0 = max_shm_per_uid as resolved"));
    k.push_back(IntegerKey("max_prefetch", "--max-prefetch", "most batches a job may prefetch",
                           &DaemonOptions::max_prefetch, 1, 4096, true));
    k.push_back(IntegerKey("max_batch_size", "--max-batch-size", "largest batch a job may ask for",
                           &DaemonOptions::max_batch_size, 1, 1 << 24, true));
    k.push_back(IntegerKey("max_image_pixels", "--max-image-pixels", "largest image accepted",
                           &DaemonOptions::max_image_pixels, 1, uint64_t{1} << 40, false));
    {
      Key address = Named(
          "metrics_address", "--metrics-address",
          "serve Prometheus metrics on HOST:PORT (e.g. 0.0.0.0:9464)",
          "HOST:PORT, HOST an IPv4 address, [IPv6 address] or localhost, PORT 1..65535; or \"\" "
          "for none",
          false);
      address.set = [](const std::vector<std::string>& values, DaemonOptions* options) {
        if (values.front().empty()) {
          options->metrics_port = 0;
          return std::string();
        }
        return ParseAddress(values.front(), &options->metrics_host, &options->metrics_port);
      };
      address.render = RenderAddress;
      address.copy = [](const DaemonOptions& from, DaemonOptions* to) {
        to->metrics_host = from.metrics_host;
        to->metrics_port = from.metrics_port;
      };
      k.push_back(std::move(address));
    }
    k.push_back(IntegerKey("metrics_port", "--metrics-port",
                           "serve Prometheus metrics on 127.0.0.1:PORT (0 disables)",
                           &DaemonOptions::metrics_port, 0, 65535, false, "0 = no metrics"));
    k.push_back(TextKey("admin_group", "--admin-group",
                        "group whose members see every job and may cancel any or drain galleyd",
                        &DaemonOptions::admin_group,
                        "the name of a group on this node, or \"\" for none", GroupProblem));
    k.push_back(ChoiceKey("log_level", "--log-level", "trace|debug|info|warn|error|critical|off",
                          &DaemonOptions::log_level, LogLevels(), true));
    k.push_back(TextKey(
        "log_file", "--log-file", "append galleyd's log (its stdout and stderr) to this file",
        &DaemonOptions::log_file, "an absolute path, or \"\" for stderr", LogFileProblem));
    {
      Key owner = Named("owner_only", "--owner-only",
                        "serve only connections from the uid galleyd runs as (a personal daemon)",
                        "true or false", false);
      owner.boolean = true;
      owner.toml_types = kBoolean;
      owner.set = [](const std::vector<std::string>& values, DaemonOptions* options) {
        options->owner_only = values.front() == "true";
        return std::string();
      };
      owner.render = [](const DaemonOptions& options) {
        return std::string(options.owner_only ? "true" : "false");
      };
      owner.copy = CopyOf(&DaemonOptions::owner_only);
      k.push_back(std::move(owner));
    }
    k.push_back(NumberKey("idle_exit_seconds", "--idle-exit",
                          "exit after SECONDS with no job open (0 = never)",
                          &DaemonOptions::idle_exit_seconds, true, "0 = never"));
    return k;
  }();
  return keys;
}

const Key* FindKey(std::string_view name) {
  for (const Key& key : Keys()) {
    if (key.name == name) return &key;
  }
  return nullptr;
}

std::string TomlTypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a floating-point number";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "a list";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date or time";
  }
}

// A TOML scalar as the text a flag would carry, or nullopt when the key does
// not take its type.
std::optional<std::string> ScalarText(const toml::node& node, unsigned types) {
  if (auto text = node.value_exact<std::string>(); text && (types & kString)) return *text;
  if (const auto* integer = node.as_integer(); integer != nullptr && (types & kInteger)) {
    if ((static_cast<unsigned>(integer->flags()) &
         static_cast<unsigned>(toml::value_flags::format_as_octal)) != 0) {
      char buffer[32];
      std::snprintf(buffer, sizeof(buffer), "0%llo", static_cast<long long>(integer->get()));
      return std::string(buffer);
    }
    return std::to_string(integer->get());
  }
  if (const auto* number = node.as_floating_point(); number != nullptr && (types & kFloat)) {
    // Fixed notation: 1.5e9 reads as the size 1500000000.
    char buffer[512];
    const auto [end, ec] =
        std::to_chars(buffer, buffer + sizeof(buffer), number->get(), std::chars_format::fixed);
    return ec == std::errc() ? std::string(buffer, end) : RenderNumber(number->get());
  }
  if (const auto* boolean = node.as_boolean(); boolean != nullptr && (types & kBoolean)) {
    return std::string(boolean->get() ? "true" : "false");
  }
  return std::nullopt;
}

std::string ShownValue(const toml::node& node) {
  std::ostringstream out;
  node.visit([&out](const auto& value) { out << value; });
  std::string shown = out.str();
  std::replace(shown.begin(), shown.end(), '\n', ' ');
  if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
  return shown;
}

// Collects what went wrong while loading, each line naming its key and where
// the value came from.
class Problems {
 public:
  void Add(const std::string& key, const std::string& where, const std::string& problem,
           const std::string& expected) {
    lines_.push_back(key + " (" + where + "): " + problem +
                     (expected.empty() ? "" : "; expected " + expected));
    keys_.push_back(key);
  }
  bool About(const std::string& key) const {
    return std::find(keys_.begin(), keys_.end(), key) != keys_.end();
  }
  void AddLine(std::string line) { lines_.push_back(std::move(line)); }
  bool empty() const { return lines_.empty(); }
  std::string Text() const { return Join(lines_, "\n"); }

 private:
  std::vector<std::string> lines_;
  std::vector<std::string> keys_;
};

std::string FileWhere(const std::string& path, const toml::node& node) {
  return "config " + path + " line " + std::to_string(node.source().begin.line);
}

// Returns false when the file cannot be read or is not TOML.
// `given` keeps each key's value as text, for checks across keys.
bool ApplyFile(const std::string& path, DaemonOptions* options,
               std::map<std::string, OptionSource>* sources,
               std::map<std::string, std::string>* given, Problems* problems) {
  if (::access(path.c_str(), R_OK) != 0) {
    problems->AddLine("config " + path + ": cannot read it: " + ErrnoText(errno));
    return false;
  }
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    problems->AddLine("config " + path +
                      (begin.line > 0 ? " line " + std::to_string(begin.line) + " column " +
                                            std::to_string(begin.column)
                                      : std::string()) +
                      ": " + std::string(e.description()));
    return false;
  }
  std::vector<std::string> names;
  for (const Key& key : Keys()) names.push_back(key.name);
  // In the file's order, so errors come out as an editor shows them.
  std::vector<std::pair<std::string, const toml::node*>> entries;
  for (const auto& [name_key, node] : table) entries.emplace_back(name_key.str(), &node);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.second->source().begin.line < b.second->source().begin.line;
  });
  for (const auto& [name, node_pointer] : entries) {
    const toml::node& node = *node_pointer;
    std::string where = FileWhere(path, node);
    const Key* key = FindKey(name);
    if (key == nullptr) {
      problems->Add(name, where, "unknown key" + DidYouMean(name, names),
                    "a key galleyd knows (galleyd --check-config lists them)");
      continue;
    }
    std::vector<std::string> values;
    std::string problem;
    if (key->table) {
      const toml::table* pairs = node.as_table();
      if (pairs == nullptr) {
        problem = "got " + TomlTypeName(node);
      } else {
        for (const auto& [entry_key, value] : *pairs) {
          auto text = value.value_exact<std::string>();
          if (!text) {
            problem = "got " + TomlTypeName(value) + " for " + std::string(entry_key.str());
            where = FileWhere(path, value);
            break;
          }
          values.push_back(std::string(entry_key.str()) + "=" + *text);
        }
      }
    } else if (key->list) {
      const toml::array* list = node.as_array();
      if (list == nullptr) {
        problem = "got " + TomlTypeName(node) + " (" + ShownValue(node) + ")";
      } else {
        for (const toml::node& element : *list) {
          auto text = ScalarText(element, key->toml_types);
          if (!text) {
            problem =
                "got a list holding " + TomlTypeName(element) + " (" + ShownValue(element) + ")";
            break;
          }
          values.push_back(*text);
        }
      }
    } else {
      auto text = ScalarText(node, key->toml_types);
      if (!text) {
        problem = "got " + TomlTypeName(node) + " (" + ShownValue(node) + ")";
      } else {
        values.push_back(*text);
      }
    }
    if (problem.empty()) problem = key->set(values, options);
    if (!problem.empty()) {
      problems->Add(name, where, problem, key->expected);
      continue;
    }
    (*sources)[name] = OptionSource::kFile;
    (*given)[name] = Join(values, ",");
  }
  return true;
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    const size_t comma = text.find(',', begin);
    parts.push_back(text.substr(begin, comma - begin));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return parts;
}

uint64_t DerivedShmTotal() {
  const uint64_t physical = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                            static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return std::max<uint64_t>(uint64_t{64} << 20,
                            std::min<uint64_t>(uint64_t{16} << 30, physical / 4));
}

// A quarter of the descriptors galleyd may open, so that shards never take
// what jobs, connections and files need.
uint32_t DerivedOpenShardsTotal() {
  rlimit limit{};
  uint64_t soft = 1024;
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    soft = limit.rlim_cur;
  }
  return static_cast<uint32_t>(std::clamp<uint64_t>(soft / 4, 16, 4096));
}

std::string Where(const LoadedOptions& loaded, const std::string& key) {
  const auto it = loaded.sources.find(key);
  if (key == "metrics_port" && it->second < loaded.sources.at("metrics_address")) {
    return "metrics_address";  // which named the port last
  }
  if (it == loaded.sources.end() || it->second == OptionSource::kDefault) return "default";
  if (it->second == OptionSource::kFile) return "config " + loaded.config_path;
  return "flag " + FindKey(key)->flag;
}

// Defaults that depend on other keys or on the node, and checks that span
// several keys.
void Resolve(const std::map<std::string, std::string>& given, LoadedOptions* loaded,
             Problems* problems) {
  DaemonOptions& options = loaded->options;
  auto is_default = [loaded](const std::string& key) {
    return loaded->sources.at(key) == OptionSource::kDefault;
  };
  if (is_default("socket_mode")) options.socket_mode = options.owner_only ? 0666 : 0660;
  // A personal daemon starts when a job needs it: nothing to get ahead of.
  if (is_default("cache_prefault")) options.cache_prefault = !options.owner_only;
  if (is_default("socket_group") && !options.owner_only && GroupIdByName("galley").has_value()) {
    options.socket_group = "galley";
  }
  if (options.max_shm_total == 0) options.max_shm_total = DerivedShmTotal();
  if (options.max_open_shards_total == 0) {
    options.max_open_shards_total = DerivedOpenShardsTotal();
  }
  // A flag's metrics_port replaces the port of the file's metrics_address
  // (and the other way round); in one place the two must agree.
  if (!is_default("metrics_address") &&
      loaded->sources.at("metrics_port") == loaded->sources.at("metrics_address")) {
    const std::string& address = given.at("metrics_address");
    const std::string& port = given.at("metrics_port");
    if (address.substr(address.rfind(':') + 1) != port) {
      problems->Add("metrics_port", Where(*loaded, "metrics_port"),
                    "got " + port + ", another port than metrics_address " + Quote(address) +
                        " in the same place",
                    "only metrics_address = \"HOST:PORT\", which names the port too");
    }
  }
  if (!options.owner_only && options.allowed_roots.empty() && !problems->About("allowed_roots")) {
    problems->AddLine("allowed_roots (" + Where(*loaded, "allowed_roots") +
                      "): none set; a node-wide galleyd needs at least one: set allowed_roots = "
                      "[\"/data\", ...] in the config file or pass --allowed-root DIR "
                      "(repeatable), or run a personal daemon with --owner-only");
  }
  for (const std::string& root : options.allowed_roots) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) {
      loaded->warnings.push_back("allowed_roots: " + root +
                                 " is not a directory (yet); datasets under it are refused "
                                 "until it is");
    }
  }
#if !GALLEY_REMOTE_TIER
  if (!options.remote_cache_servers.empty()) {
    problems->AddLine("remote_cache_servers (" + Where(*loaded, "remote_cache_servers") +
                      "): this galleyd was built without the remote cache tier "
                      "(GALLEY_REMOTE_TIER=OFF, as the pip wheel's is); nodes that share a "
                      "cache run the node package (.deb or cmake --install, docs/install.md)");
  }
#else
  // The remote tier needs its credentials, and they must be private.
  if (!options.remote_cache_servers.empty() && !problems->About("remote_cache_credentials")) {
    if (options.remote_cache_credentials.empty()) {
      problems->AddLine("remote_cache_credentials (" + Where(*loaded, "remote_cache_credentials") +
                        "): none set; remote_cache_servers needs a credentials file: a TOML file "
                        "with username = \"...\" and password = \"...\" for the servers' SASL "
                        "and mac_key = \"...\" (`openssl rand -hex 32`, the same on every node) "
                        "to sign the values, mode 0600, owned by galleyd's user");
    } else if (auto read = ReadRemoteCredentials(options.remote_cache_credentials); !read.ok()) {
      problems->AddLine("remote_cache_credentials (" + Where(*loaded, "remote_cache_credentials") +
                        "): " + read.status().message());
    }
  }
#endif
  if (!options.storage_throttle_file.empty() && options.storage_throttle_bytes_per_s <= 0) {
    loaded->warnings.push_back(
        "storage_throttle_file is set but storage_throttle_bytes_per_s is 0: no throttle");
  }
  // Keys name datasets as the daemon sees them: canonical paths.
  std::map<std::string, std::string> canonical;
  for (const auto& [path, policy] : options.dataset_policies) {
    std::error_code ec;
    auto key = fs::weakly_canonical(path, ec);
    canonical[ec ? path : key.string()] = policy;
  }
  options.dataset_policies = std::move(canonical);
}

}  // namespace

Result<uint64_t> ParseSize(std::string_view text) {
  const auto invalid = [&] { return Status::InvalidArgument("'" + std::string(text) + "'"); };
  size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
    ++digits;
  }
  if (digits == 0) return invalid();
  const std::string_view number = text.substr(0, digits);
  std::string unit = Lower(text.substr(digits));
  if (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},         {"b", 1},     {"k", 0x1p10}, {"kib", 0x1p10}, {"kb", 1e3}, {"m", 0x1p20},
      {"mib", 0x1p20}, {"mb", 1e6},  {"g", 0x1p30}, {"gib", 0x1p30}, {"gb", 1e9}, {"t", 0x1p40},
      {"tib", 0x1p40}, {"tb", 1e12}, {"p", 0x1p50}, {"pib", 0x1p50}, {"pb", 1e15}};
  const auto found = std::find_if(std::begin(kUnits), std::end(kUnits),
                                  [&](const auto& entry) { return unit == entry.first; });
  if (found == std::end(kUnits)) return invalid();
  if (found->second == 1) {
    // Bytes are whole.
    auto bytes = ParseUnsigned(number);
    if (!bytes) return invalid();
    return *bytes;
  }
  auto value = ParseNumber(number);
  if (!value) return invalid();
  const double bytes = std::floor(*value * found->second);
  if (!(bytes >= 0) || bytes >= 0x1p64) return invalid();
  return static_cast<uint64_t>(bytes);
}

Result<LoadedOptions> LoadDaemonOptions(int argc, const char* const* argv) {
  LoadedOptions loaded;
  DaemonOptions& options = loaded.options;
  options.socket_path = DefaultSocketPath();
  for (const Key& key : Keys()) loaded.sources[key.name] = OptionSource::kDefault;

  // Flags are read as text first, so they reach the same parsers as the
  // file's values, and applied after the file, which they override.
  CLI::App app{"galleyd: prepares training batches once and serves them to every job on the node"};
  app.allow_extras();
  app.set_version_flag("--version", std::string("galleyd ") + kVersion + " (protocol " +
                                        std::to_string(kProtocolVersion) + ")");
  app.add_option("--config", loaded.config_path, "TOML config file (flags override it)");
  app.add_flag("--check-config", loaded.check_config,
               "print the effective configuration (each key, its value and where it came from) "
               "and exit 0, or print every error and exit 2");
  app.add_flag("--detach", options.detach,
               "run in the background; return once the socket is served");
  struct FlagValues {
    const Key* key;
    CLI::Option* option;
    std::vector<std::string> values;
    std::string text;
    bool given = false;
  };
  std::vector<FlagValues> flags;
  flags.reserve(Keys().size());
  for (const Key& key : Keys()) {
    FlagValues& flag = flags.emplace_back(FlagValues{&key, nullptr, {}, {}});
    if (key.boolean) {
      flag.option = app.add_flag(key.flag, flag.given, key.help);
    } else if (key.list || key.table) {
      flag.option = app.add_option(key.flag, flag.values, key.help);
    } else {
      flag.option = app.add_option(key.flag, flag.text, key.help);
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    app.exit(e);
    loaded.exit_now = true;
    return loaded;
  } catch (const CLI::ParseError& e) {
    return Status::InvalidArgument(e.what());
  }

  Problems problems;
  std::vector<std::string> flag_names = {"--config", "--check-config", "--detach", "--help",
                                         "--version"};
  for (const Key& key : Keys()) flag_names.push_back(key.flag);
  bool after_unknown_flag = false;
  for (const std::string& extra : app.remaining()) {
    if (extra.rfind('-', 0) == 0) {
      const std::string name = extra.substr(0, extra.find('='));
      problems.AddLine(name + ": unknown flag" + DidYouMean(name, flag_names) +
                       "; galleyd --help lists them");
      after_unknown_flag = extra.find('=') == std::string::npos;
    } else if (after_unknown_flag) {
      after_unknown_flag = false;  // the unknown flag's value
    } else {
      problems.AddLine("'" + extra + "': unexpected argument; galleyd takes only flags");
    }
  }

  std::map<std::string, std::string> given;
  const bool file_read =
      loaded.config_path.empty() ||
      ApplyFile(loaded.config_path, &options, &loaded.sources, &given, &problems);
  for (FlagValues& flag : flags) {
    if (flag.option->count() == 0) continue;
    const Key& key = *flag.key;
    std::vector<std::string> values = flag.values;
    if (key.boolean) values = {"true"};
    if (!key.boolean && !key.list && !key.table) values = {flag.text};
    if (key.comma_list) values = SplitCommas(Join(flag.values, ","));
    const std::string problem = key.set(values, &options);
    if (!problem.empty()) {
      problems.Add(key.name, "flag " + key.flag, problem, key.expected);
      continue;
    }
    loaded.sources[key.name] = OptionSource::kFlag;
    given[key.name] = Join(values, ",");
  }
  // Checks across keys would only mislead when the file was not read.
  if (file_read) Resolve(given, &loaded, &problems);
  if (!problems.empty()) return Status::InvalidArgument(problems.Text());
  return loaded;
}

Result<LoadedOptions> LoadDaemonOptions(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  argv.push_back(nullptr);
  return LoadDaemonOptions(static_cast<int>(args.size()), argv.data());
}

std::vector<std::string> ConfigErrors(const Status& status) {
  const std::string& text = status.message();
  std::vector<std::string> lines;
  for (size_t begin = 0; begin <= text.size();) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

std::string RenderEffectiveConfig(const LoadedOptions& loaded) {
  std::vector<std::pair<std::string, std::string>> lines;
  size_t width = 0;
  for (const Key& key : Keys()) {
    std::string line = key.name + " = " + key.render(loaded.options);
    width = std::max(width, line.size());
    std::string note = Where(loaded, key.name);
    if (key.reloadable) note += "; SIGHUP reloads";
    lines.emplace_back(std::move(line), std::move(note));
  }
  std::string out = std::string("# galleyd ") + kVersion + " effective configuration" +
                    (loaded.config_path.empty() ? "" : " (config " + loaded.config_path + ")") +
                    "\n# key = value  # where it came from: default, config FILE or flag\n";
  for (const auto& [line, note] : lines) {
    out += line + std::string(width + 2 - line.size(), ' ') + "# " + note + "\n";
  }
  return out;
}

std::vector<OptionChange> DiffOptions(const DaemonOptions& running, const DaemonOptions& updated) {
  std::vector<OptionChange> changes;
  for (const Key& key : Keys()) {
    std::string before = key.render(running), after = key.render(updated);
    if (before != after) {
      changes.push_back({key.name, std::move(before), std::move(after), key.reloadable});
    }
  }
  return changes;
}

DaemonOptions WithReloadableKeys(const DaemonOptions& running, const DaemonOptions& updated) {
  DaemonOptions merged = running;
  for (const Key& key : Keys()) {
    if (key.reloadable) key.copy(updated, &merged);
  }
  return merged;
}

}  // namespace galley
