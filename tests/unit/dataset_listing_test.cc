// The "listing" request's pages (server/daemon/dataset_listing.h): every item
// once, in id order, across pages bounded by their size; the first page's
// classes; how an ImageFolder's and a manifest's names are spelled.
#include "galley/daemon/dataset_listing.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace galley {
namespace {

namespace fs = std::filesystem;

class DatasetListingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "galley_listing_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = fs::canonical(pattern) / "data";
    for (int c = 0; c < 3; ++c) {
      fs::create_directories(root_ / ("class_" + std::to_string(c)));
      for (int i = 0; i < 25; ++i) {
        std::ofstream(root_ / ("class_" + std::to_string(c)) / (std::to_string(100 + i) + ".jpg"))
            << i;
      }
    }
  }
  void TearDown() override { fs::remove_all(root_.parent_path()); }

  fs::path root_;
};

TEST_F(DatasetListingTest, PagesHoldEveryItemOnceInIdOrder) {
  auto dataset = Dataset::Open(root_, {});
  ASSERT_TRUE(dataset.ok()) << dataset.status().ToString();
  // Each name ("class_0/100.jpg") costs 18 bytes and its label 21: pages of
  // about 1 KiB hold 26 items, less the first page's classes.
  std::vector<std::string> names;
  std::vector<int64_t> labels;
  size_t pages = 0;
  std::string content_key;
  for (uint64_t begin = 0;;) {
    const nlohmann::json page = ListingPage(**dataset, begin, UINT64_MAX, 1024);
    EXPECT_EQ(page["begin"], begin);
    EXPECT_EQ(page["dataset_size"], 75u);
    EXPECT_EQ(page["kind"], "folder");
    EXPECT_EQ(page["classes"].size(), begin == 0 ? 3u : 0u);
    if (begin == 0) content_key = page["content_key"];
    EXPECT_EQ(page["content_key"], content_key);
    EXPECT_EQ(page["content_key"].get<std::string>().size(), 32u);
    if (page["names"].empty()) break;
    EXPECT_LE(page.dump().size(), 1024u + 512u);  // the page, and its fixed fields
    ASSERT_EQ(page["names"].size(), page["labels"].size());
    for (const auto& name : page["names"]) names.push_back(name);
    for (const auto& label : page["labels"]) labels.push_back(label);
    begin += page["names"].size();
    ++pages;
  }
  EXPECT_EQ(pages, 3u);
  ASSERT_EQ(names.size(), 75u);
  for (ItemId id = 0; id < 75; ++id) {
    EXPECT_EQ(names[id], (*dataset)->path(id).lexically_relative(root_).string());
    EXPECT_EQ(labels[id], (*dataset)->label(id));
  }
  // One page holds everything when it may.
  EXPECT_EQ(ListingPage(**dataset, 0)["names"].size(), 75u);
  EXPECT_EQ(ListingPage(**dataset, 1000)["names"].size(), 0u);
  // A count bounds the page; 0 asks for the figures alone.
  EXPECT_EQ(ListingPage(**dataset, 70, 3)["names"],
            nlohmann::json({"class_2/120.jpg", "class_2/121.jpg", "class_2/122.jpg"}));
  const nlohmann::json figures = ListingPage(**dataset, 0, 0);
  EXPECT_EQ(figures["names"].size(), 0u);
  EXPECT_EQ(figures["classes"].size(), 3u);
  EXPECT_EQ(figures["dataset_size"], 75u);
}

TEST_F(DatasetListingTest, AManifestNamesItsFilesRelativeToItsFolder) {
  std::ofstream(root_.parent_path() / "list.txt") << "data/class_2/101.jpg\tdog\n"
                                                  << "data/class_0/100.jpg\tcat\n";
  auto dataset = Dataset::Open(root_.parent_path() / "list.txt", {});
  ASSERT_TRUE(dataset.ok()) << dataset.status().ToString();
  const nlohmann::json page = ListingPage(**dataset, 0);
  EXPECT_EQ(page["kind"], "manifest");
  EXPECT_EQ(page["names"], nlohmann::json({"data/class_2/101.jpg", "data/class_0/100.jpg"}));
  EXPECT_EQ(page["classes"], nlohmann::json({"cat", "dog"}));
  EXPECT_EQ(page["labels"], nlohmann::json({1, 0}));
}

}  // namespace
}  // namespace galley
