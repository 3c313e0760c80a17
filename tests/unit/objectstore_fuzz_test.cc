// A deterministic fuzz run over what an S3 store can send: listings, error
// bodies, Content-Range values and GET replies, random and mutated from
// real ones, through tests/fuzz/s3_reply_fuzzer.cc (which aborts on a broken
// invariant). The seed is fixed: a failure reproduces.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "galley/objectstore/s3_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace galley::objectstore {
namespace {

const char kListing[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
    "<Name>bkt</Name><IsTruncated>true</IsTruncated><Prefix>a/</Prefix><MaxKeys>2</MaxKeys>"
    "<Contents><Key>a/one</Key><LastModified>2026-11-29T10:34:57.993Z</LastModified>"
    "<ETag>&quot;c963c4de86e08ed6ac10ac2d81f627f5&quot;</ETag><Size>1000</Size>"
    "<StorageClass>STANDARD</StorageClass></Contents>"
    "<Contents><Key>a/two</Key><ETag>b52731692f35498bba7e4660142129d2</ETag><Size>7</Size>"
    "</Contents><KeyCount>2</KeyCount><NextContinuationToken>azE=</NextContinuationToken>"
    "</ListBucketResult>";
const char kError[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code><Message>Please "
    "reduce your request rate.</Message><RequestId>1</RequestId></Error>";
const char kPartialReply[] =
    "HTTP/1.1 206 Partial Content\nContent-Range: bytes 37-65/1000\nContent-Length: 29\n"
    "ETag: \"abc\"\n\n0123456789012345678901234567890123456789";
const char kWholeReply[] = "HTTP/1.1 200 OK\nContent-Length: 4000\nETag: W/\"abc\"\n\n";

std::string Seed(uint8_t mode, std::string_view text, std::string_view prefix = "") {
  std::string input(1, static_cast<char>(mode));
  input += prefix;
  input += text;
  return input;
}

// One of a few mutations: flip, insert, delete, duplicate a span, cut,
// splice in XML-ish or header-ish tokens.
void Mutate(std::string* input, std::mt19937_64& draw) {
  static const char* const kTokens[] = {
      "<Contents>",
      "</Contents>",
      "<Key>",
      "</Key>",
      "<Size>",
      "</Size>",
      "<IsTruncated>true",
      "<NextContinuationToken></NextContinuationToken>",
      "&amp;",
      "&#0;",
      "&bogus;",
      "<![CDATA[",
      "<!DOCTYPE x [<!ENTITY e \"eeeeeeeeee\">]>",
      "\n",
      "\nContent-Range: bytes 0-99/*",
      "\nContent-Range: bytes 18446744073709551615-18446744073709551615/0",
      "\nContent-Length: 99999999999999999999",
      "99999999999999999999",
      "-",
      "/",
      "\r",
      "\0"};
  const size_t size = input->size();
  switch (draw() % 6) {
    case 0:
      if (size > 1) (*input)[1 + draw() % (size - 1)] ^= static_cast<char>(1 << (draw() % 8));
      break;
    case 1:
      input->insert(1 + draw() % size, kTokens[draw() % std::size(kTokens)]);
      break;
    case 2:
      if (size > 2) input->erase(1 + draw() % (size - 1), 1 + draw() % 16);
      break;
    case 3: {
      if (size < 3) break;
      const size_t at = 1 + draw() % (size - 1);
      input->insert(at, input->substr(at, 1 + draw() % 64));
      break;
    }
    case 4:
      input->resize(1 + draw() % size);
      break;
    case 5:
      for (int i = 0; i < 4; ++i) input->push_back(static_cast<char>(draw()));
      break;
  }
}

void FuzzOne(const std::string& input) {
  ASSERT_EQ(LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size()),
            0);
}

TEST(ObjectStoreFuzzTest, MutatedRepliesNeverCrash) {
  std::vector<std::string> seeds = {Seed(0, kListing), Seed(1, kError),
                                    Seed(2, "bytes 37-65/1000")};
  for (int mode = 3; mode < 8; ++mode) {
    for (char a : std::string("\x00\x01\x03\x05", 4)) {
      seeds.push_back(Seed(static_cast<uint8_t>(mode), kPartialReply, std::string{a, 1, 1, 9}));
      seeds.push_back(Seed(static_cast<uint8_t>(mode), kWholeReply + std::string(4000, 'x'),
                           std::string{a, 3, 7, 50}));
    }
  }
  std::mt19937_64 draw(20261129);
  for (const std::string& seed : seeds) FuzzOne(seed);
  for (int round = 0; round < 30000; ++round) {
    std::string input = seeds[draw() % seeds.size()];
    const int mutations = 1 + static_cast<int>(draw() % 8);
    for (int i = 0; i < mutations; ++i) Mutate(&input, draw);
    FuzzOne(input);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(ObjectStoreFuzzTest, RandomBytesNeverCrash) {
  std::mt19937_64 draw(7);
  for (int round = 0; round < 20000; ++round) {
    std::string input(draw() % 300, '\0');
    for (char& c : input) c = static_cast<char>(draw());
    if (!input.empty()) input[0] = static_cast<char>(draw() % 5);
    FuzzOne(input);
  }
}

TEST(ObjectStoreFuzzTest, HostileListingsAreProtocolErrors) {
  // Deep nesting, a billion-laughs DOCTYPE, a huge Size, a key missing,
  // truncated without a token: refused, not crashed or expanded.
  std::string deep = "<ListBucketResult>";
  for (int i = 0; i < 100000; ++i) deep += "<a>";
  EXPECT_EQ(ParseListingPage(deep).status().code(), StatusCode::kProtocolError);
  std::string laughs = "<?xml version=\"1.0\"?><!DOCTYPE l [<!ENTITY a \"aaaaaaaaaa\">";
  for (char name = 'b'; name <= 'j'; ++name) {
    laughs += "<!ENTITY ";
    laughs += name;
    laughs += " \"";
    for (int j = 0; j < 10; ++j) {
      laughs += '&';
      laughs += static_cast<char>(name - 1);
      laughs += ';';
    }
    laughs += "\">";
  }
  laughs +=
      "]><ListBucketResult><Contents><Key>&j;</Key><Size>1</Size></Contents>"
      "</ListBucketResult>";
  Result<ListingPage> expanded = ParseListingPage(laughs);
  if (expanded.ok()) {
    ASSERT_EQ(expanded->objects.size(), 1u);
    EXPECT_LT(expanded->objects[0].key.size(), 64u);  // the entity stays unexpanded
  }
  EXPECT_EQ(ParseListingPage("<ListBucketResult><Contents><Key>k</Key><Size>"
                             "99999999999999999999999</Size></Contents></ListBucketResult>")
                .status()
                .code(),
            StatusCode::kProtocolError);
  EXPECT_EQ(ParseListingPage("<ListBucketResult><Contents><Size>1</Size></Contents>"
                             "</ListBucketResult>")
                .status()
                .code(),
            StatusCode::kProtocolError);
  EXPECT_EQ(ParseListingPage("<ListBucketResult><IsTruncated>true</IsTruncated>"
                             "</ListBucketResult>")
                .status()
                .code(),
            StatusCode::kProtocolError);
}

}  // namespace
}  // namespace galley::objectstore
