#include "galley/remote/remote_credentials.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "galley/errno_text.h"
#include "galley/unique_fd.h"

namespace galley {
namespace {

constexpr size_t kMaxFileBytes = 64 * 1024;

Status Refused(const std::string& path, const std::string& why) {
  return Status::InvalidArgument("credentials file " + path + ": " + why);
}

constexpr const char* kMakeKey =
    "make one with `openssl rand -hex 32`, the same on every node that shares the servers";

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The bytes `hex` spells; an error naming what is wrong with it.
Result<std::string> MacKeyBytes(const std::string& path, const std::string& hex) {
  std::string bytes;
  bytes.reserve(hex.size() / 2);
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    const int high = HexDigit(hex[i]), low = HexDigit(hex[i + 1]);
    if (high < 0 || low < 0) break;
    bytes.push_back(static_cast<char>(high * 16 + low));
  }
  if (bytes.size() * 2 != hex.size()) {
    return Refused(path, std::string("mac_key must be hex digits, two per byte; ") + kMakeKey);
  }
  if (bytes.size() < kMinMacKeyBytes) {
    return Refused(path, "mac_key has " + std::to_string(bytes.size()) + " bytes, fewer than the " +
                             std::to_string(kMinMacKeyBytes) + " needed; " + kMakeKey);
  }
  return bytes;
}

}  // namespace

Result<RemoteCredentials> ReadRemoteCredentials(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) {
    const int error = errno;
    if (error == ELOOP) return Refused(path, "is a symlink; name the file itself");
    return Refused(path, "cannot open it: " + ErrnoText(error));
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) return Refused(path, "cannot stat it: " + ErrnoText(errno));
  if (!S_ISREG(info.st_mode)) return Refused(path, "is not a regular file");
  if (info.st_uid != ::geteuid()) {
    return Refused(path, "is owned by uid " + std::to_string(info.st_uid) +
                             ", not by galleyd's user (uid " + std::to_string(::geteuid()) +
                             "); chown it to galleyd's user");
  }
  if ((info.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(info.st_mode & 07777));
    return Refused(path, std::string("has mode ") + mode +
                             ": group or others may access it; it holds a secret, so only "
                             "galleyd's user may read it (chmod 600 " +
                             path + ")");
  }
  if (static_cast<uint64_t>(info.st_size) > kMaxFileBytes) return Refused(path, "is too large");
  std::string text(static_cast<size_t>(info.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Refused(path, "cannot read it");
    done += static_cast<size_t>(n);
  }
  toml::table table;
  try {
    table = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    return Refused(path, "line " + std::to_string(e.source().begin.line) + ": " +
                             std::string(e.description()));
  }
  RemoteCredentials credentials;
  std::string mac_key_hex;
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    const auto value = node.value_exact<std::string>();
    std::string* field = name == "username"   ? &credentials.username
                         : name == "password" ? &credentials.password
                         : name == "mac_key"  ? &mac_key_hex
                                              : nullptr;
    if (field == nullptr) {
      return Refused(path, "unknown key '" + name + "' (only username, password and mac_key)");
    }
    if (!value || value->empty()) return Refused(path, name + " must be a non-empty string");
    *field = *value;
  }
  if (credentials.username.empty() || credentials.password.empty()) {
    return Refused(path, "needs both username = \"...\" and password = \"...\"");
  }
  if (mac_key_hex.empty()) {
    return Refused(path,
                   "needs mac_key = \"...\", the key that signs the values galleyd stores in the "
                   "remote tier (at least " +
                       std::to_string(kMinMacKeyBytes * 2) + " hex digits); " + kMakeKey);
  }
  GALLEY_ASSIGN_OR_RETURN(credentials.mac_key, MacKeyBytes(path, mac_key_hex));
  return credentials;
}

}  // namespace galley
