// TarWriter: ustar archives built in memory, member by member, for tests of
// what reads tar shards.
#ifndef GALLEY_TESTS_UNIT_TAR_WRITER_H_
#define GALLEY_TESTS_UNIT_TAR_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace galley::testing {

class TarWriter {
 public:
  // A regular member `name` (at most 100 bytes) holding `payload`.
  TarWriter& Add(const std::string& name, const std::string& payload) {
    std::string header(512, '\0');
    header.replace(0, name.size(), name);
    std::snprintf(&header[100], 8, "%07o", 0644);
    std::snprintf(&header[124], 12, "%011llo", static_cast<unsigned long long>(payload.size()));
    header[156] = '0';
    header.replace(257, 8,
                   std::string("ustar\0"
                               "00",
                               8));
    header.replace(148, 8, std::string(8, ' '));
    unsigned sum = 0;
    for (char c : header) sum += static_cast<unsigned char>(c);
    std::snprintf(&header[148], 8, "%06o", sum);
    bytes_ += header + payload;
    bytes_.resize((bytes_.size() + 511) / 512 * 512, '\0');
    return *this;
  }
  // The archive, with its two end-of-archive blocks.
  std::vector<uint8_t> Finish() const {
    std::string archive = bytes_ + std::string(1024, '\0');
    return std::vector<uint8_t>(archive.begin(), archive.end());
  }

 private:
  std::string bytes_;
};

}  // namespace galley::testing

#endif  // GALLEY_TESTS_UNIT_TAR_WRITER_H_
