// libFuzzer entry point for the tar indexer: any byte string, read as a tar
// file, must list without crashing, and every member it returns must lie
// inside the file. Read as a wds2idx index it must parse or be refused
// without crashing; and a listing made through a PlannedTarReader, with an
// index that names the members (one entry moved by the input's first byte),
// must equal the plain one, and so must a listing made from one pass over
// the bytes in chunks (TarStreamLister), the payloads it keeps being the
// members' bytes. Every member, checked as a field
// (sample_fields.h), must be accepted or refused without crashing. Built by
// scripts/fuzz_tar_index.sh (clang, libFuzzer, ASan/UBSan); tests/unit/tar_index_test.cc runs it
// over mutated archives.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "galley/dataset/sample_fields.h"
#include "galley/dataset/tar_index.h"

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
  // Every member, served as a field, is checked by its name's rules
  // without crashing, whatever it holds.
  for (const galley::TarMember& m : listing->members) {
    const std::span<const uint8_t> payload(data + m.offset, m.size);
    for (const char* name : {"json", "cls", "txt"}) (void)galley::CheckFieldValue(name, payload);
  }

  (void)galley::ParseWdsIndex(std::string_view(reinterpret_cast<const char*>(data), size));
  galley::WdsIndex index;
  index.named = true;
  for (const galley::TarMember& m : listing->members) {
    index.entries.push_back({"jpg", m.offset, m.size, m.name});
  }
  if (size > 0 && !index.entries.empty()) {
    index.entries[data[0] % index.entries.size()].offset += 512 * (data[size - 1] % 3);
  }
  const galley::TarReader raw = [&](uint64_t offset, std::span<uint8_t> out) -> galley::Status {
    if (offset > size || out.size() > size - offset) {
      return galley::Status::DataLoss("read past the end");
    }
    std::memcpy(out.data(), data + offset, out.size());
    return galley::Status::Ok();
  };
  galley::PlannedTarReader planned(size, raw, index,
                                   [](const galley::WdsIndexEntry& e) { return e.size < 1000; });
  const auto again = galley::ListTar(
      size, [&](uint64_t offset, std::span<uint8_t> out) { return planned.Read(offset, out); });
  if (!again.ok() || again->members.size() != listing->members.size() ||
      again->damage != listing->damage ||
      again->skipped_non_regular != listing->skipped_non_regular) {
    std::abort();
  }
  for (size_t i = 0; i < listing->members.size(); ++i) {
    const galley::TarMember& a = listing->members[i];
    const galley::TarMember& b = again->members[i];
    if (a.name != b.name || a.offset != b.offset || a.size != b.size) std::abort();
    if (auto payload = planned.TakePayload(a.offset, a.size);
        payload && std::memcmp(payload->data(), data + a.offset, a.size) != 0) {
      std::abort();
    }
  }

  // The same bytes streamed in chunks of a size the input picks.
  const size_t chunk = size > 0 ? 1 + (data[size / 2] % 8) * 131 : 1;
  galley::TarStreamLister lister(
      size, [](const galley::TarMember& m) { return m.size < 2000 && m.name.size() % 2 == 0; });
  for (size_t at = 0; at < size && !lister.done(); at += chunk) {
    if (!lister.Feed(std::span<const uint8_t>(data + at, std::min(chunk, size - at))).ok()) {
      std::abort();  // ListTar accepted these bytes
    }
  }
  std::vector<std::string> payloads;
  const auto streamed = std::move(lister).Finish(&payloads);
  if (!streamed.ok() || streamed->members.size() != listing->members.size() ||
      streamed->damage != listing->damage ||
      streamed->skipped_non_regular != listing->skipped_non_regular ||
      payloads.size() != listing->members.size()) {
    std::abort();
  }
  for (size_t i = 0; i < listing->members.size(); ++i) {
    const galley::TarMember& a = listing->members[i];
    const galley::TarMember& b = streamed->members[i];
    if (a.name != b.name || a.offset != b.offset || a.size != b.size) std::abort();
    const bool kept = a.size < 2000 && a.name.size() % 2 == 0;
    if (kept && (payloads[i].size() != a.size ||
                 std::memcmp(payloads[i].data(), data + a.offset, a.size) != 0)) {
      std::abort();
    }
    if (!kept && !payloads[i].empty()) std::abort();
  }
  return 0;
}
