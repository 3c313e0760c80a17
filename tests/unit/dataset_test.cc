// Dataset tests on temporary trees: torchvision's ImageFolder order and
// labels, manifests, subsets, and every way a path could leave the root.
#include "galley/dataset/dataset.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "wire/field_record.h"

namespace galley {
namespace {

namespace fs = std::filesystem;

class DatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "galley_dataset_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = fs::canonical(pattern);
    root_ = dir_ / "root";
    outside_ = dir_ / "outside";
    fs::create_directories(root_);
    fs::create_directories(outside_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const fs::path& path, const std::string& content = "data") {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << content;
  }

  std::shared_ptr<const Dataset> MustOpen(const fs::path& root) {
    auto dataset = Dataset::Open(root, {dir_});
    EXPECT_TRUE(dataset.ok()) << dataset.status().ToString();
    return dataset.ok() ? *dataset : nullptr;
  }

  std::vector<std::string> RelativePaths(const Dataset& dataset, const fs::path& base) {
    std::vector<std::string> paths;
    for (ItemId id = 0; id < dataset.size(); ++id) {
      paths.push_back(dataset.path(id).lexically_relative(base).string());
    }
    return paths;
  }

  fs::path dir_, root_, outside_;
};

TEST_F(DatasetTest, ImageFolderMatchesTorchvisionOrderAndLabels) {
  Write(root_ / "b/x.JPG");
  Write(root_ / "b/a.png");
  Write(root_ / "b/notes.txt");  // not an image extension: ignored
  Write(root_ / "b/sub/c.jpeg");
  Write(root_ / "b/sub-x/d.jpg");
  Write(root_ / "b/sub/deeper/e.png");
  Write(root_ / "a/z.WebP");
  Write(root_ / "a/deep/deeper/y.Tif");
  Write(root_ / "a/deep/readme");
  Write(root_ / "top_level.jpg");  // files beside the classes are not samples
  const auto dataset = MustOpen(root_);
  ASSERT_NE(dataset, nullptr);
  EXPECT_EQ(dataset->classes(), (std::vector<std::string>{"a", "b"}));
  // sorted(os.walk(...)) orders directories by their path string, so
  // "b/sub-x" ('-' is 0x2D) comes before "b/sub/deeper" ('/' is 0x2F).
  EXPECT_EQ(RelativePaths(*dataset, root_),
            (std::vector<std::string>{"a/z.WebP", "a/deep/deeper/y.Tif", "b/a.png", "b/x.JPG",
                                      "b/sub/c.jpeg", "b/sub-x/d.jpg", "b/sub/deeper/e.png"}));
  const std::vector<int64_t> expected_labels = {0, 0, 1, 1, 1, 1, 1};
  for (ItemId id = 0; id < dataset->size(); ++id)
    EXPECT_EQ(dataset->label(id), expected_labels[id]);
  EXPECT_EQ(dataset->label(99), -1);
  EXPECT_EQ(dataset->total_bytes(), 7u * 4u);
  EXPECT_EQ(dataset->root(), root_);
  auto bytes = dataset->Read(2);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(std::string(bytes->begin(), bytes->end()), "data");
}

// The remote tier's key names the files themselves: listing the same files
// again (another node mounting them at the same path) gives the same
// fingerprint, and so does a manifest naming them in the same order; a
// metadata clone elsewhere (same names, sizes and mtimes, as `cp -p`
// makes one) does not, nor a file deleted and made again at its path with
// its old size and mtime, nor a changed, renamed or reordered file.
TEST_F(DatasetTest, TheContentFingerprintNamesTheFilesWhereTheyAre) {
  const std::vector<std::string> names = {"a/1.jpg", "a/2.jpg", "b/3.png"};
  for (const std::string& name : names) Write(root_ / name, name);
  const auto original = MustOpen(root_);
  const auto again = MustOpen(root_);
  ASSERT_NE(original, nullptr);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(original->content_fingerprint(), again->content_fingerprint());
  EXPECT_EQ(original->content_fingerprint().Hex().size(), 32u);

  // A manifest naming the same files in the same order gives each id the
  // same bytes, so it shares the entries (labels are not part of them).
  Write(root_ / "list.txt", "a/1.jpg\t5\na/2.jpg\t6\nb/3.png\t7\n");
  const auto manifest = MustOpen(root_ / "list.txt");
  ASSERT_NE(manifest, nullptr);
  EXPECT_EQ(manifest->content_fingerprint(), original->content_fingerprint());
  Write(root_ / "reordered.txt", "a/2.jpg\t0\na/1.jpg\t0\nb/3.png\t1\n");
  const auto reordered = MustOpen(root_ / "reordered.txt");
  ASSERT_NE(reordered, nullptr);
  EXPECT_NE(reordered->content_fingerprint(), original->content_fingerprint());

  // The clone: everything stat shows a user, copied to another root.
  const fs::path clone = dir_ / "elsewhere" / "mount";
  fs::create_directories(clone.parent_path());
  fs::copy(root_, clone, fs::copy_options::recursive);
  for (const std::string& name : names) {
    fs::last_write_time(clone / name, fs::last_write_time(root_ / name));
  }
  const auto cloned = MustOpen(clone);
  ASSERT_NE(cloned, nullptr);
  EXPECT_NE(cloned->content_fingerprint(), original->content_fingerprint());

  // The same name, size and mtime on a new file at the old path: its
  // change time (which no user can set) and its inode differ.
  const auto mtime = fs::last_write_time(root_ / "a/2.jpg");
  fs::remove(root_ / "a/2.jpg");
  Write(root_ / "a/2.jpg", "A/2.JPG");
  fs::last_write_time(root_ / "a/2.jpg", mtime);
  const auto replaced = MustOpen(root_);
  ASSERT_NE(replaced, nullptr);
  EXPECT_NE(replaced->content_fingerprint(), original->content_fingerprint());

  Write(root_ / "a/2.jpg", "rewritten, one byte longer");
  const auto changed = MustOpen(root_);
  ASSERT_NE(changed, nullptr);
  EXPECT_NE(changed->content_fingerprint(), replaced->content_fingerprint());

  fs::rename(root_ / "b/3.png", root_ / "b/4.png");
  const auto renamed = MustOpen(root_);
  ASSERT_NE(renamed, nullptr);
  EXPECT_NE(renamed->content_fingerprint(), changed->content_fingerprint());
}

// What a saved loader state names the dataset by: a copy that does not keep
// modification times (cp -r) has the same content key and other mtimes; a
// resized file, a renamed one or another label is another content.
TEST_F(DatasetTest, TheResumeKeyNamesWhatACopyKeeps) {
  for (const char* name : {"a/1.jpg", "a/2.jpg", "b/3.png"}) Write(root_ / name, name);
  const fs::path copy = dir_ / "node2" / "data";
  fs::create_directories(copy.parent_path());
  fs::copy(root_, copy, fs::copy_options::recursive);
  for (const char* name : {"a/1.jpg", "a/2.jpg", "b/3.png"}) {
    fs::last_write_time(copy / name, fs::last_write_time(root_ / name) - std::chrono::hours(1));
  }
  const auto original = MustOpen(root_);
  const auto copied = MustOpen(copy);
  ASSERT_NE(original, nullptr);
  ASSERT_NE(copied, nullptr);
  EXPECT_EQ(copied->resume_key().content, original->resume_key().content);
  EXPECT_NE(copied->resume_key().mtimes, original->resume_key().mtimes);
  EXPECT_NE(copied->content_fingerprint(), original->content_fingerprint());  // the cache's key

  Write(copy / "a/2.jpg", "a/2.jpg, one byte longer");
  const auto resized = MustOpen(copy);
  ASSERT_NE(resized, nullptr);
  EXPECT_NE(resized->resume_key().content, original->resume_key().content);

  // The same files under other labels: a manifest's own, then class names.
  Write(root_ / "labels.txt", "a/1.jpg\t0\na/2.jpg\t0\nb/3.png\t1\n");
  Write(root_ / "relabelled.txt", "a/1.jpg\t0\na/2.jpg\t1\nb/3.png\t1\n");
  Write(root_ / "named.txt", "a/1.jpg\ta\na/2.jpg\ta\nb/3.png\tb\n");
  const auto labels = MustOpen(root_ / "labels.txt");
  const auto relabelled = MustOpen(root_ / "relabelled.txt");
  const auto named = MustOpen(root_ / "named.txt");
  ASSERT_TRUE(labels && relabelled && named);
  EXPECT_NE(labels->resume_key().content, relabelled->resume_key().content);
  EXPECT_NE(labels->resume_key().content, named->resume_key().content);
  EXPECT_EQ(labels->resume_key().mtimes, relabelled->resume_key().mtimes);
}

TEST_F(DatasetTest, EmptyClassesAndEmptyRootsAreInvalid) {
  fs::create_directories(root_ / "empty");
  Write(root_ / "full/1.jpg");
  EXPECT_EQ(Dataset::Open(root_, {}).status().code(), StatusCode::kInvalidArgument);
  const fs::path bare = dir_ / "bare";
  fs::create_directories(bare);
  EXPECT_EQ(Dataset::Open(bare, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Dataset::Open(dir_ / "missing", {}).status().code(), StatusCode::kNotFound);
}

TEST_F(DatasetTest, ManifestWithIntegerLabels) {
  Write(root_ / "img/0.jpg", "zero");
  Write(root_ / "img/1.jpg", "one!");
  Write(root_ / "list.tsv",
        "# comment line\n"
        "img/1.jpg\t7\r\n"
        "\n"
        "   \n"
        "./img/0.jpg\t-2\n");
  const auto dataset = MustOpen(root_ / "list.tsv");
  ASSERT_NE(dataset, nullptr);
  EXPECT_TRUE(dataset->classes().empty());
  ASSERT_EQ(dataset->size(), 2u);
  EXPECT_EQ(dataset->label(0), 7);
  EXPECT_EQ(dataset->label(1), -2);
  EXPECT_EQ(dataset->path(1), root_ / "img/0.jpg");
  EXPECT_EQ(dataset->total_bytes(), 8u);
  auto bytes = dataset->Read(0);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(std::string(bytes->begin(), bytes->end()), "one!");
}

TEST_F(DatasetTest, ManifestWithNamedLabelsGetsSortedClasses) {
  Write(root_ / "a.jpg");
  Write(root_ / "b.jpg");
  Write(root_ / "c.jpg");
  Write(root_ / "list.tsv", "a.jpg\tzebra\nb.jpg\tant\nc.jpg\tzebra\n");
  const auto dataset = MustOpen(root_ / "list.tsv");
  ASSERT_NE(dataset, nullptr);
  EXPECT_EQ(dataset->classes(), (std::vector<std::string>{"ant", "zebra"}));
  EXPECT_EQ(dataset->label(0), 1);
  EXPECT_EQ(dataset->label(1), 0);
  EXPECT_EQ(dataset->label(2), 1);
}

TEST_F(DatasetTest, ManifestErrors) {
  Write(root_ / "a.jpg");
  Write(outside_ / "secret.jpg");
  struct Case {
    std::string content;
    StatusCode code;
  };
  const std::vector<Case> cases = {
      {"a.jpg 3\n", StatusCode::kInvalidArgument},            // no tab
      {"a.jpg\t\n", StatusCode::kInvalidArgument},            // no label
      {"\t3\n", StatusCode::kInvalidArgument},                // no path
      {"# only comments\n\n", StatusCode::kInvalidArgument},  // no items
      {"missing.jpg\t1\n", StatusCode::kNotFound},
      {"../outside/secret.jpg\t1\n", StatusCode::kPermissionDenied},
      {"sub/../../outside/secret.jpg\t1\n", StatusCode::kPermissionDenied},
      {(outside_ / "secret.jpg").string() + "\t1\n", StatusCode::kPermissionDenied},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.content);
    Write(root_ / "list.tsv", c.content);
    EXPECT_EQ(Dataset::Open(root_ / "list.tsv", {}).status().code(), c.code);
  }
}

// A record's values as text.
std::vector<std::string> Values(const std::vector<uint8_t>& record, size_t count) {
  std::vector<std::string> values;
  auto split = wire::SplitFieldRecord(record, count);
  EXPECT_TRUE(split.ok()) << split.status().ToString();
  if (split.ok()) {
    for (auto value : *split) values.emplace_back(value.begin(), value.end());
  }
  return values;
}

TEST_F(DatasetTest, CsvManifestColumnsBecomeTypedFields) {
  Write(root_ / "a.jpg");
  Write(root_ / "b.jpg");
  Write(root_ / "table.csv",
        "image,labels,caption,score,empty\n"
        "a.jpg,\"[3, 17]\",\"a \"\"quoted\"\", with comma\",0.5,\n"
        "\n"
        "b.jpg,[],plain,2,x\r\n");
  const auto dataset = MustOpen(root_ / "table.csv");
  ASSERT_NE(dataset, nullptr);
  ASSERT_EQ(dataset->size(), 2u);
  EXPECT_EQ(dataset->field_names(),
            (std::vector<std::string>{"labels", "caption", "score", "empty"}));
  EXPECT_EQ(dataset->label(0), -1);  // a list is no label
  auto a = dataset->ReadFields(0);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(Values(*a, 4),
            (std::vector<std::string>{"[3, 17]", R"("a \"quoted\", with comma")", "0.5", "null"}));
  auto b = dataset->ReadFields(1);
  ASSERT_TRUE(b.ok());
  // "score" holds 0.5 and 2: a float column, so 2 comes as 2.0.
  EXPECT_EQ(Values(*b, 4), (std::vector<std::string>{"[]", R"("plain")", "2.0", R"("x")"}));
  EXPECT_EQ(dataset->field_collations(), (std::vector<std::string>{"", "", "float", ""}));
}

TEST_F(DatasetTest, ACsvColumnIsTypedOnceOverTheWholeColumn) {
  const std::vector<std::vector<std::string>> columns = {
      {"weight", "1", "0.25", "2.0", "3", "1e-3", "0.5"},           // floats
      {"count", "1", "2", "", "4", "5", "6"},                       // ints and an empty: floats
      {"cls", " 5", "+6", "-0", "7", "8", "9"},                     // ints
      {"code", "007", "12", "3", "4", "5", "6"},                    // a leading zero: strings
      {"id", "99999999999999999999", "1", "2", "3", "4", "5"},      // past int64: strings
      {"tags", "[1]", "", R"({""a"": 1})", "[]", "[2, 3]", "[4]"},  // JSON, an empty null
      {"odd", "nan", "inf", "0x10", "1e", "00", "-"},               // no numbers: strings
  };
  std::string text;
  for (size_t row = 0; row < columns[0].size(); ++row) {
    text += row == 0 ? "image" : "i" + std::to_string(row) + ".jpg";
    if (row > 0) Write(root_ / ("i" + std::to_string(row) + ".jpg"));
    for (const auto& column : columns) {
      const bool quote = column[row].find_first_of("\",") != std::string::npos;
      text += "," + (quote ? "\"" + column[row] + "\"" : column[row]);
    }
    text += "\n";
  }
  Write(root_ / "typed.csv", text);
  const auto dataset = MustOpen(root_ / "typed.csv");
  ASSERT_NE(dataset, nullptr);
  ASSERT_EQ(dataset->size(), 6u);
  std::vector<std::vector<std::string>> rows;
  for (ItemId id = 0; id < 6; ++id) {
    auto record = dataset->ReadFields(id);
    ASSERT_TRUE(record.ok()) << record.status().ToString();
    rows.push_back(Values(*record, columns.size()));
  }
  auto column = [&](size_t c) {
    std::vector<std::string> values;
    for (const auto& row : rows) values.push_back(row[c]);
    return values;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(column(0), (V{"1.0", "0.25", "2.0", "3.0", "0.001", "0.5"}));
  EXPECT_EQ(column(1), (V{"1.0", "2.0", "NaN", "4.0", "5.0", "6.0"}));
  EXPECT_EQ(column(2), (V{"5", "6", "0", "7", "8", "9"}));
  EXPECT_EQ(column(3), (V{R"("007")", R"("12")", R"("3")", R"("4")", R"("5")", R"("6")"}));
  EXPECT_EQ(column(4),
            (V{R"("99999999999999999999")", R"("1")", R"("2")", R"("3")", R"("4")", R"("5")"}));
  EXPECT_EQ(column(5), (V{"[1]", "null", R"({"a": 1})", "[]", "[2, 3]", "[4]"}));
  EXPECT_EQ(column(6), (V{R"("nan")", R"("inf")", R"("0x10")", R"("1e")", R"("00")", R"("-")"}));
  EXPECT_EQ(dataset->field_collations(), (V{"float", "float", "int", "", "", "", ""}));
  // The first field column is floats: no labels.
  EXPECT_EQ(dataset->label(0), -1);
}

TEST_F(DatasetTest, ACsvRecordSpansLinesInsideQuotesAsRfc4180WritesIt) {
  for (const char* name : {"a.jpg", "b.jpg", "c.jpg"}) Write(root_ / name);
  Write(root_ / "lines.csv",
        "image,caption,n\r\n"
        "a.jpg,\"two\nlines\",1\r\n"
        "b.jpg,\"a \"\"quote\"\",\r\nCRLF inside,\n\nand a blank line\",2\r\n"
        "c.jpg,plain,3\r\n");
  const auto dataset = MustOpen(root_ / "lines.csv");
  ASSERT_NE(dataset, nullptr);
  ASSERT_EQ(dataset->size(), 3u);
  const std::vector<std::vector<std::string>> want = {
      {R"("two\nlines")", "1"},
      {R"("a \"quote\",\r\nCRLF inside,\n\nand a blank line")", "2"},
      {R"("plain")", "3"}};
  for (ItemId id = 0; id < 3; ++id) {
    auto record = dataset->ReadFields(id);
    ASSERT_TRUE(record.ok());
    EXPECT_EQ(Values(*record, 2), want[id]);
  }
  // An error names the line its record starts on.
  Write(root_ / "bad.csv", "image,caption\na.jpg,\"x\ny\"\nb.jpg,1,2\n");
  auto bad = Dataset::Open(root_ / "bad.csv", {dir_});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.csv:4: the row has 3 cells"), std::string::npos)
      << bad.status().message();
  // A quote that is never closed is refused, saying so.
  Write(root_ / "open.csv", "image,caption\na.jpg,\"open\nb.jpg,x\n");
  auto open = Dataset::Open(root_ / "open.csv", {dir_});
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("open.csv:2: a quoted cell is not closed before the end "
                                         "of the file"),
            std::string::npos)
      << open.status().message();
}

TEST_F(DatasetTest, ManifestLabelsFollowTheFirstFieldColumnsType) {
  for (const char* name : {"a.jpg", "b.jpg", "c.jpg"}) Write(root_ / name);
  // Integers (spaces and a sign allowed) are labels.
  Write(root_ / "ints.csv", "image,y\na.jpg, 3\nb.jpg,+1\nc.jpg,0\n");
  auto ints = MustOpen(root_ / "ints.csv");
  ASSERT_NE(ints, nullptr);
  EXPECT_EQ((std::vector<int64_t>{ints->label(0), ints->label(1), ints->label(2)}),
            (std::vector<int64_t>{3, 1, 0}));
  // "007" makes a string column: its cells are class names, "12" among them.
  Write(root_ / "codes.csv", "image,y\na.jpg,007\nb.jpg,12\nc.jpg,007\n");
  auto codes = MustOpen(root_ / "codes.csv");
  ASSERT_NE(codes, nullptr);
  EXPECT_EQ(codes->classes(), (std::vector<std::string>{"007", "12"}));
  EXPECT_EQ((std::vector<int64_t>{codes->label(0), codes->label(1), codes->label(2)}),
            (std::vector<int64_t>{0, 1, 0}));
  // An empty cell leaves the items unlabelled.
  Write(root_ / "gap.csv", "image,y\na.jpg,1\nb.jpg,\nc.jpg,2\n");
  auto gap = MustOpen(root_ / "gap.csv");
  ASSERT_NE(gap, nullptr);
  EXPECT_EQ(gap->label(0), -1);
}

TEST_F(DatasetTest, HeaderRowManifestsNameTheImageColumnAndTheLabel) {
  Write(root_ / "a.jpg");
  Write(root_ / "b.jpg");
  Write(root_ / "list.jsonl", R"({"cls": "dog", "file": "a.jpg", "meta": {"k": [1]}})"
                              "\n"
                              R"({"meta": null, "file": "b.jpg", "cls": "cat"})"
                              "\n");
  auto jsonl = Dataset::Open(root_ / "list.jsonl", {}, {.image_column = "file"});
  ASSERT_TRUE(jsonl.ok()) << jsonl.status().ToString();
  EXPECT_EQ((*jsonl)->field_names(), (std::vector<std::string>{"cls", "meta"}));
  EXPECT_EQ((*jsonl)->image_column(), "file");
  EXPECT_EQ((*jsonl)->classes(), (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ((*jsonl)->label(0), 1);
  auto record = (*jsonl)->ReadFields(0);
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(Values(*record, 2), (std::vector<std::string>{R"("dog")", R"({"k":[1]})"}));
  // A .tsv has a header row only when asked (a job naming fields).
  Write(root_ / "list.tsv", "path\tcls\na.jpg\t4\nb.jpg\t5\n");
  auto headed = Dataset::Open(root_ / "list.tsv", {}, {.header_row = true});
  ASSERT_TRUE(headed.ok()) << headed.status().ToString();
  EXPECT_EQ((*headed)->size(), 2u);
  EXPECT_EQ((*headed)->label(1), 5);
  EXPECT_EQ((*headed)->image_column(), "path");  // the first column, image_column not given
  EXPECT_EQ(Dataset::Open(root_ / "list.tsv", {}).status().code(), StatusCode::kNotFound);
}

TEST_F(DatasetTest, MalformedTablesAreRefusedNamingTheLine) {
  Write(root_ / "a.jpg");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"t.csv", "image,x\na.jpg,1,2\n"},                // too many cells
      {"t.csv", "image,x\na.jpg,\"open\n"},             // an unclosed quote
      {"t.csv", "image,image\na.jpg,1\n"},              // a repeated column
      {"t.csv", "image,\na.jpg,1\n"},                   // an empty column name
      {"t.csv", ""},                                    // no header
      {"t.jsonl", "{\"image\": \"a.jpg\"}\n[1]\n"},     // not an object
      {"t.jsonl", "{\"image\": 3}\n{\"image\": 3}\n"},  // a path that is no string
      {"t.jsonl", "{\"image\": \"a.jpg\", \"x\": " + std::string(5000, '[') +
                      std::string(5000, ']') + "}\n{\"image\": \"a.jpg\", \"x\": 1}\n"},
  };
  for (const auto& [name, content] : cases) {
    SCOPED_TRACE(content.substr(0, 80));
    Write(root_ / name, content);
    auto opened = Dataset::Open(root_ / name, {});
    EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument) << opened.status().ToString();
  }
}

TEST_F(DatasetTest, SelectIsASortedUnion) {
  for (int i = 0; i < 4; ++i) Write(root_ / "cat" / (std::to_string(i) + ".jpg"));
  for (int i = 0; i < 3; ++i) Write(root_ / "dog" / (std::to_string(i) + ".jpg"));
  const auto dataset = MustOpen(root_);
  ASSERT_NE(dataset, nullptr);
  ASSERT_EQ(dataset->size(), 7u);
  auto all = dataset->Select({});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, (std::vector<ItemId>{0, 1, 2, 3, 4, 5, 6}));
  auto dogs = dataset->Select({.classes = {"dog"}});
  ASSERT_TRUE(dogs.ok());
  EXPECT_EQ(*dogs, (std::vector<ItemId>{4, 5, 6}));
  auto mixed = dataset->Select({.classes = {"dog"}, .ranges = {{1, 3}, {2, 2}}, .ids = {5, 0, 0}});
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(*mixed, (std::vector<ItemId>{0, 1, 2, 4, 5, 6}));
  EXPECT_EQ(dataset->Select({.classes = {"bird"}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dataset->Select({.ranges = {{3, 8}}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dataset->Select({.ranges = {{3, 2}}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dataset->Select({.ids = {7}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dataset->Read(7).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(DatasetTest, RootsOutsideTheAllowedOnesAreRefused) {
  Write(root_ / "c/1.jpg");
  EXPECT_EQ(Dataset::Open(root_, {outside_}).status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(Dataset::Open(root_, {outside_, root_}).ok());
  EXPECT_TRUE(Dataset::Open(root_ / "c/..", {dir_}).ok());
  // A prefix that is not a whole component does not count: /x/root2 is not under /x/root.
  const fs::path sibling = dir_ / "root2";
  Write(sibling / "c/1.jpg");
  EXPECT_EQ(Dataset::Open(sibling, {root_}).status().code(), StatusCode::kPermissionDenied);
  // A link inside an allowed root that points elsewhere is judged by its target.
  fs::create_directory_symlink(outside_, root_ / "link_out");
  Write(outside_ / "k/1.jpg");
  EXPECT_EQ(Dataset::Open(root_ / "link_out", {root_}).status().code(),
            StatusCode::kPermissionDenied);
}

TEST_F(DatasetTest, SymlinksLeavingTheRootAreRefused) {
  Write(root_ / "c/1.jpg");
  Write(outside_ / "secret.jpg");
  fs::create_symlink(outside_ / "secret.jpg", root_ / "c/2.jpg");
  EXPECT_EQ(Dataset::Open(root_, {}).status().code(), StatusCode::kPermissionDenied);
  fs::remove(root_ / "c/2.jpg");
  fs::create_directory_symlink(outside_, root_ / "c/sub");
  EXPECT_EQ(Dataset::Open(root_, {}).status().code(), StatusCode::kPermissionDenied);
  fs::remove(root_ / "c/sub");
  fs::create_directory_symlink(outside_, root_ / "d");  // a whole class outside
  EXPECT_EQ(Dataset::Open(root_, {}).status().code(), StatusCode::kPermissionDenied);
  fs::remove(root_ / "d");
  // Links that stay inside are followed, as torchvision follows them.
  fs::create_symlink(root_ / "c/1.jpg", root_ / "c/3.jpg");
  fs::create_directory_symlink(root_ / "c", root_ / "e");
  const auto dataset = MustOpen(root_);
  ASSERT_NE(dataset, nullptr);
  EXPECT_EQ(RelativePaths(*dataset, root_),
            (std::vector<std::string>{"c/1.jpg", "c/3.jpg", "e/1.jpg", "e/3.jpg"}));
  // A cycle is an error, not an endless walk.
  fs::create_directory_symlink(root_ / "c", root_ / "c/loop");
  EXPECT_EQ(Dataset::Open(root_, {}).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(DatasetTest, ReadRefusesALinkSwappedInAfterOpen) {
  Write(root_ / "c/1.jpg", "fine");
  Write(root_ / "c/2.jpg", "fine");
  Write(outside_ / "secret.jpg", "secret");
  const auto dataset = MustOpen(root_);
  ASSERT_NE(dataset, nullptr);
  fs::remove(root_ / "c/2.jpg");
  fs::create_symlink(outside_ / "secret.jpg", root_ / "c/2.jpg");
  EXPECT_EQ(dataset->Read(1).status().code(), StatusCode::kPermissionDenied);
  fs::remove(root_ / "c/2.jpg");
  EXPECT_EQ(dataset->Read(1).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(dataset->Read(0).ok());
}

TEST_F(DatasetTest, ReadRefusesNonRegularFilesWithoutBlocking) {
  Write(root_ / "c/1.jpg");
  ASSERT_EQ(::mkfifo((root_ / "c/2.jpg").c_str(), 0600), 0);
  const auto dataset = MustOpen(root_);
  ASSERT_NE(dataset, nullptr);
  ASSERT_EQ(dataset->size(), 2u);  // torchvision lists it too
  EXPECT_EQ(dataset->Read(1).status().code(), StatusCode::kDataLoss);
}

// The cache planner samples a file's header, not its every byte: ReadHead
// gives the first bytes and the whole size, checked as Read is.
TEST_F(DatasetTest, ReadHeadGivesTheFirstBytesAndTheWholeSize) {
  std::string content(3 << 20, 'x');
  for (size_t i = 0; i < content.size(); i += 4099) content[i] = static_cast<char>(i % 251);
  Write(root_ / "c/1.jpg", content);
  const auto dataset = MustOpen(root_);
  ASSERT_NE(dataset, nullptr);
  uint64_t size = 0;
  auto head = dataset->ReadHead(0, 1 << 20, &size);
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(size, content.size());
  EXPECT_EQ(std::string(head->begin(), head->end()), content.substr(0, 1 << 20));
  head = dataset->ReadHead(0, 8 << 20, &size);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(std::string(head->begin(), head->end()), content);
  fs::remove(root_ / "c/1.jpg");
  EXPECT_EQ(dataset->ReadHead(0, 16, &size).status().code(), StatusCode::kNotFound);
}

TEST_F(DatasetTest, ReadRefusesOversizedFiles) {
  Write(root_ / "c/1.jpg");
  const fs::path big = root_ / "c/2.jpg";
  Write(big);
  fs::resize_file(big, Dataset::kMaxFileBytes + 1);  // sparse: costs no disk
  const auto dataset = MustOpen(root_);
  ASSERT_NE(dataset, nullptr);
  EXPECT_EQ(dataset->Read(1).status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace galley
