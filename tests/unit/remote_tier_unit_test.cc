// The remote tier's pieces that need no server: the value layout and its
// check (every damaged byte and every cut is caught), keys, the credentials
// file's rules, server addresses, and the storage throttle used by the
// benchmarks. The tier against real servers: tests/integration/remote_tier_test.cc.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "server/daemon/remote_credentials.h"
#include "server/daemon/remote_tier.h"
#include "server/daemon/remote_value.h"
#include "server/daemon/storage_throttle.h"

namespace galley {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const ContentFingerprint kDataset{0x0123456789abcdefULL, 0xfedcba9876543210ULL};

cache::Blob Encoded(size_t size) {
  cache::Blob blob;
  for (size_t i = 0; i < size; ++i) blob.bytes.push_back(static_cast<uint8_t>(i * 7 + 3));
  return blob;
}

cache::Blob Decoded(uint32_t width, uint32_t height) {
  cache::Blob blob = Encoded(size_t{width} * height * 3);
  blob.width = width;
  blob.height = height;
  blob.channels = 3;
  return blob;
}

TEST(RemoteKeyTest, NamesTheDatasetByContentTheItemAndTheForm) {
  EXPECT_EQ(RemoteKey(kDataset, 42, RemoteForm::kEncoded),
            "galley1:e:0123456789abcdeffedcba9876543210:42");
  EXPECT_EQ(RemoteKey(kDataset, 42, RemoteForm::kDecoded),
            "galley1:d:0123456789abcdeffedcba9876543210:42");
  const std::string longest = RemoteKey(kDataset, 0xffffffffu, RemoteForm::kDecoded);
  EXPECT_LE(longest.size(), 250u) << "memcached's key limit";
  EXPECT_EQ(longest.find_first_of(" \t\r\n"), std::string::npos);
}

TEST(RemoteValueTest, EncodedAndDecodedValuesComeBackAsStored) {
  const std::string key = RemoteKey(kDataset, 1, RemoteForm::kEncoded);
  const cache::Blob bytes = Encoded(1000);
  const std::string value = EncodeRemoteValue(key, RemoteForm::kEncoded, bytes);
  EXPECT_EQ(value.size(), kRemoteHeaderBytes + 1000);
  auto back = DecodeRemoteValue(key, RemoteForm::kEncoded, value, {});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ((*back)->bytes, bytes.bytes);
  EXPECT_EQ((*back)->width, 0u);

  const std::string pixels_key = RemoteKey(kDataset, 1, RemoteForm::kDecoded);
  const cache::Blob pixels = Decoded(7, 5);
  auto decoded = DecodeRemoteValue(pixels_key, RemoteForm::kDecoded,
                                   EncodeRemoteValue(pixels_key, RemoteForm::kDecoded, pixels), {});
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ((*decoded)->bytes, pixels.bytes);
  EXPECT_EQ((*decoded)->width, 7u);
  EXPECT_EQ((*decoded)->height, 5u);
  EXPECT_EQ((*decoded)->channels, 3u);
}

TEST(RemoteValueTest, EveryFlippedByteAndEveryCutIsCaught) {
  const std::string key = RemoteKey(kDataset, 9, RemoteForm::kDecoded);
  const std::string value = EncodeRemoteValue(key, RemoteForm::kDecoded, Decoded(4, 3));
  for (size_t i = 0; i < value.size(); ++i) {
    std::string damaged = value;
    damaged[i] ^= 0x01;
    auto got = DecodeRemoteValue(key, RemoteForm::kDecoded, damaged, {});
    EXPECT_EQ(got.status().code(), StatusCode::kDataLoss) << "byte " << i;
  }
  for (size_t length = 0; length < value.size(); ++length) {
    auto got = DecodeRemoteValue(key, RemoteForm::kDecoded, value.substr(0, length), {});
    EXPECT_EQ(got.status().code(), StatusCode::kDataLoss) << "cut at " << length;
  }
  auto longer = DecodeRemoteValue(key, RemoteForm::kDecoded, value + "x", {});
  EXPECT_EQ(longer.status().code(), StatusCode::kDataLoss);
}

TEST(RemoteValueTest, AValueStoredUnderAnotherKeyOrFormIsRefused) {
  const std::string key = RemoteKey(kDataset, 3, RemoteForm::kEncoded);
  const std::string value = EncodeRemoteValue(key, RemoteForm::kEncoded, Encoded(64));
  auto other_item = DecodeRemoteValue(RemoteKey(kDataset, 4, RemoteForm::kEncoded),
                                      RemoteForm::kEncoded, value, {});
  EXPECT_EQ(other_item.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(other_item.status().message().find("checksum"), std::string::npos);
  auto other_form = DecodeRemoteValue(key, RemoteForm::kDecoded, value, {});
  EXPECT_EQ(other_form.status().code(), StatusCode::kDataLoss);
}

TEST(RemoteValueTest, LimitsBoundWhatAValueMayClaim) {
  const std::string key = RemoteKey(kDataset, 5, RemoteForm::kDecoded);
  const std::string value = EncodeRemoteValue(key, RemoteForm::kDecoded, Decoded(10, 10));
  RemoteValueLimits limits;
  limits.max_pixels = 99;
  EXPECT_EQ(DecodeRemoteValue(key, RemoteForm::kDecoded, value, limits).status().code(),
            StatusCode::kDataLoss);
  limits.max_pixels = 100;
  EXPECT_TRUE(DecodeRemoteValue(key, RemoteForm::kDecoded, value, limits).ok());

  const std::string bytes_key = RemoteKey(kDataset, 5, RemoteForm::kEncoded);
  const std::string bytes = EncodeRemoteValue(bytes_key, RemoteForm::kEncoded, Encoded(100));
  limits.max_encoded_bytes = 99;
  EXPECT_FALSE(DecodeRemoteValue(bytes_key, RemoteForm::kEncoded, bytes, limits).ok());
}

TEST(ServerAddressTest, HostAndPortOrTheSaidWhy) {
  std::string host;
  uint16_t port = 0;
  EXPECT_TRUE(ParseServerAddress("10.1.2.3:11211", &host, &port));
  EXPECT_EQ(host, "10.1.2.3");
  EXPECT_EQ(port, 11211);
  EXPECT_TRUE(ParseServerAddress("[fe80::1]:1", &host, &port));
  EXPECT_EQ(host, "[fe80::1]");
  EXPECT_TRUE(ParseServerAddress("cache-7.cluster.local:65535", &host, &port));
  for (const char* bad : {"10.1.2.3", ":11211", "fe80::1:11211", "[fe80::1:11211", "h:0", "h:65536",
                          "h:12x", "h:", "a b:1", "/tmp/socket:1", "[]:1"}) {
    EXPECT_FALSE(ParseServerAddress(bad, &host, &port)) << bad;
  }
}

class RemoteCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "galley_credentials_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string Write(const std::string& text, mode_t mode = 0600) {
    // Appended piece by piece: GCC 12 warns (-Wrestrict) about "c" + to_string.
    std::string name = std::to_string(++files_);
    name += ".toml";
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path.string();
  }
  std::string Error(const std::string& path) {
    auto read = ReadRemoteCredentials(path);
    return read.ok() ? "" : read.status().message();
  }

  fs::path dir_;
  int files_ = 0;
};

TEST_F(RemoteCredentialsTest, APrivateFileWithUserAndPasswordIsRead) {
  auto read = ReadRemoteCredentials(Write("username = \"galley\"\npassword = \"p w=\\\"x\"\n"));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->username, "galley");
  EXPECT_EQ(read->password, "p w=\"x");
  EXPECT_TRUE(ReadRemoteCredentials(Write("username = \"u\"\npassword = \"p\"\n", 0400)).ok());
}

TEST_F(RemoteCredentialsTest, AFileOthersCouldReadOrThatIsNotItselfIsRefused) {
  for (mode_t mode : {0640, 0604, 0660, 0606, 0610}) {
    const std::string path = Write("username = \"u\"\npassword = \"p\"\n", mode);
    const std::string error = Error(path);
    EXPECT_NE(error.find("group or others may access it"), std::string::npos) << mode << error;
    EXPECT_NE(error.find("chmod 600 " + path), std::string::npos) << error;
  }
  const std::string target = Write("username = \"u\"\npassword = \"p\"\n");
  const fs::path link = dir_ / "link.toml";
  fs::create_symlink(target, link);
  EXPECT_NE(Error(link.string()).find("is a symlink"), std::string::npos);
  EXPECT_NE(Error((dir_ / "missing.toml").string()).find("cannot open it"), std::string::npos);
  EXPECT_NE(Error(dir_.string()).find("is not a regular file"), std::string::npos);
  if (::geteuid() == 0) {
    // Owned by someone else, however private.
    const std::string foreign = Write("username = \"u\"\npassword = \"p\"\n");
    ASSERT_EQ(::chown(foreign.c_str(), 65534, 65534), 0);
    EXPECT_NE(Error(foreign).find("is owned by uid 65534"), std::string::npos) << Error(foreign);
  }
}

TEST_F(RemoteCredentialsTest, BothKeysAndNothingElse) {
  EXPECT_NE(Error(Write("username = \"u\"\n")).find("needs both"), std::string::npos);
  EXPECT_NE(Error(Write("username = \"u\"\npassword = \"\"\n")).find("non-empty"),
            std::string::npos);
  EXPECT_NE(Error(Write("username = \"u\"\npassword = 7\n")).find("non-empty string"),
            std::string::npos);
  EXPECT_NE(Error(Write("username = \"u\"\npassword = \"p\"\nrealm = \"x\"\n"))
                .find("unknown key 'realm'"),
            std::string::npos);
  EXPECT_NE(Error(Write("username: u\n")).find("line 1"), std::string::npos);
}

// Transfers through one pipe queue behind each other: three threads charging
// 20 ms worth each take at least 60 ms together.
TEST(StorageThrottleTest, ChargesQueueBehindEachOther) {
  auto throttle = StorageThrottle::Create(1e6, "");
  ASSERT_TRUE(throttle.ok());
  const auto start = Clock::now();
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i) readers.emplace_back([&] { (*throttle)->Charge(20000); });
  for (auto& reader : readers) reader.join();
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(60));
  EXPECT_EQ(StorageThrottle::Create(0, "").status().code(), StatusCode::kInvalidArgument);
}

// Two throttles on one file stand for two daemons sharing one storage link.
TEST(StorageThrottleTest, ThrottlesNamingOneFileShareItsBandwidth) {
  const fs::path file =
      fs::temp_directory_path() / ("galley-throttle-" + std::to_string(::getpid()));
  auto first = StorageThrottle::Create(1e6, file.string());
  auto second = StorageThrottle::Create(1e6, file.string());
  ASSERT_TRUE(first.ok() && second.ok());
  const auto start = Clock::now();
  std::thread other([&] { (*second)->Charge(30000); });
  (*first)->Charge(30000);
  other.join();
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(60));
  fs::remove(file);
}

}  // namespace
}  // namespace galley
