// The remote tier's pieces that need no server: the value layout and its
// MAC (every damaged byte and every cut is caught, and a value forged without
// the deployment's key is refused), keys, the credentials file's rules,
// server addresses, and the storage throttle used by the benchmarks. The tier
// against real servers: tests/integration/remote_tier_test.cc.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "galley/remote/remote_cache.h"
#include "galley/remote/remote_credentials.h"
#include "galley/daemon/storage_throttle.h"
#if GALLEY_REMOTE_TIER
#include "galley/remote/remote_value.h"
#endif

namespace galley {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

#if GALLEY_REMOTE_TIER
const ContentFingerprint kDataset{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
// The deployment's key, as the credentials file's mac_key gives it.
const std::string kMacKey(32, '\x5a');

std::string Encode(std::string_view key, RemoteForm form, const cache::Blob& blob,
                   std::string_view mac_key = kMacKey) {
  auto value = EncodeRemoteValue(mac_key, key, form, blob);
  EXPECT_TRUE(value.ok()) << value.status().ToString();
  return value.ok() ? *value : std::string();
}

Result<std::shared_ptr<cache::Blob>> Decode(std::string_view key, RemoteForm form,
                                            std::string_view value,
                                            const RemoteValueLimits& limits = {}) {
  return DecodeRemoteValue(kMacKey, key, form, value, limits);
}

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
  const std::string value = Encode(key, RemoteForm::kEncoded, bytes);
  EXPECT_EQ(value.size(), kRemoteHeaderBytes + 1000);
  auto back = Decode(key, RemoteForm::kEncoded, value);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ((*back)->bytes, bytes.bytes);
  EXPECT_EQ((*back)->width, 0u);

  const std::string pixels_key = RemoteKey(kDataset, 1, RemoteForm::kDecoded);
  const cache::Blob pixels = Decoded(7, 5);
  auto decoded =
      Decode(pixels_key, RemoteForm::kDecoded, Encode(pixels_key, RemoteForm::kDecoded, pixels));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ((*decoded)->bytes, pixels.bytes);
  EXPECT_EQ((*decoded)->width, 7u);
  EXPECT_EQ((*decoded)->height, 5u);
  EXPECT_EQ((*decoded)->channels, 3u);
}

TEST(RemoteValueTest, EveryFlippedByteAndEveryCutIsCaught) {
  const std::string key = RemoteKey(kDataset, 9, RemoteForm::kDecoded);
  const std::string value = Encode(key, RemoteForm::kDecoded, Decoded(4, 3));
  for (size_t i = 0; i < value.size(); ++i) {
    std::string damaged = value;
    damaged[i] ^= 0x01;
    auto got = Decode(key, RemoteForm::kDecoded, damaged);
    EXPECT_EQ(got.status().code(), StatusCode::kDataLoss) << "byte " << i;
  }
  for (size_t length = 0; length < value.size(); ++length) {
    auto got = Decode(key, RemoteForm::kDecoded, value.substr(0, length));
    EXPECT_EQ(got.status().code(), StatusCode::kDataLoss) << "cut at " << length;
  }
  auto longer = Decode(key, RemoteForm::kDecoded, value + "x");
  EXPECT_EQ(longer.status().code(), StatusCode::kDataLoss);
}

TEST(RemoteValueTest, AValueStoredUnderAnotherKeyOrFormIsRefused) {
  const std::string key = RemoteKey(kDataset, 3, RemoteForm::kEncoded);
  const std::string value = Encode(key, RemoteForm::kEncoded, Encoded(64));
  auto other_item =
      Decode(RemoteKey(kDataset, 4, RemoteForm::kEncoded), RemoteForm::kEncoded, value);
  EXPECT_EQ(other_item.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(other_item.status().message().find("MAC mismatch"), std::string::npos);
  auto other_form = Decode(key, RemoteForm::kDecoded, value);
  EXPECT_EQ(other_form.status().code(), StatusCode::kDataLoss);
}

// What someone with the servers' credentials but not the deployment's key
// can write: other pixels under a genuine value's header with a checksum
// recomputed as version 1 computed it, or a value signed with a key of
// their own. Neither is served.
TEST(RemoteValueTest, AValueForgedWithoutTheDeploymentsKeyIsRefused) {
  const std::string key = RemoteKey(kDataset, 7, RemoteForm::kDecoded);
  const cache::Blob real = Decoded(8, 8);
  const std::string genuine = Encode(key, RemoteForm::kDecoded, real);
  ASSERT_TRUE(Decode(key, RemoteForm::kDecoded, genuine).ok());

  cache::Blob white = real;
  std::fill(white.bytes.begin(), white.bytes.end(), uint8_t{255});
  const std::string under_another_key = Encode(key, RemoteForm::kDecoded, white, "not-the-key");
  auto refused = Decode(key, RemoteForm::kDecoded, under_another_key);
  EXPECT_EQ(refused.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(refused.status().message().find("MAC mismatch"), std::string::npos);

  // The attack that the unkeyed checksum let through: a 40-byte version 1
  // header, white pixels, XXH3 of the payload seeded with the key and header.
  std::string old_layout(40, '\0');
  old_layout.replace(0, 8, genuine.substr(0, 8));
  old_layout[4] = 1;
  old_layout.replace(8, 24, genuine.substr(8, 24));
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, key.data(), key.size());
  XXH3_64bits_update(state, old_layout.data(), 32);
  const uint64_t checksum =
      XXH3_64bits_withSeed(white.bytes.data(), white.bytes.size(), XXH3_64bits_digest(state));
  XXH3_freeState(state);
  for (int i = 0; i < 8; ++i) old_layout[32 + i] = static_cast<char>(checksum >> (8 * i));
  old_layout.append(white.bytes.begin(), white.bytes.end());
  auto unkeyed = Decode(key, RemoteForm::kDecoded, old_layout);
  EXPECT_EQ(unkeyed.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(unkeyed.status().message().find("version 1"), std::string::npos);
  // Claiming this layout's version does not help: the MAC is still missing.
  old_layout[4] = 2;
  old_layout.insert(40, 24, '\0');
  EXPECT_EQ(Decode(key, RemoteForm::kDecoded, old_layout).status().code(), StatusCode::kDataLoss);

  // Other pixels under the genuine header and MAC.
  std::string swapped = genuine;
  swapped.replace(kRemoteHeaderBytes, white.bytes.size(),
                  std::string(white.bytes.begin(), white.bytes.end()));
  EXPECT_EQ(Decode(key, RemoteForm::kDecoded, swapped).status().code(), StatusCode::kDataLoss);
}

TEST(RemoteValueTest, LimitsBoundWhatAValueMayClaim) {
  const std::string key = RemoteKey(kDataset, 5, RemoteForm::kDecoded);
  const std::string value = Encode(key, RemoteForm::kDecoded, Decoded(10, 10));
  RemoteValueLimits limits;
  limits.max_pixels = 99;
  EXPECT_EQ(Decode(key, RemoteForm::kDecoded, value, limits).status().code(),
            StatusCode::kDataLoss);
  limits.max_pixels = 100;
  EXPECT_TRUE(Decode(key, RemoteForm::kDecoded, value, limits).ok());

  const std::string bytes_key = RemoteKey(kDataset, 5, RemoteForm::kEncoded);
  const std::string bytes = Encode(bytes_key, RemoteForm::kEncoded, Encoded(100));
  limits.max_encoded_bytes = 99;
  EXPECT_FALSE(Decode(bytes_key, RemoteForm::kEncoded, bytes, limits).ok());
}
#endif  // GALLEY_REMOTE_TIER

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

// 32 bytes 00 01 .. 1f, as `openssl rand -hex 32` would print a key.
const std::string kKeyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191A1B1C1D1E1F";
const std::string kKeyLine = "mac_key = \"" + kKeyHex + "\"\n";

TEST_F(RemoteCredentialsTest, APrivateFileWithUserPasswordAndKeyIsRead) {
  auto read =
      ReadRemoteCredentials(Write("username = \"galley\"\npassword = \"p w=\\\"x\"\n" + kKeyLine));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->username, "galley");
  EXPECT_EQ(read->password, "p w=\"x");
  ASSERT_EQ(read->mac_key.size(), 32u);
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(read->mac_key[i], static_cast<char>(i));
  EXPECT_TRUE(
      ReadRemoteCredentials(Write("username = \"u\"\npassword = \"p\"\n" + kKeyLine, 0400)).ok());
}

TEST_F(RemoteCredentialsTest, TheKeyIsRequiredHexAndAtLeast32Bytes) {
  const std::string user = "username = \"u\"\npassword = \"p\"\n";
  const std::string missing = Error(Write(user));
  EXPECT_NE(missing.find("needs mac_key"), std::string::npos) << missing;
  EXPECT_NE(missing.find("openssl rand -hex 32"), std::string::npos) << missing;
  const std::string short_key = Error(Write(user + "mac_key = \"" + kKeyHex.substr(2) + "\"\n"));
  EXPECT_NE(short_key.find("mac_key has 31 bytes, fewer than the 32 needed"), std::string::npos)
      << short_key;
  for (const std::string& bad : {kKeyHex + "0", kKeyHex.substr(1) + "g", "zz" + kKeyHex}) {
    const std::string error = Error(Write(user + "mac_key = \"" + bad + "\"\n"));
    EXPECT_NE(error.find("hex digits, two per byte"), std::string::npos) << bad << ": " << error;
  }
  EXPECT_TRUE(
      ReadRemoteCredentials(Write(user + "mac_key = \"" + kKeyHex + kKeyHex + "\"\n")).ok());
}

TEST_F(RemoteCredentialsTest, AFileOthersCouldReadOrThatIsNotItselfIsRefused) {
  for (mode_t mode : {0640, 0604, 0660, 0606, 0610}) {
    const std::string path = Write("username = \"u\"\npassword = \"p\"\n" + kKeyLine, mode);
    const std::string error = Error(path);
    EXPECT_NE(error.find("group or others may access it"), std::string::npos) << mode << error;
    EXPECT_NE(error.find("chmod 600 " + path), std::string::npos) << error;
  }
  const std::string target = Write("username = \"u\"\npassword = \"p\"\n" + kKeyLine);
  const fs::path link = dir_ / "link.toml";
  fs::create_symlink(target, link);
  EXPECT_NE(Error(link.string()).find("is a symlink"), std::string::npos);
  EXPECT_NE(Error((dir_ / "missing.toml").string()).find("cannot open it"), std::string::npos);
  EXPECT_NE(Error(dir_.string()).find("is not a regular file"), std::string::npos);
  if (::geteuid() == 0) {
    // Owned by someone else, however private.
    const std::string foreign = Write("username = \"u\"\npassword = \"p\"\n" + kKeyLine);
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
