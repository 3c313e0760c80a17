// What the object-store dataset tests share: a scratch folder removed with
// its contents, and the Access a job with a given key id sends for the
// in-memory store's endpoint.
#ifndef GALLEY_TESTS_UNIT_OBJECTSTORE_OBJECT_TEST_SUPPORT_H_
#define GALLEY_TESTS_UNIT_OBJECTSTORE_OBJECT_TEST_SUPPORT_H_

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "galley/objectstore/object_store.h"

namespace galley::testing {

// A new folder under /tmp named `name`-XXXXXX, removed by the destructor.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name) {
    std::string pattern = "/tmp/" + name + "-XXXXXX";
    path_ = ::mkdtemp(pattern.data());
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Path-style access to the in-memory store's endpoint with key `key_id`.
inline objectstore::Access AccessFor(const std::string& key_id) {
  objectstore::Access access;
  access.endpoint.url = "http://127.0.0.1:9000";
  access.endpoint.path_style = true;
  access.credentials = {key_id, "secret-of-" + key_id, ""};
  return access;
}

}  // namespace galley::testing

#endif  // GALLEY_TESTS_UNIT_OBJECTSTORE_OBJECT_TEST_SUPPORT_H_
