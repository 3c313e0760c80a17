// libFuzzer entry point for the tar indexer: any byte string, read as a tar
// file, must list without crashing, and every member it returns must lie
// inside the file. Built by scripts/fuzz_tar_index.sh (clang, libFuzzer,
// ASan/UBSan); tests/unit/tar_index_test.cc runs it over mutated archives.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "server/dataset/tar_index.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto listing =
      galley::ListTar(size, [&](uint64_t offset, std::span<uint8_t> out) -> galley::Status {
        if (offset > size || out.size() > size - offset) {
          return galley::Status::DataLoss("read past the end");
        }
        std::memcpy(out.data(), data + offset, out.size());
        return galley::Status::Ok();
      });
  if (!listing.ok()) return 0;
  for (const galley::TarMember& m : listing->members) {
    if (m.offset > size || m.size > size - m.offset || m.header_offset + 512 > m.offset) {
      std::abort();
    }
  }
  if (listing->damaged_bytes > size) std::abort();
  return 0;
}
