// What a hostile manifest can make a listing hold and do: a header with
// very many columns is refused (or, under a raised limit, checked in one
// pass), a line longer than the limit is refused before it is all read, a
// JSON line with too many keys before it is parsed; and a listing stops,
// Cancelled, when galleyd stops or its client leaves.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "galley/dataset/dataset.h"
#include "galley/dataset/listing_stop.h"

namespace galley {
namespace {

namespace fs = std::filesystem;

class HostileManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "galley_manifest_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = fs::canonical(pattern);
    std::ofstream(dir_ / "a.jpg") << "data";
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path Write(const std::string& name, const std::string& content) {
    std::ofstream(dir_ / name, std::ios::binary) << content;
    return dir_ / name;
  }

  Result<std::shared_ptr<const Dataset>> Open(const fs::path& manifest,
                                              const ManifestOptions& options = {}) {
    return Dataset::Open(manifest, {dir_}, options);
  }

  // A header of `columns` distinct names, the image column first, then one
  // row naming a.jpg.
  static std::string Table(size_t columns, char separator) {
    std::string header = "image", row = "a.jpg";
    for (size_t i = 1; i < columns; ++i) {
      header += separator + ("c" + std::to_string(i));
      row += separator + std::to_string(i % 10);
    }
    return header + "\n" + row + "\n";
  }

  fs::path dir_;
};

TEST_F(HostileManifestTest, AHeaderWithMoreColumnsThanTheLimitIsRefusedNamingIt) {
  const fs::path csv = Write("wide.csv", Table(100000, ','));
  auto opened = Open(csv);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(opened.status().message().find(csv.string() + ":1: "), std::string::npos)
      << opened.status().message();
  EXPECT_NE(opened.status().message().find("more than 1024 columns (galleyd's "
                                           "max_manifest_columns)"),
            std::string::npos)
      << opened.status().message();

  ManifestOptions tsv;
  tsv.header_row = true;
  opened = Open(Write("wide.tsv", Table(5000, '\t')), tsv);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("max_manifest_columns"), std::string::npos);

  std::string keys = "{\"image\": \"a.jpg\"";
  for (int i = 1; i < 20000; ++i) keys += ", \"k" + std::to_string(i) + "\": 1";
  opened = Open(Write("wide.jsonl", keys + "}\n"));
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("more than 1024 keys (galleyd's max_manifest_columns)"),
            std::string::npos)
      << opened.status().message();

  // At the limit, the table is read.
  ASSERT_TRUE(Open(Write("limit.csv", Table(1024, ','))).ok());
}

// Under a limit raised to 200,000, a 100,000-column header is listed, and a
// name repeated at its end is still found: the names are compared in one
// pass (a pairwise comparison would compare 5 billion pairs).
TEST_F(HostileManifestTest, UnderARaisedLimitAHundredThousandColumnsAreCheckedInOnePass) {
  ManifestOptions options;
  options.max_columns = 200000;
  options.max_line_bytes = uint64_t{16} << 20;
  auto opened = Open(Write("wide.csv", Table(100000, ',')), options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ((*opened)->field_names().size(), 99999u);

  std::string repeated = Table(100000, ',');
  repeated.insert(repeated.find('\n'), ",c5");
  repeated.insert(repeated.rfind('\n'), ",7");
  opened = Open(Write("repeated.csv", repeated), options);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("names column 'c5' twice"), std::string::npos)
      << opened.status().message();
}

TEST_F(HostileManifestTest, ALineLongerThanTheLimitIsRefusedNamingItsNumberAndTheLimit) {
  ManifestOptions options;
  options.max_line_bytes = 4096;
  // A headerless manifest, a table and a JSON lines file, each with its
  // third line too long.
  const std::string long_cell(8192, 'x');
  const std::vector<std::pair<std::string, std::string>> files = {
      {"list.txt", "a.jpg\t1\na.jpg\t2\na.jpg\t" + long_cell + "\n"},
      {"table.csv", "image,caption\na.jpg,one\na.jpg," + long_cell + "\n"},
      {"lines.jsonl",
       "{\"image\": \"a.jpg\"}\n{\"image\": \"a.jpg\"}\n{\"image\": \"" + long_cell + "\"}\n"},
  };
  for (const auto& [name, content] : files) {
    const fs::path manifest = Write(name, content);
    auto opened = Open(manifest, options);
    ASSERT_FALSE(opened.ok()) << name;
    EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(opened.status().message().find(manifest.string() +
                                             ":3: the line is longer than 4096 bytes (galleyd's "
                                             "max_manifest_line_bytes)"),
              std::string::npos)
        << opened.status().message();
  }
  // A line of exactly the limit (CRLF endings and a last line without a
  // newline included) is read.
  const std::string cell(4096 - std::string("a.jpg,").size(), 'y');
  auto opened = Open(Write("edge.csv", "image,caption\r\na.jpg," + cell + "\r\na.jpg,z"), options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ((*opened)->size(), 2u);
}

TEST_F(HostileManifestTest, TheLimitBoundsACsvRecordSpanningLines) {
  ManifestOptions options;
  options.max_line_bytes = 4096;
  // Lines each well within the limit, in one quoted cell that takes more.
  std::string cell;
  for (int i = 0; i < 100; ++i) cell += std::string(60, 'x') + "\n";
  const fs::path long_record =
      Write("spanning.csv", "image,caption\na.jpg,one\na.jpg,\"" + cell + "\"\na.jpg,two\n");
  auto opened = Open(long_record, options);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find(
                long_record.string() +
                ":3: the record starting on this line, a quoted cell spanning lines, is longer "
                "than 4096 bytes (galleyd's max_manifest_line_bytes)"),
            std::string::npos)
      << opened.status().message();
  // A quote left open early in a long file ends the listing at the limit,
  // naming its line, rather than taking the rest of the file as one cell.
  std::string rest;
  for (int i = 0; i < 10000; ++i) rest += "a.jpg,caption " + std::to_string(i) + "\n";
  const fs::path stray = Write("stray.csv", "image,caption\na.jpg,\"never closed\n" + rest);
  opened = Open(stray, options);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find(stray.string() + ":2: the record starting on this line"),
            std::string::npos)
      << opened.status().message();
  // Within the limit, the same cell is read.
  options.max_line_bytes = 8192;
  opened = Open(long_record, options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ((*opened)->size(), 3u);
}

TEST_F(HostileManifestTest, AStoppedListingEndsCancelledForEveryKindOfSource) {
  std::string lines;
  for (int i = 0; i < 3; ++i) lines += "a.jpg\t" + std::to_string(i) + "\n";
  const fs::path manifest = Write("list.txt", lines);
  fs::create_directories(dir_ / "tree" / "cls");
  std::ofstream(dir_ / "tree" / "cls" / "b.jpg") << "data";

  std::atomic<bool> stopping{true};
  ListingStop stop(&stopping, -1);
  ManifestOptions options;
  options.stop = &stop;
  for (const fs::path& root : {manifest, dir_ / "tree"}) {
    auto opened = Open(root, options);
    ASSERT_FALSE(opened.ok()) << root;
    EXPECT_EQ(opened.status().code(), StatusCode::kCancelled);
    EXPECT_NE(opened.status().message().find("galleyd is shutting down"), std::string::npos);
  }
  ShardOptions shards;
  shards.stop = &stop;
  std::ofstream(dir_ / "s.tar") << std::string(1024, '\0');
  auto opened = Dataset::OpenShards({(dir_ / "s.tar").string()}, shards, {dir_});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kCancelled);

  // The client that asked has closed its connection.
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  ::close(pair[1]);
  std::atomic<bool> running{false};
  ListingStop gone(&running, pair[0]);
  options.stop = &gone;
  auto left = Open(manifest, options);
  ::close(pair[0]);
  ASSERT_FALSE(left.ok());
  EXPECT_EQ(left.status().code(), StatusCode::kCancelled);
  EXPECT_NE(left.status().message().find("the client that asked for it has gone"),
            std::string::npos)
      << left.status().message();

  // A client still connected lets the listing run to its end.
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  ListingStop waiting(&running, pair[0]);
  options.stop = &waiting;
  auto listed = Open(manifest, options);
  ::close(pair[0]);
  ::close(pair[1]);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ((*listed)->size(), 3u);
}

}  // namespace
}  // namespace galley
