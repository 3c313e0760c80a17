// A prefix read as an ImageFolder through the S3 client from a real
// `rclone serve s3` (tests/unit/rclone_s3_server.h): a listing of more keys
// than one page holds is asked page by page (continuation tokens), labels
// and names are those of the same tree on disk, a prefetched wave reads each
// object once, and credentials rclone refuses get nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "galley/dataset/dataset.h"
#include "galley/objectstore/s3_client.h"
#include "tests/unit/rclone_s3_server.h"

namespace galley {
namespace {

namespace fs = std::filesystem;
using testing::RcloneS3Server;

TEST(ObjectFolderRcloneTest, ListsEveryPageAndReadsEachObjectOnceAsTheSameTreeOnDisk) {
  RcloneS3Server server;
  // 1,100 images in 11 classes: more than the 1,000 keys of one page.
  constexpr int kClasses = 11, kPerClass = 100;
  for (int c = 0; c < kClasses; ++c) {
    for (int i = 0; i < kPerClass; ++i) {
      const std::string key =
          "folder/class" + std::to_string(c) + "/img" + std::to_string(i) + ".jpg";
      server.Put("data", key, testing::PseudoRandomBytes(100 + i, c * 1000 + i));
    }
  }
  server.Put("data", "folder/README.txt", "beside the class folders");
  const Status started = server.Start();
  ASSERT_TRUE(started.ok()) << started.ToString();
  auto opened = server.OpenClient();
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::shared_ptr<objectstore::ObjectStore> store = *opened;

  ShardOptions options;
  options.object_requests_in_flight = 16;
  auto objects =
      Dataset::OpenObjectFolder("s3://data/folder/", store, server.access(), options, {});
  ASSERT_TRUE(objects.ok()) << objects.status().ToString() << "\n" << server.Log();
  EXPECT_EQ(store->counters().lists.load(), 2u);  // two pages
  EXPECT_EQ(store->counters().gets.load(), 0u);
  auto local = Dataset::Open(server.root() / "data" / "data" / "folder", {});
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  const Dataset& o = **objects;
  ASSERT_EQ(o.size(), static_cast<size_t>(kClasses * kPerClass));
  ASSERT_EQ(o.size(), (*local)->size());
  EXPECT_EQ(o.classes(), (*local)->classes());
  std::vector<ItemId> wave;
  for (ItemId id = 0; id < o.size(); ++id) {
    EXPECT_EQ(o.name(id), (*local)->name(id));
    EXPECT_EQ(o.label(id), (*local)->label(id));
    if (id % 3 == 0) wave.push_back(id);
  }
  o.Prefetch(wave);
  uint64_t bytes = 0;
  for (ItemId id : wave) {
    auto read = o.Read(id);
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    EXPECT_EQ(*read, *(*local)->Read(id)) << o.name(id);
    bytes += read->size();
  }
  EXPECT_EQ(store->counters().gets.load(), wave.size());  // each object once
  EXPECT_GE(store->counters().bytes.load(), bytes);
  EXPECT_EQ(store->counters().in_flight.load(), 0u);

  objectstore::Access wrong = server.access();
  wrong.credentials.secret_access_key = "not-the-secret";
  const uint64_t gets = store->counters().gets.load();
  auto refused = Dataset::OpenObjectFolder("s3://data/folder/", store, wrong, options, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("s3://data/folder/"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused.status().message().find("not-the-secret"), std::string::npos);
  EXPECT_EQ(store->counters().gets.load(), gets);
}

}  // namespace
}  // namespace galley
