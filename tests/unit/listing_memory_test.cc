// The memory a listing keeps per item, on an ImageNet-shaped tree of 100,000
// hard links (100 class folders of 1,000): measured as the heap the open
// dataset holds, against what docs/scaling.md states.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "galley/dataset/dataset.h"
#include "tests/unit/heap_bytes.h"

namespace galley {
namespace {

namespace fs = std::filesystem;

constexpr size_t kClasses = 100;
constexpr size_t kPerClass = 1000;
constexpr size_t kItems = kClasses * kPerClass;

// What docs/scaling.md states an ImageFolder listing keeps: its relative
// path's bytes plus 16 bytes (an offset into the path pool and the label)
// per item, two strings per class folder (its name and the walked folder)
// and the dataset's own fixed part.
constexpr size_t kBytesPerItemBesidesPath = 16;
constexpr size_t kBytesPerFolder = 256;
constexpr size_t kFixedBytes = 16 << 10;

class ListingMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "galley_listing_memory_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = fs::canonical(pattern);
    root_ = dir_ / "train";
    char name[64];
    for (size_t c = 0; c < kClasses; ++c) {
      // A file system caps the links to one file (ext4: 65,000): one file
      // per class.
      const fs::path image = dir_ / ("image" + std::to_string(c) + ".JPEG");
      std::ofstream(image, std::ios::binary) << "not decoded here";
      std::snprintf(name, sizeof(name), "n%08zu", c);
      const fs::path folder = root_ / name;
      fs::create_directories(folder);
      for (size_t k = 0; k < kPerClass; ++k) {
        std::snprintf(name, sizeof(name), "n%08zu_%zu.JPEG", c, k);
        ASSERT_EQ(::link(image.c_str(), (folder / name).c_str()), 0) << folder / name;
      }
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_, root_;
};

TEST_F(ListingMemoryTest, HundredThousandHardLinksKeepTheStatedBytesPerItem) {
  if (!HeapBytesMeasurable()) GTEST_SKIP() << "no heap count in this build";
  const uint64_t before = HeapBytesInUse();
  auto dataset = Dataset::Open(root_, {dir_});
  ASSERT_TRUE(dataset.ok()) << dataset.status().ToString();
  const uint64_t after = HeapBytesInUse();
  ASSERT_EQ((*dataset)->size(), kItems);

  uint64_t path_bytes = 0;
  for (ItemId id = 0; id < (*dataset)->size(); ++id) path_bytes += (*dataset)->name(id).size();
  const uint64_t held = after - before;
  const uint64_t stated = path_bytes + kItems * kBytesPerItemBesidesPath +
                          (kClasses + 1) * kBytesPerFolder + kFixedBytes;
  RecordProperty("bytes_per_item", std::to_string(held / kItems));
  EXPECT_LE(held, stated) << held / kItems << " bytes per item against " << stated / kItems
                          << " stated";
  // Each ImageNet-style name ("n00000042/n00000042_917.JPEG") takes 27-29 bytes.
  EXPECT_LE(held / kItems, 48u);
}

}  // namespace
}  // namespace galley
