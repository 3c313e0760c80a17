// The tar indexer on archives built here byte by byte: ustar prefixes, GNU
// long names and base-256 sizes, PAX records, damage, refusals; then the
// fuzz target over thousands of mutated archives (a short fuzz run). Also
// DALI wds2idx indexes: parsing, and listings whose reads are planned from
// one, good or wrong. Shard samples' fields and the checks of their
// members.
#include "galley/dataset/tar_index.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "galley/dataset/sample_fields.h"
#include "galley/dataset/shard_source.h"
#include "wire/field_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace galley {
namespace {

using Bytes = std::vector<uint8_t>;

void PutOctal(Bytes& block, size_t at, size_t width, uint64_t value) {
  std::string text(width - 1, '0');
  for (size_t i = width - 1; i-- > 0 && value > 0; value >>= 3) text[i] = char('0' + (value & 7));
  std::memcpy(block.data() + at, text.data(), text.size());
  block[at + width - 1] = 0;
}

// One header block; `gnu` picks the GNU magic, else POSIX ustar.
Bytes Header(const std::string& name, uint64_t size, char type, bool gnu = false,
             const std::string& prefix = "") {
  Bytes block(512, 0);
  std::memcpy(block.data(), name.data(), std::min<size_t>(name.size(), 100));
  PutOctal(block, 100, 8, 0644);
  PutOctal(block, 124, 12, size);
  block[156] = static_cast<uint8_t>(type);
  std::memcpy(block.data() + 257,
              gnu ? "ustar  "
                  : "ustar\0"
                    "00",
              8);
  std::memcpy(block.data() + 345, prefix.data(), std::min<size_t>(prefix.size(), 155));
  std::memset(block.data() + 148, ' ', 8);
  uint64_t sum = 0;
  for (uint8_t b : block) sum += b;
  PutOctal(block, 148, 7, sum);
  return block;
}

void Append(Bytes& archive, const Bytes& header, const std::string& payload) {
  archive.insert(archive.end(), header.begin(), header.end());
  archive.insert(archive.end(), payload.begin(), payload.end());
  archive.resize((archive.size() + 511) / 512 * 512, 0);
}

void Member(Bytes& archive, const std::string& name, const std::string& payload) {
  Append(archive, Header(name, payload.size(), '0'), payload);
}

Result<TarListing> List(const Bytes& archive) {
  return ListTar(archive.size(), [&](uint64_t offset, std::span<uint8_t> out) -> Status {
    if (offset + out.size() > archive.size()) return Status::DataLoss("past the end");
    std::memcpy(out.data(), archive.data() + offset, out.size());
    return Status::Ok();
  });
}

Bytes Sample() {
  Bytes archive;
  Member(archive, "a.jpg", std::string(700, 'j'));
  Append(archive, Header("b.jpg", 3, '0', false, "some/dir"), "xyz");
  const std::string long_name = std::string(150, 'n') + ".jpg";
  Append(archive, Header("././@LongLink", long_name.size() + 1, 'L', true), long_name + '\0');
  Append(archive, Header("truncated-name", 5, '0', true), "hello");
  const std::string pax_name = "pax/" + std::string(200, 'p') + ".cls";
  std::string record = " path=" + pax_name + "\n";
  record = std::to_string(record.size() + 3) + record;
  record += "10 size=4\n";
  Append(archive, Header("PaxHeader", record.size(), 'x'), record);
  Append(archive, Header("short", 999, '0'), "four");  // PAX size wins
  Append(archive, Header("link.jpg", 0, '2'), "");
  Append(archive, Header("dir/", 0, '5'), "");
  archive.resize(archive.size() + 1024, 0);
  return archive;
}

TEST(TarIndexTest, ListsUstarGnuAndPaxMembers) {
  const Bytes archive = Sample();
  auto listing = List(archive);
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  ASSERT_EQ(listing->members.size(), 4u);
  EXPECT_EQ(listing->members[0].name, "a.jpg");
  EXPECT_EQ(listing->members[0].offset, 512u);
  EXPECT_EQ(listing->members[0].size, 700u);
  EXPECT_EQ(listing->members[1].name, "some/dir/b.jpg");
  EXPECT_EQ(listing->members[2].name, std::string(150, 'n') + ".jpg");
  EXPECT_EQ(listing->members[2].size, 5u);
  EXPECT_EQ(listing->members[3].name, "pax/" + std::string(200, 'p') + ".cls");
  EXPECT_EQ(listing->members[3].size, 4u);
  EXPECT_EQ(std::string(archive.begin() + listing->members[3].offset,
                        archive.begin() + listing->members[3].offset + 4),
            "four");
  EXPECT_EQ(listing->skipped_non_regular, 2u);
  EXPECT_TRUE(listing->damage.empty()) << listing->damage;
}

// The remote tier's key for shards names the shard files themselves: the
// same shard listed again shares a content fingerprint; a metadata clone of
// it at another path (same name, size, bytes and mtime) does not, nor a
// shard rewritten with other bytes. A saved loader state's key is the
// clone's too, as a `cp -r` copy must resume.
TEST(ShardFingerprintTest, NamesTheShardFilesWhereTheyAre) {
  namespace fs = std::filesystem;
  std::string pattern = (fs::temp_directory_path() / "galley_shards_XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  const fs::path dir = pattern;
  auto write = [&](const fs::path& path, const std::string& payload) {
    fs::create_directories(path.parent_path());
    Bytes archive;
    Member(archive, "s1.jpg", payload);
    Member(archive, "s2.jpg", "second");
    archive.resize(archive.size() + 1024, 0);
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(archive.data()), std::streamsize(archive.size()));
  };
  write(dir / "a" / "train-000.tar", "first");
  write(dir / "b" / "train-000.tar", "first");
  fs::last_write_time(dir / "b" / "train-000.tar",
                      fs::last_write_time(dir / "a" / "train-000.tar"));
  ShardOptions options;
  options.label_key = "";
  auto here = ShardSource::Open({dir / "a" / "train-000.tar"}, options);
  auto again = ShardSource::Open({dir / "a" / "train-000.tar"}, options);
  auto clone = ShardSource::Open({dir / "b" / "train-000.tar"}, options);
  ASSERT_TRUE(here.ok() && again.ok() && clone.ok())
      << here.status().ToString() << clone.status().ToString();
  ASSERT_EQ((*here)->size(), 2u);
  EXPECT_EQ((*here)->content_fingerprint(), (*again)->content_fingerprint());
  EXPECT_NE((*here)->content_fingerprint(), (*clone)->content_fingerprint());
  EXPECT_EQ((*clone)->resume_key().content, (*here)->resume_key().content);
  EXPECT_EQ((*clone)->resume_key().mtimes, (*here)->resume_key().mtimes);
  // A copy that did not keep the shard's time (cp -r) resumes a saved
  // loader state: the same content key, other mtimes.
  fs::last_write_time(dir / "b" / "train-000.tar",
                      fs::last_write_time(dir / "a" / "train-000.tar") - std::chrono::hours(1));
  auto copied = ShardSource::Open({dir / "b" / "train-000.tar"}, options);
  ASSERT_TRUE(copied.ok());
  EXPECT_EQ((*copied)->resume_key().content, (*here)->resume_key().content);
  EXPECT_NE((*copied)->resume_key().mtimes, (*here)->resume_key().mtimes);
  write(dir / "a" / "train-000.tar", "FIRST");
  auto rewritten = ShardSource::Open({dir / "a" / "train-000.tar"}, options);
  ASSERT_TRUE(rewritten.ok());
  EXPECT_NE((*rewritten)->content_fingerprint(), (*here)->content_fingerprint());
  // Same sizes, other bytes: a resume cannot tell without reading them.
  EXPECT_EQ((*rewritten)->resume_key().content, (*here)->resume_key().content);
  fs::remove_all(dir);
}

TEST(TarIndexTest, Base256SizeIsRead) {
  Bytes header = Header("big.jpg", 0, '0', true);
  std::memset(header.data() + 124, 0, 12);
  header[124] = 0x80;
  header[135] = 3;  // size 3, base-256
  std::memset(header.data() + 148, ' ', 8);
  uint64_t sum = 0;
  for (uint8_t b : header) sum += b;
  PutOctal(header, 148, 7, sum);
  Bytes archive;
  Append(archive, header, "abc");
  auto listing = List(archive);
  ASSERT_TRUE(listing.ok());
  ASSERT_EQ(listing->members.size(), 1u);
  EXPECT_EQ(listing->members[0].size, 3u);
}

TEST(TarIndexTest, DamageKeepsWhatCameBefore) {
  Bytes archive;
  Member(archive, "a.jpg", "1");
  Member(archive, "b.jpg", "2");
  Bytes bad = archive;
  bad[512 * 2 + 10] ^= 0x55;  // b.jpg's header no longer sums
  auto listing = List(bad);
  ASSERT_TRUE(listing.ok());
  EXPECT_EQ(listing->members.size(), 1u);
  EXPECT_NE(listing->damage.find("checksum"), std::string::npos);
  EXPECT_EQ(listing->damaged_bytes, 1024u);

  Bytes cut = archive;
  Member(cut, "c.jpg", std::string(2000, 'c'));
  cut.resize(cut.size() - 1024);
  listing = List(cut);
  ASSERT_TRUE(listing.ok());
  EXPECT_EQ(listing->members.size(), 2u);
  EXPECT_NE(listing->damage.find("past the end"), std::string::npos);
}

TEST(TarIndexTest, RefusesCompressedAndNonTar) {
  for (const Bytes& head : {Bytes{0x1f, 0x8b, 8, 0, 0, 0}, Bytes{0x28, 0xb5, 0x2f, 0xfd, 0, 0},
                            Bytes{'B', 'Z', 'h', '9', 0, 0}}) {
    Bytes file = head;
    file.resize(2048, 0);
    auto listing = List(file);
    ASSERT_FALSE(listing.ok());
    EXPECT_NE(listing.status().message().find("decompress"), std::string::npos);
  }
  Bytes text(2048, 'x');
  EXPECT_FALSE(List(text).ok());
  auto empty = List(Bytes{});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->members.empty());
}

// A short fuzz run: 20,000 mutations (byte flips, inserted header fields,
// truncations) of the sample archive through the fuzz target.
TEST(TarIndexTest, MutatedArchivesNeverCrash) {
  const Bytes base = Sample();
  std::mt19937_64 rng(7);
  for (int round = 0; round < 20000; ++round) {
    Bytes input = base;
    const int edits = 1 + int(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % input.size();
      switch (rng() % 4) {
        case 0:
          input[at] ^= uint8_t(1u << (rng() % 8));
          break;
        case 1:
          input[at] = uint8_t(rng());
          break;
        case 2:  // a wild size field in some header
          std::memset(input.data() + (at / 512) * 512 + 124, '7', 11);
          break;
        case 3:
          input.resize(std::max<size_t>(1, at));
          break;
      }
    }
    ASSERT_EQ(LLVMFuzzerTestOneInput(input.data(), input.size()), 0);
  }
}

// ---- wds2idx indexes ----------------------------------------------------

TEST(WdsIndexTest, ParsesBothVersions) {
  auto v12 = ParseWdsIndex("v1.2 2\njpg 512 700 a.jpg cls 1536 1 a.cls\njpg 2560 3 b.jpg\n");
  ASSERT_TRUE(v12.ok()) << v12.status().ToString();
  EXPECT_TRUE(v12->named);
  ASSERT_EQ(v12->entries.size(), 3u);
  EXPECT_EQ(v12->entries[1].extension, "cls");
  EXPECT_EQ(v12->entries[1].offset, 1536u);
  EXPECT_EQ(v12->entries[1].size, 1u);
  EXPECT_EQ(v12->entries[1].name, "a.cls");
  auto v11 = ParseWdsIndex("v1.1 1\r\njpg 512 700 cls 1536 1\r\n\n");
  ASSERT_TRUE(v11.ok()) << v11.status().ToString();
  EXPECT_FALSE(v11->named);
  ASSERT_EQ(v11->entries.size(), 2u);
  EXPECT_TRUE(v11->entries[0].name.empty());
}

TEST(WdsIndexTest, RefusesMalformedIndexes) {
  for (const char* text : {"", "v2.0 1\njpg 512 1 a.jpg\n", "v1.2 2\njpg 512 1 a.jpg\n",
                           "v1.2 1\njpg 512 1\n", "v1.1 1\njpg 500 1\n", "v1.1 1\njpg 512 -1\n",
                           "v1.1 1\njpg 99999999999999999999999 1\n", "v1.2 0\n", "v1.2\n"}) {
    EXPECT_FALSE(ParseWdsIndex(text).ok()) << text;
  }
}

// An index naming every member of `listing` at its payload offset.
WdsIndex IndexOf(const TarListing& listing) {
  WdsIndex index;
  index.named = true;
  for (const TarMember& m : listing.members) {
    const size_t dot = m.name.find('.', m.name.rfind('/') + 1);
    index.entries.push_back({m.name.substr(dot + 1), m.offset, m.size, m.name});
  }
  return index;
}

struct Planned {
  Result<TarListing> listing;
  bool abandoned;
  uint64_t raw_reads;
};

// Lists `archive` through a PlannedTarReader that keeps .cls payloads.
Planned ListPlanned(const Bytes& archive, const WdsIndex& index) {
  const TarReader raw = [&](uint64_t offset, std::span<uint8_t> out) -> Status {
    if (offset > archive.size() || out.size() > archive.size() - offset)
      return Status::DataLoss("past the end");
    std::memcpy(out.data(), archive.data() + offset, out.size());
    return Status::Ok();
  };
  PlannedTarReader reader(archive.size(), raw, index,
                          [](const WdsIndexEntry& e) { return e.extension == "cls"; });
  auto listing = ListTar(archive.size(), [&](uint64_t offset, std::span<uint8_t> out) {
    return reader.Read(offset, out);
  });
  return {std::move(listing), reader.abandoned(), reader.raw_reads()};
}

void ExpectSameListing(const TarListing& a, const TarListing& b) {
  ASSERT_EQ(a.members.size(), b.members.size());
  for (size_t i = 0; i < a.members.size(); ++i) {
    EXPECT_EQ(a.members[i].name, b.members[i].name);
    EXPECT_EQ(a.members[i].header_offset, b.members[i].header_offset);
    EXPECT_EQ(a.members[i].offset, b.members[i].offset);
    EXPECT_EQ(a.members[i].size, b.members[i].size);
  }
  EXPECT_EQ(a.skipped_non_regular, b.skipped_non_regular);
  EXPECT_EQ(a.damage, b.damage);
}

// 200 samples (.jpg of 0-2,000 bytes, .cls), each member after a PAX header,
// as webdataset's ShardWriter writes them.
Bytes PaxShard() {
  Bytes archive;
  for (int k = 0; k < 200; ++k) {
    for (const char* extension : {"jpg", "cls"}) {
      const std::string name = std::to_string(k).insert(0, 1, 's') + '.' + extension;
      const std::string payload =
          extension[0] == 'c' ? std::to_string(k % 7) : std::string(k * 10, 'j');
      // "LEN mtime=...\n", LEN counting its own 2 digits.
      const std::string record = "22 mtime=1700000000.5\n";
      Append(archive, Header("PaxHeader/" + name, record.size(), 'x'), record);
      Member(archive, name, payload);
    }
  }
  archive.resize(archive.size() + 1024, 0);
  return archive;
}

TEST(PlannedTarReaderTest, GoodIndexGivesTheSameListingInFewerReads) {
  for (const Bytes& archive : {Sample(), PaxShard()}) {
    auto plain = List(archive);
    ASSERT_TRUE(plain.ok());
    const Planned planned = ListPlanned(archive, IndexOf(*plain));
    ASSERT_TRUE(planned.listing.ok()) << planned.listing.status().ToString();
    ExpectSameListing(*plain, *planned.listing);
    EXPECT_FALSE(planned.abandoned);
  }
  // The plain walk reads 3 blocks per member here (PAX header, its payload,
  // ustar header) plus the end marker; the planned one reads merged ranges.
  const Bytes shard = PaxShard();
  auto plain = List(shard);
  ASSERT_TRUE(plain.ok());
  const Planned planned = ListPlanned(shard, IndexOf(*plain));
  EXPECT_LT(planned.raw_reads, 400u / 4) << "400 members";
}

TEST(PlannedTarReaderTest, KeptPayloadsAreTheMembersBytes) {
  const Bytes shard = PaxShard();
  auto plain = List(shard);
  ASSERT_TRUE(plain.ok());
  const TarReader raw = [&](uint64_t offset, std::span<uint8_t> out) -> Status {
    std::memcpy(out.data(), shard.data() + offset, out.size());
    return Status::Ok();
  };
  PlannedTarReader reader(shard.size(), raw, IndexOf(*plain),
                          [](const WdsIndexEntry& e) { return e.extension == "cls"; });
  ASSERT_TRUE(ListTar(shard.size(), [&](uint64_t o, std::span<uint8_t> out) {
                return reader.Read(o, out);
              }).ok());
  int kept = 0;
  for (const TarMember& m : plain->members) {
    auto payload = reader.TakePayload(m.offset, m.size);
    if (m.name.ends_with(".cls")) {
      ASSERT_TRUE(payload.has_value()) << m.name;
      EXPECT_EQ(*payload, std::string(shard.begin() + m.offset, shard.begin() + m.offset + m.size));
      ++kept;
    } else {
      EXPECT_FALSE(payload.has_value()) << m.name;
    }
  }
  EXPECT_EQ(kept, 200);
}

TEST(PlannedTarReaderTest, WrongIndexesNeverChangeTheListing) {
  const Bytes shard = PaxShard();
  auto plain = List(shard);
  ASSERT_TRUE(plain.ok());
  const WdsIndex good = IndexOf(*plain);
  // Offsets one PAX header too far (the pre-2022 wds2idx formula on PAX
  // archives), entries out of the file, overlapping, or a random mess.
  WdsIndex shifted = good;
  for (WdsIndexEntry& e : shifted.entries) e.offset += 1024;
  WdsIndex outside = good;
  outside.entries[5].offset = shard.size() + 512;
  WdsIndex overlapping = good;
  overlapping.entries[7].offset = overlapping.entries[6].offset;
  std::mt19937_64 rng(3);
  std::vector<WdsIndex> cases = {shifted, outside, overlapping};
  for (int round = 0; round < 200; ++round) {
    WdsIndex mess = good;
    for (WdsIndexEntry& e : mess.entries) {
      if (rng() % 8 == 0) e.offset = (rng() % (shard.size() / 512)) * 512;
      if (rng() % 8 == 0) e.size = rng() % 4096;
    }
    cases.push_back(std::move(mess));
  }
  for (const WdsIndex& index : cases) {
    const Planned planned = ListPlanned(shard, index);
    ASSERT_TRUE(planned.listing.ok());
    ExpectSameListing(*plain, *planned.listing);
  }
  EXPECT_TRUE(ListPlanned(shard, shifted).abandoned) << "the first checked header disagrees";
  EXPECT_TRUE(ListPlanned(shard, outside).abandoned);
  EXPECT_TRUE(ListPlanned(shard, overlapping).abandoned);
}

TEST(PlannedTarReaderTest, MutatedIndexTextNeverCrashes) {
  const std::string base =
      "v1.2 2\njpg 512 700 a.jpg cls 1536 1 a.cls\njpg 2560 3 some/dir/b.jpg\n";
  std::mt19937_64 rng(11);
  for (int round = 0; round < 20000; ++round) {
    std::string text = base;
    for (int e = 1 + int(rng() % 4); e > 0; --e) {
      const size_t at = rng() % text.size();
      if (rng() % 3 == 0) {
        text.resize(at);
        if (text.empty()) text.push_back('v');
      } else {
        text[at] = static_cast<char>(rng() % 3 == 0 ? ' ' : '0' + rng() % 10);
      }
    }
    auto index = ParseWdsIndex(text);
    if (!index.ok()) continue;
    const Bytes archive = Sample();
    auto plain = List(archive);
    const Planned planned = ListPlanned(archive, *index);
    ASSERT_TRUE(planned.listing.ok());
    ExpectSameListing(*plain, *planned.listing);
  }
}

}  // namespace
}  // namespace galley

namespace galley {
namespace {

namespace fs = std::filesystem;

// A folder of shards written here, removed at the end.
class ShardFiles {
 public:
  ShardFiles() {
    std::string pattern = (fs::temp_directory_path() / "galley_shard_set_XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr) dir_ = pattern;
  }
  ~ShardFiles() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // A shard of `members` (name, payload) named `name`.
  fs::path Write(const std::string& name,
                 const std::vector<std::pair<std::string, std::string>>& members) {
    Bytes archive;
    for (const auto& [member, payload] : members) Member(archive, member, payload);
    archive.resize(archive.size() + 1024, 0);
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(archive.data()), std::streamsize(archive.size()));
    return path;
  }

 private:
  fs::path dir_;
};

TEST(ShardLabelTest, ANegativeLabelIsASkippedSampleNamingIt) {
  ShardFiles files;
  const auto shard = files.Write("labels.tar", {{"a.jpg", "A"},
                                                {"a.cls", "3"},
                                                {"b.jpg", "B"},
                                                {"b.cls", "-7"},
                                                {"c.jpg", "C"},
                                                {"c.cls", " 0\n"}});
  auto source = ShardSource::Open({shard}, ShardOptions{});
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ((*source)->size(), 2u);
  EXPECT_EQ((*source)->label(0), 3);
  EXPECT_EQ((*source)->label(1), 0);
  EXPECT_EQ((*source)->stats().skipped_samples, 1u);
  EXPECT_NE((*source)->stats().first_skipped_sample.find("b (the .cls holds -7"), std::string::npos)
      << (*source)->stats().first_skipped_sample;
}

TEST(ShardLabelTest, ANegativeOrOversizedJsonLabelIsASkippedSample) {
  ShardFiles files;
  const auto shard = files.Write("json.tar", {{"a.jpg", "A"},
                                              {"a.json", R"({"y": 5})"},
                                              {"b.jpg", "B"},
                                              {"b.json", R"({"y": -3})"},
                                              {"c.jpg", "C"},
                                              {"c.json", R"({"y": 18446744073709551615})"}});
  ShardOptions options;
  options.label_key = "json:y";
  auto source = ShardSource::Open({shard}, options);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ((*source)->size(), 1u);
  EXPECT_EQ((*source)->label(0), 5);
  EXPECT_EQ((*source)->stats().skipped_samples, 2u);
  EXPECT_NE((*source)->stats().first_skipped_sample.find("holds -3"), std::string::npos)
      << (*source)->stats().first_skipped_sample;
}

std::string Text(std::span<const uint8_t> bytes) { return std::string(bytes.begin(), bytes.end()); }

TEST(ShardFieldsTest, EveryNamedMemberTravelsInTheRecordReadWithTheImage) {
  ShardFiles files;
  const auto shard = files.Write("fields.tar", {{"a.jpg", "A"},
                                                {"a.txt", "first caption"},
                                                {"a.JSON", R"({"k": [1, 2]})"},
                                                {"b.jpg", "B"},
                                                {"b.json", "{}"},
                                                {"c.jpg", "C"},
                                                {"c.txt", "third"},
                                                {"c.json", "[]"}});
  ShardOptions options;
  options.label_key = "";
  options.fields = {"txt", "json", "__key__", "__url__"};
  auto source = ShardSource::Open({shard}, options);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  // b has no .txt: left out, saying so.
  ASSERT_EQ((*source)->size(), 2u);
  EXPECT_NE((*source)->stats().first_skipped_sample.find("b (no .txt member)"), std::string::npos)
      << (*source)->stats().first_skipped_sample;
  std::vector<uint8_t> record;
  auto image = (*source)->ReadWithFields(0, &record);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(Text(*image), "A");
  auto values = wire::SplitFieldRecord(record, 4);
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(Text((*values)[0]), "first caption");
  EXPECT_EQ(Text((*values)[1]), R"({"k": [1, 2]})");
  EXPECT_EQ(Text((*values)[2]), "a");
  EXPECT_EQ(Text((*values)[3]), fs::canonical(shard).string());
  // The record alone is the same bytes.
  auto alone = (*source)->ReadFields(1);
  ASSERT_TRUE(alone.ok());
  values = wire::SplitFieldRecord(*alone, 4);
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(Text((*values)[0]), "third");
  EXPECT_EQ(Text((*values)[2]), "c");
}

TEST(ShardFieldsTest, SamplesLeftOutAreNamedAndCountedByTheMemberTheyLack) {
  ShardFiles files;
  std::vector<std::pair<std::string, std::string>> members;
  for (int i = 0; i < 6; ++i) {
    const std::string key = "k" + std::to_string(i);
    members.push_back({key + ".jpg", "I"});
    if (i != 1 && i != 4) members.push_back({key + ".txt", "caption"});
    if (i != 4) members.push_back({key + ".json", "{}"});
  }
  const auto shard = files.Write("gaps.tar", members);
  ShardOptions options;
  options.label_key = "";
  options.fields = {"txt", "json"};
  auto source = ShardSource::Open({shard}, options);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ((*source)->size(), 4u);
  const ShardStats& stats = (*source)->stats();
  EXPECT_EQ(stats.skipped_samples, 2u);
  const std::string path = fs::canonical(shard).string();
  EXPECT_EQ(stats.left_out, (std::vector<std::string>{path + ": k1 (no .txt member)",
                                                      path + ": k4 (no .txt member)"}));
  EXPECT_EQ(stats.missing_members, (std::map<std::string, uint64_t>{{"txt", 2}}));
  EXPECT_EQ(DescribeLeftOut(stats),
            "2 have no .txt member; the first: " + path + ": k1 (no .txt member)");

  // A member no sample has (a misspelt field) lists the members they do have.
  options.fields = {"txtt"};
  auto none = ShardSource::Open({shard}, options);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ((*none)->size(), 0u);
  EXPECT_NE(DescribeLeftOut((*none)->stats())
                .find("6 have no .txtt member; no sample has a .txtt member (the samples' "
                      "members: jpg, json, txt)"),
            std::string::npos)
      << DescribeLeftOut((*none)->stats());
}

TEST(ShardFieldsTest, ASampleHoldingTwoMembersOfOneNameIsLeftOutNamingIt) {
  ShardFiles files;
  const auto shard = files.Write("twice.tar", {{"a.jpg", "A"},
                                               {"a.txt", "first"},
                                               {"b.jpg", "B"},
                                               {"b.txt", "first"},
                                               {"b.txt", "second"},
                                               {"c.jpg", "C"},
                                               {"c.txt", "third"}});
  ShardOptions options;
  options.label_key = "";
  options.fields = {"txt"};
  auto source = ShardSource::Open({shard}, options);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ((*source)->size(), 2u);
  const std::string path = fs::canonical(shard).string();
  EXPECT_EQ((*source)->stats().left_out,
            (std::vector<std::string>{path + ": b (two members named b.txt)"}));
  EXPECT_EQ(DescribeLeftOut((*source)->stats()),
            "1 have two .txt members; the first: " + path + ": b (two members named b.txt)");
  // Without fields too: which .txt is the sample's is anyone's guess.
  options.fields = {};
  source = ShardSource::Open({shard}, options);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ((*source)->size(), 2u);
}

TEST(ShardFieldsTest, AMemberThatIsNotWhatItsNameSaysFailsNamingShardAndKey) {
  ShardFiles files;
  const auto shard = files.Write("bad.tar", {{"a.jpg", "A"},
                                             {"a.json", "{\"unclosed\": "},
                                             {"a.cls", "1"},
                                             {"b.jpg", "B"},
                                             {"b.json", "1"},
                                             {"b.cls", "seven"}});
  ShardOptions options;
  options.label_key = "";
  options.fields = {"json", "cls"};
  auto source = ShardSource::Open({shard}, options);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ((*source)->size(), 2u);
  std::vector<uint8_t> record;
  auto a = (*source)->ReadWithFields(0, &record);
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("bad.tar: member a.json is not valid JSON"),
            std::string::npos)
      << a.status().ToString();
  auto b = (*source)->ReadFields(1);
  EXPECT_NE(b.status().message().find("bad.tar: member b.cls is not an integer"), std::string::npos)
      << b.status().ToString();
}

TEST(ShardFieldsTest, LargeMembersAreReadEachIntoItsOwnBufferWithTheSameBytes) {
  // Members past the joint read's size are read one by one, straight into
  // the image's buffer and the record: the bytes must be the same as a
  // joint read gives, whichever member is large.
  std::mt19937 rng(7);
  auto random_text = [&](size_t size) {
    std::string text(size, ' ');
    for (char& c : text) c = static_cast<char>('a' + rng() % 26);
    return text;
  };
  const std::string big_image = random_text(3 << 20), big_text = random_text((2 << 20) + 5);
  const std::string big_json = "{\"caption\": \"" + random_text(3 << 20) + "\"}";
  ShardFiles files;
  const auto shard = files.Write("large.tar", {{"a.jpg", big_image},
                                               {"a.txt", "small"},
                                               {"a.json", "{}"},
                                               {"b.jpg", "B"},
                                               {"b.txt", big_text},
                                               {"b.json", big_json},
                                               {"c.jpg", "C"},
                                               {"c.txt", "small too"},
                                               {"c.json", "[1]"}});
  ShardOptions options;
  options.label_key = "";
  options.fields = {"__key__", "txt", "json"};
  auto source = ShardSource::Open({shard}, options);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ((*source)->size(), 3u);
  const std::vector<std::vector<std::string>> want = {
      {"a", "small", "{}"}, {"b", big_text, big_json}, {"c", "small too", "[1]"}};
  const std::vector<std::string> images = {big_image, "B", "C"};
  for (ItemId id = 0; id < 3; ++id) {
    std::vector<uint8_t> record;
    auto image = (*source)->ReadWithFields(id, &record);
    ASSERT_TRUE(image.ok()) << id << ": " << image.status().ToString();
    EXPECT_TRUE(Text(*image) == images[id]) << id;
    // Sized once: the record holds no spare capacity a cache would carry.
    EXPECT_EQ(record.capacity(), record.size()) << id;
    auto values = wire::SplitFieldRecord(record, 3);
    ASSERT_TRUE(values.ok()) << id;
    for (size_t f = 0; f < 3; ++f) EXPECT_TRUE(Text((*values)[f]) == want[id][f]) << id << f;
    auto alone = (*source)->ReadFields(id);
    ASSERT_TRUE(alone.ok()) << id;
    EXPECT_TRUE(*alone == record) << id;
  }
}

TEST(ShardFieldsTest, AHeadIsTheMembersFirstBytesWithItsWholeSize) {
  ShardFiles files;
  const std::string image = "JPEG" + std::string(5000, 'x');
  const auto shard = files.Write("head.tar", {{"a.jpg", image}, {"b.jpg", "tiny"}});
  ShardOptions options;
  options.label_key = "";
  auto source = ShardSource::Open({shard}, options);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  uint64_t item_bytes = 0;
  auto head = (*source)->ReadHead(0, 16, &item_bytes);
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(Text(*head), image.substr(0, 16));
  EXPECT_EQ(item_bytes, image.size());
  head = (*source)->ReadHead(1, 16, &item_bytes);
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(Text(*head), "tiny");
  EXPECT_EQ(item_bytes, 4u);
}

TEST(SampleFieldsTest, ChecksFollowTheMembersName) {
  auto check = [](std::string_view name, std::string_view value) {
    return CheckFieldValue(name,
                           std::span(reinterpret_cast<const uint8_t*>(value.data()), value.size()));
  };
  EXPECT_TRUE(check("json", R"({"a": [1, {"b": null}]})").ok());
  EXPECT_TRUE(check("JSON", "3").ok());
  EXPECT_FALSE(check("json", "").ok());
  EXPECT_FALSE(check("json", "{").ok());
  EXPECT_FALSE(check("json", std::string(100000, '[')).ok());  // deep, and never parsed as a tree
  EXPECT_TRUE(check("cls", " 12\n").ok());
  EXPECT_TRUE(check("index", "-3").ok());
  EXPECT_FALSE(check("cls", "").ok());
  EXPECT_FALSE(check("cls", "1.5").ok());
  EXPECT_FALSE(check("cls", "99999999999999999999").ok());
  EXPECT_TRUE(check("txt", "caf\xc3\xa9").ok());
  EXPECT_FALSE(check("txt", "\xff\xfe anything").ok());  // not UTF-8: Python cannot decode it
  EXPECT_FALSE(check("seg.TEXT", "caf\xe9").ok());       // the extension is the last part
  EXPECT_FALSE(check("count", "many").ok());
  EXPECT_TRUE(check("pyd", "\x80\x04 not unpickled here").ok());
  // Deeper than Python's json module decodes safely, yet valid JSON.
  const std::string deep = std::string(2000, '[') + std::string(2000, ']');
  EXPECT_EQ(check("json", deep).message(),
            "nests deeper than 500 levels, more than Python's json module decodes safely");
  EXPECT_TRUE(check("json", std::string(500, '[') + std::string(500, ']')).ok());
  EXPECT_TRUE(check("json", R"(["[[[[", "{{{{"])").ok());  // brackets inside strings
  // .npy: what numpy.load(allow_pickle=False) reads.
  auto npy = [](const std::string& header) {
    std::string padded = header + std::string(64 - (10 + header.size() + 1) % 64, ' ') + "\n";
    std::string file = "\x93NUMPY\x01";
    file.push_back('\0');
    file.push_back(static_cast<char>(padded.size() & 0xff));
    file.push_back(static_cast<char>(padded.size() >> 8));
    return file + padded + std::string(16, '\0');
  };
  EXPECT_TRUE(
      check("npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }")).ok());
  EXPECT_EQ(check("npy", npy("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }")).message(),
            "holds Python objects (a pickled .npy), which galley does not unpickle");
  EXPECT_FALSE(check("npy", npy("{'descr': [('a', '<i4'), ('b', 'O')], 'fortran_order': False, "
                                "'shape': (1,), }"))
                   .ok());
  EXPECT_FALSE(check("npy", "not numpy at all").ok());
  EXPECT_TRUE(CheckManifestValue(R"("caf\u00e9")").ok());
  EXPECT_FALSE(CheckManifestValue("\"caf\xe9\"").ok());
  int64_t value = 0;
  EXPECT_TRUE(ParseIntegerText("\t42 ", &value));
  EXPECT_EQ(value, 42);
}

// Whether nlohmann::json refuses `text` only for a number a double cannot
// hold, which IsJsonText takes (as Python's json does).
bool RefusedForOverflow(std::string_view text) {
  try {
    const nlohmann::json parsed = nlohmann::json::parse(text);
    return false;  // parsed: not refused at all
  } catch (const nlohmann::json::exception& e) {
    return std::string_view(e.what()).find("number overflow") != std::string_view::npos;
  }
}

TEST(SampleFieldsTest, TheJsonCheckAcceptsWhatNlohmannAcceptsWithoutCopying) {
  const std::vector<std::string> corpus = {"{}",
                                           "[]",
                                           " \t\r\n[ ]\n",
                                           "0",
                                           "-0",
                                           "-0.5e-7",
                                           "1E+2",
                                           "12.25",
                                           "01",
                                           "1.",
                                           ".5",
                                           "-",
                                           "+1",
                                           "1e",
                                           "1e+",
                                           "0x10",
                                           "true",
                                           "false",
                                           "null",
                                           "nul",
                                           "True",
                                           "NaN",
                                           "Infinity",
                                           R"("")",
                                           R"("a\"b\\c\/d\be\ff\ng\rh\ti")",
                                           R"("\u00e9\u20AC")",
                                           R"("\ud83d\ude00")",
                                           R"("\ud83d")",
                                           R"("\ude00")",
                                           R"("\ud83d\u0041")",
                                           R"("\u12")",
                                           R"("\x41")",
                                           "\"tab\there\"",
                                           "\"\xc3\xa9\"",
                                           "\"\xe2\x82\xac\"",
                                           "\"\xf0\x9f\x98\x80\"",
                                           "\"\xc0\xaf\"",
                                           "\"\xe0\x80\xaf\"",
                                           "\"\xed\xa0\x80\"",
                                           "\"\xf4\x90\x80\x80\"",
                                           "\"\xf5\x80\x80\x80\"",
                                           "\"\xc3\"",
                                           "\"\x80\"",
                                           "\xef\xbb\xbf{\"bom\": 1}",
                                           "\xef\xbb{}",
                                           R"({"a": [1, {"b": null}], "c": "d"})",
                                           R"({"a" 1})",
                                           R"({"a": 1,})",
                                           R"([1, 2,])",
                                           R"([1 2])",
                                           R"({1: 2})",
                                           R"({"a": 1 "b": 2})",
                                           R"({"a": })",
                                           "[",
                                           "]",
                                           "{",
                                           "}",
                                           "[[[]]]",
                                           "[[[]]",
                                           "[]]",
                                           "{}{}",
                                           "1 2",
                                           "\"open",
                                           std::string("\"a\0b\"", 5),
                                           "",
                                           " ",
                                           "[\"\\u0000\"]"};
  // nlohmann's reader ends a text at a NUL byte outside a string, so it
  // takes "[1]" followed by anything after one; Python's json refuses
  // that, and so does this check. Other texts: the same answer.
  auto agree = [](const std::string& text, bool ours) {
    if (text.find('\0') != std::string::npos) return !ours;
    return ours == nlohmann::json::accept(text) || (ours && RefusedForOverflow(text));
  };
  for (const std::string& text : corpus) {
    EXPECT_EQ(IsJsonText(text), nlohmann::json::accept(text)) << "'" << text << "'";
  }
  EXPECT_FALSE(IsJsonText(std::string("[1]\0", 4)));
  EXPECT_FALSE(IsJsonText(std::string("[1]\0]", 5)));
  // Mutations of the corpus (an edit or three each): the two agree on every
  // one, and enough of them stay JSON for that to mean something.
  std::mt19937 rng(11);
  const std::string alphabet = "{}[]\",:\\/0123456789-+.eEutrfalsn \t\n\xc3\xa9\xff\x01";
  int taken = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string text = corpus[rng() % corpus.size()];
    for (int edits = 1 + static_cast<int>(rng() % 3); edits > 0; --edits) {
      const size_t at = text.empty() ? 0 : rng() % (text.size() + 1);
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), c);
          break;
        case 1:
          if (at < text.size()) text.erase(at, 1);
          break;
        default:
          if (at < text.size()) text[at] = c;
      }
    }
    const bool ours = IsJsonText(text);
    EXPECT_TRUE(agree(text, ours)) << (ours ? "taken: '" : "refused: '") << text << "'";
    taken += ours ? 1 : 0;
  }
  EXPECT_GT(taken, 1000) << "too few mutations stayed JSON";
  // A number past a double's range is a number to Python's json.
  EXPECT_TRUE(IsJsonText("[1e400, -1" + std::string(400, '0') + "]"));
  // Deep and long: a bit per level and nothing per byte of a string.
  EXPECT_TRUE(IsJsonText(std::string(100000, '[') + std::string(100000, ']')));
  EXPECT_TRUE(IsJsonText("\"" + std::string(8 << 20, 'x') + "\""));
}

TEST(ShardDescriptorsTest, SetsSharingACacheStayWithinItAndReleaseTheirOwn) {
  ShardFiles files;
  std::vector<fs::path> first, second;
  for (int i = 0; i < 3; ++i) {
    const std::string n = std::to_string(i);
    first.push_back(files.Write("a" + n + ".tar", {{"s" + n + ".jpg", "x"}}));
    second.push_back(files.Write("b" + n + ".tar", {{"s" + n + ".jpg", "y"}}));
  }
  ShardOptions options;
  options.label_key = "";
  options.descriptors = std::make_shared<ShardDescriptorCache>(4);
  auto a = ShardSource::Open(first, options);
  auto b = ShardSource::Open(second, options);
  ASSERT_TRUE(a.ok() && b.ok());
  for (ItemId id = 0; id < 3; ++id) {
    ASSERT_TRUE((*a)->Read(id).ok());
    ASSERT_TRUE((*b)->Read(id).ok());
  }
  EXPECT_EQ(options.descriptors->Counts().open, 4u);  // six shards read, four kept
  (*a)->ReleaseDescriptors();
  const uint64_t left = options.descriptors->Counts().open;
  EXPECT_GE(left, 1u);
  EXPECT_LE(left, 3u);  // only b's remain
  a->reset();
  b->reset();
  EXPECT_EQ(options.descriptors->Counts().open, 0u);  // a dropped set holds nothing
  // Released descriptors are opened again by a later read.
  auto again = ShardSource::Open(first, options);
  ASSERT_TRUE(again.ok());
  auto bytes = (*again)->Read(2);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(std::string(bytes->begin(), bytes->end()), "x");
}

}  // namespace
}  // namespace galley
