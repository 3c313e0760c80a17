// DiskTier against a real folder: entries written and read back, checks
// that turn a damaged, truncated or misplaced file into a miss, the budget
// and its eviction order, what a restart finds, the write queue's bound.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "galley/cache/disk_tier.h"

namespace galley::cache {
namespace {

namespace fs = std::filesystem;

class TempFolder {
 public:
  TempFolder() {
    std::string pattern = (fs::temp_directory_path() / "galley-disk-tier-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempFolder() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

constexpr DiskKey kA{0x1111, 0x2222, 1};
constexpr DiskKey kB{0x1111, 0x2222, 2};
constexpr DiskKey kC{0x1111, 0x2222, 3};
constexpr DiskKey kD{0x1111, 0x2222, 4};
// One entry of 1000 payload bytes takes one 4 KiB block.
constexpr uint64_t kEntry = 4096;

BlobPtr MakeBlob(uint8_t fill, size_t size = 1000, bool with_record = false) {
  auto blob = std::make_shared<Blob>();
  blob->bytes.assign(size, fill);
  for (size_t i = 0; i < size; ++i) blob->bytes[i] = static_cast<uint8_t>(fill + i * 7);
  if (with_record) {
    blob->fields =
        std::make_shared<const std::vector<uint8_t>>(std::vector<uint8_t>{1, 2, 3, fill});
  }
  return blob;
}

class DiskTierTest : public ::testing::Test {
 protected:
  std::unique_ptr<DiskTier> Open(uint64_t budget = 1 << 20, uint64_t queue = 1 << 20,
                                 const DemandTracker* demand = nullptr) {
    DiskTierOptions options;
    options.dir = dir();
    options.budget_bytes = budget;
    options.write_queue_bytes = queue;
    auto tier = DiskTier::Open(options, demand);
    EXPECT_TRUE(tier.ok()) << tier.status().ToString();
    if (!tier.ok()) return nullptr;
    (*tier)->WaitForIndex();
    return std::move(tier).value();
  }
  fs::path dir() const { return tmp_.path() / "disk"; }

  static void Write(DiskTier& tier, const DiskKey& key, BlobPtr blob, Key cache_key = 0) {
    ASSERT_TRUE(tier.Put(key, cache_key, std::move(blob)));
    tier.WaitForWrites();
  }

  TempFolder tmp_;
};

TEST_F(DiskTierTest, AnEntryReadsBackWithItsDimensionsAndRecord) {
  auto tier = Open();
  auto blob = std::make_shared<Blob>(*MakeBlob(9, 5000, /*with_record=*/true));
  blob->width = 7;
  blob->height = 5;
  blob->channels = 3;
  Write(*tier, kA, blob);
  std::shared_ptr<Blob> got = tier->Get(kA, 0);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->bytes, blob->bytes);
  EXPECT_EQ(got->width, 7u);
  EXPECT_EQ(got->height, 5u);
  EXPECT_EQ(got->channels, 3u);
  ASSERT_NE(got->fields, nullptr);
  EXPECT_EQ(*got->fields, *blob->fields);
  EXPECT_EQ(tier->Get(kB, 0), nullptr);
  const DiskTierStats stats = tier->Stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.writes, 1u);
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.bytes, 2 * kEntry);  // 64 + 5000 + 4 bytes: two blocks
}

TEST_F(DiskTierTest, TheFolderIsPrivateAndEntriesAreOwnerOnly) {
  ASSERT_EQ(::mkdir(dir().c_str(), 0755), 0);
  auto tier = Open();
  Write(*tier, kA, MakeBlob(1));
  struct stat info {};
  ASSERT_EQ(::stat(dir().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0700u);
  ASSERT_EQ(::stat(tier->EntryPath(kA).c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0600u);
}

TEST_F(DiskTierTest, ADamagedEntryIsAMissRemovedAndCounted) {
  auto tier = Open();
  Write(*tier, kA, MakeBlob(1));
  {
    std::fstream file(tier->EntryPath(kA), std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(64 + 500);
    file.put('\x5a');
  }
  EXPECT_EQ(tier->Get(kA, 0), nullptr);
  EXPECT_FALSE(fs::exists(tier->EntryPath(kA)));
  const DiskTierStats stats = tier->Stats();
  EXPECT_EQ(stats.damaged, 1u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.entries, 0u);
  EXPECT_EQ(stats.bytes, 0u);
  // Written again, it is served again.
  Write(*tier, kA, MakeBlob(1));
  EXPECT_NE(tier->Get(kA, 0), nullptr);
}

TEST_F(DiskTierTest, ATruncatedEntryIsAMiss) {
  auto tier = Open();
  Write(*tier, kA, MakeBlob(1));
  Write(*tier, kB, MakeBlob(2));
  fs::resize_file(tier->EntryPath(kA), 64 + 999);
  fs::resize_file(tier->EntryPath(kB), 10);  // not even a header
  EXPECT_EQ(tier->Get(kA, 0), nullptr);
  EXPECT_EQ(tier->Get(kB, 0), nullptr);
  EXPECT_EQ(tier->Stats().damaged, 2u);
  EXPECT_FALSE(fs::exists(tier->EntryPath(kA)));
  EXPECT_FALSE(fs::exists(tier->EntryPath(kB)));
}

TEST_F(DiskTierTest, AnEntryCopiedUnderAnotherKeysNameIsAMiss) {
  auto tier = Open();
  Write(*tier, kA, MakeBlob(1));
  // A sound file, but its header names item 1: never served as item 2.
  fs::copy_file(tier->EntryPath(kA), tier->EntryPath(kB));
  EXPECT_EQ(tier->Get(kB, 0), nullptr);
  EXPECT_EQ(tier->Stats().damaged, 1u);
  EXPECT_NE(tier->Get(kA, 0), nullptr);
}

TEST_F(DiskTierTest, ARestartKeepsEveryEntry) {
  {
    auto tier = Open();
    Write(*tier, kA, MakeBlob(1));
    Write(*tier, kB, MakeBlob(2, 9000, true));
  }
  auto tier = Open();
  DiskTierStats stats = tier->Stats();
  EXPECT_TRUE(stats.indexed);
  EXPECT_EQ(stats.entries, 2u);
  EXPECT_EQ(stats.bytes, kEntry + 3 * kEntry);
  std::shared_ptr<Blob> b = tier->Get(kB, 0);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->bytes, MakeBlob(2, 9000)->bytes);
  ASSERT_NE(b->fields, nullptr);
  EXPECT_NE(tier->Get(kA, 0), nullptr);
  EXPECT_EQ(tier->Stats().hits, 2u);
}

TEST_F(DiskTierTest, MayHoldSaysWhetherAnEntryFileIsThereWithoutCountingALookup) {
  {
    auto tier = Open();
    EXPECT_FALSE(tier->MayHold(kA));
    Write(*tier, kA, MakeBlob(1));
    EXPECT_TRUE(tier->MayHold(kA));
    EXPECT_FALSE(tier->MayHold(kB));
    const DiskTierStats stats = tier->Stats();
    EXPECT_EQ(stats.hits + stats.misses, 0u);  // a stat, not a read
  }
  // After a restart, by name: what a caller deciding on a slow read asks.
  auto tier = Open();
  EXPECT_TRUE(tier->MayHold(kA));
  fs::remove(tier->EntryPath(kA));
  EXPECT_FALSE(tier->MayHold(kA));
  // A symlink under an entry's name is not galleyd's entry.
  Write(*tier, kB, MakeBlob(2));
  fs::create_symlink(tier->EntryPath(kB), tier->EntryPath(kA));
  EXPECT_FALSE(tier->MayHold(kA));
}

TEST_F(DiskTierTest, TheBudgetEvictsTheLeastRecentlyUsed) {
  auto tier = Open(3 * kEntry);
  Write(*tier, kA, MakeBlob(1));
  Write(*tier, kB, MakeBlob(2));
  Write(*tier, kC, MakeBlob(3));
  ASSERT_NE(tier->Get(kA, 0), nullptr);  // B is now the least recently used
  Write(*tier, kD, MakeBlob(4));
  const DiskTierStats stats = tier->Stats();
  EXPECT_EQ(stats.evictions, 1u);
  EXPECT_EQ(stats.entries, 3u);
  EXPECT_LE(stats.bytes, 3 * kEntry);
  EXPECT_FALSE(fs::exists(tier->EntryPath(kB)));
  EXPECT_NE(tier->Get(kA, 0), nullptr);
  EXPECT_NE(tier->Get(kC, 0), nullptr);
  EXPECT_NE(tier->Get(kD, 0), nullptr);
}

TEST_F(DiskTierTest, AnItemAJobStillNeedsIsPassedOverForOneNobodyNeeds) {
  DemandTracker demand;
  auto tier = Open(3 * kEntry, 1 << 20, &demand);
  Write(*tier, kA, MakeBlob(1), /*cache_key=*/101);
  Write(*tier, kB, MakeBlob(2), 102);
  Write(*tier, kC, MakeBlob(3), 103);
  const Key needed[] = {101};
  demand.AddDemand(needed);  // A is the oldest, but a job still needs it
  Write(*tier, kD, MakeBlob(4), 104);
  EXPECT_TRUE(fs::exists(tier->EntryPath(kA)));
  EXPECT_FALSE(fs::exists(tier->EntryPath(kB)));
  // When every entry is needed, the least recently used goes.
  const Key all[] = {103, 104};
  demand.AddDemand(all);
  Write(*tier, kB, MakeBlob(2), 102);
  EXPECT_FALSE(fs::exists(tier->EntryPath(kA)));
  EXPECT_EQ(tier->Stats().entries, 3u);
}

TEST_F(DiskTierTest, ARestartWithASmallerBudgetTrimsTheOldestFirst) {
  {
    auto tier = Open();
    Write(*tier, kA, MakeBlob(1));
    Write(*tier, kB, MakeBlob(2));
    Write(*tier, kC, MakeBlob(3));
    // Modification times order the entries after a restart: A is the
    // oldest, then C, then B.
    const auto now = fs::file_time_type::clock::now();
    fs::last_write_time(tier->EntryPath(kA), now - std::chrono::hours(3));
    fs::last_write_time(tier->EntryPath(kC), now - std::chrono::hours(2));
    fs::last_write_time(tier->EntryPath(kB), now - std::chrono::hours(1));
  }
  auto tier = Open(kEntry + kEntry / 2);
  const DiskTierStats stats = tier->Stats();
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.evictions, 2u);
  EXPECT_TRUE(fs::exists(tier->EntryPath(kB)));
  EXPECT_FALSE(fs::exists(tier->EntryPath(kA)));
  EXPECT_FALSE(fs::exists(tier->EntryPath(kC)));
}

TEST_F(DiskTierTest, ForeignFilesAreLeftAloneAndNotCounted) {
  fs::path stray;
  fs::path temp;
  fs::path in_flight;
  {
    auto tier = Open();
    Write(*tier, kA, MakeBlob(1));
    stray = tier->EntryPath(kA).parent_path() / "README";
    // An entry's name in the wrong fan-out folder is no entry either.
    fs::path other = tier->EntryPath(kA).parent_path().parent_path() /
                     (tier->EntryPath(kA).parent_path().filename() == "00" ? "01" : "00") /
                     tier->EntryPath(kA).filename();
    std::ofstream(stray) << "notes";
    fs::copy_file(tier->EntryPath(kA), other);
    std::ofstream(dir() / "notes.txt") << "mine";
    // A write cut short by a crash (of a process whose pid is above any
    // pid_max), and one this process's writer would be making.
    temp = fs::path(tier->EntryPath(kB).string() + ".tmp-4194305");
    std::ofstream(temp) << "half";
    in_flight = fs::path(tier->EntryPath(kC).string() + ".tmp-" + std::to_string(::getpid()));
    std::ofstream(in_flight) << "half";
  }
  auto tier = Open();
  const DiskTierStats stats = tier->Stats();
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.bytes, kEntry);
  EXPECT_EQ(stats.foreign_files, 2u);
  EXPECT_TRUE(fs::exists(stray));
  EXPECT_TRUE(fs::exists(dir() / "notes.txt"));
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_TRUE(fs::exists(in_flight)) << "a write in flight is no crash's leftover";
}

TEST_F(DiskTierTest, AFullWriteQueueDropsAndCounts) {
  // Room for two entries of 1000 bytes (each counts its header too).
  auto tier = Open(1 << 20, 2 * 1064 + 100);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> writing;
  // The first write holds the writer until released, so the queue stays full.
  ASSERT_TRUE(tier->Put(kA, 0, MakeBlob(1), [&](const Blob& blob) -> BlobPtr {
    writing.set_value();
    released.wait();
    return std::make_shared<Blob>(blob);
  }));
  writing.get_future().wait();
  EXPECT_TRUE(tier->Put(kB, 0, MakeBlob(2)));
  EXPECT_FALSE(tier->Put(kC, 0, MakeBlob(3)));
  EXPECT_EQ(tier->Stats().write_drops, 1u);
  release.set_value();
  tier->WaitForWrites();
  const DiskTierStats stats = tier->Stats();
  EXPECT_EQ(stats.writes, 2u);
  EXPECT_EQ(stats.write_queue_bytes, 0u);
  EXPECT_EQ(tier->Get(kC, 0), nullptr);
  EXPECT_NE(tier->Get(kB, 0), nullptr);
}

TEST_F(DiskTierTest, AnEncoderMakesWhatIsWritten) {
  auto tier = Open();
  ASSERT_TRUE(tier->Put(kA, 0, MakeBlob(1), [](const Blob&) { return MakeBlob(42, 300); }));
  tier->WaitForWrites();
  std::shared_ptr<Blob> got = tier->Get(kA, 0);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->bytes, MakeBlob(42, 300)->bytes);
}

TEST_F(DiskTierTest, OneGalleydPerFolder) {
  auto tier = Open();
  DiskTierOptions options;
  options.dir = dir();
  auto second = DiskTier::Open(options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("in use by another galleyd"), std::string::npos);
}

TEST_F(DiskTierTest, ASymlinkOrARelativePathIsRefused) {
  fs::create_directory(tmp_.path() / "real");
  fs::create_directory_symlink(tmp_.path() / "real", dir());
  DiskTierOptions options;
  options.dir = dir();
  auto linked = DiskTier::Open(options);
  ASSERT_FALSE(linked.ok());
  EXPECT_EQ(linked.status().code(), StatusCode::kPermissionDenied);
  options.dir = "relative/disk";
  auto relative = DiskTier::Open(options);
  ASSERT_FALSE(relative.ok());
  EXPECT_EQ(relative.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace galley::cache
