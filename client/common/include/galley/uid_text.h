// UidText: a uid as messages show it, with the user's name where the node
// has one, so that a refusal says whom it means. Safe from any thread
// (getpwuid_r, not getpwuid).
#ifndef GALLEY_UID_TEXT_H_
#define GALLEY_UID_TEXT_H_

#include <pwd.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace galley {

// "uid 65534 (nobody)", or "uid 4242" where no user has that uid.
inline std::string UidText(uid_t uid) {
  std::string text = "uid " + std::to_string(uid);
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> names(16 * 1024);
  if (::getpwuid_r(uid, &entry, names.data(), names.size(), &found) == 0 && found != nullptr) {
    text += " (" + std::string(found->pw_name) + ")";
  }
  return text;
}

}  // namespace galley

#endif  // GALLEY_UID_TEXT_H_
