// Tar shards kept as objects, read through the S3 client from a real
// `rclone serve s3` (tests/unit/rclone_s3_server.h): each shard listed by one
// streaming GET, members read by ranged GETs, a prefetched wave served from
// GETs in flight together, the same bytes as the shards on disk.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "galley/dataset/shard_source.h"
#include "galley/objectstore/s3_client.h"
#include "tests/unit/rclone_s3_server.h"
#include "tests/unit/tar_writer.h"

namespace galley {
namespace {

using testing::RcloneS3Server;

TEST(ObjectShardsRcloneTest, ListsByStreamingAndReadsPrefetchedWavesThroughTheS3Client) {
  RcloneS3Server server;
  std::vector<std::string> urls;
  std::vector<std::vector<uint8_t>> shards;
  for (int s = 0; s < 4; ++s) {
    testing::TarWriter tar;
    for (int i = 0; i < 50; ++i) {
      const std::string key = "s" + std::to_string(s) + "_" + std::to_string(i);
      tar.Add(key + ".jpg", testing::PseudoRandomBytes(3000 + 97 * i, s * 100 + i));
      tar.Add(key + ".cls", std::to_string(i % 9));
    }
    shards.push_back(tar.Finish());
    const std::string key = "set/shard-" + std::to_string(s) + ".tar";
    server.Put("data", key, std::string(shards.back().begin(), shards.back().end()));
    urls.push_back("s3://data/" + key);
  }
  const Status started = server.Start();
  ASSERT_TRUE(started.ok()) << started.ToString();
  auto opened = server.OpenClient();
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::shared_ptr<objectstore::ObjectStore> store = *opened;

  ShardOptions options;
  options.object_requests_in_flight = 8;
  auto source = ShardSource::OpenObjects(urls, store, server.access(), options);
  ASSERT_TRUE(source.ok()) << source.status().ToString() << "\n" << server.Log();
  ASSERT_EQ((*source)->size(), 200u);
  EXPECT_EQ(store->counters().gets.load(), 4u);  // one streaming pass per shard
  for (ItemId id = 0; id < 200; ++id) EXPECT_EQ((*source)->label(id), (id % 50) % 9);

  // A wave of every other item: prefetched, then each read gets its bytes.
  std::vector<ItemId> wave;
  for (ItemId id = 0; id < 200; id += 2) wave.push_back(id);
  (*source)->Prefetch(wave);
  for (ItemId id : wave) {
    auto bytes = (*source)->Read(id);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    const int s = static_cast<int>(id / 50), i = static_cast<int>(id % 50);
    const std::string expected = testing::PseudoRandomBytes(3000 + 97 * i, s * 100 + i);
    ASSERT_EQ(std::string(bytes->begin(), bytes->end()), expected) << id;
  }
  // One GET per prefetched range, none on demand; nothing left on the wire.
  EXPECT_LE(store->counters().gets.load(), 4u + wave.size());
  EXPECT_EQ(store->counters().in_flight.load(), 0u);

  // Credentials rclone refuses: PermissionDenied naming the shard.
  objectstore::Access wrong = server.access();
  wrong.credentials.secret_access_key = "not-the-secret";
  auto refused = ShardSource::OpenObjects(urls, store, wrong, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("s3://data/set/shard-"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused.status().message().find("not-the-secret"), std::string::npos);
}

}  // namespace
}  // namespace galley
