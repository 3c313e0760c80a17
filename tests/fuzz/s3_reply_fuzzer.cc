// Fuzz target: what an S3 store sends S3Client (server/objectstore/
// s3_protocol.h). The first byte chooses what the rest is read as:
//   0: a ListObjectsV2 page;  1: an error body;  2: a Content-Range value;
//   3..: a reply to a GET: bytes 1-4 pick the status, the range asked and
//        how the body is cut into pieces; then header lines, a blank line,
//        and the body.
// Nothing may crash, and the bytes a GET keeps must never be more than it
// asked for, nor, when the reply is accepted, fewer. Built as a libFuzzer
// binary by scripts/fuzz.sh; tests/unit/objectstore_fuzz_test.cc runs it over
// mutated replies, and ctest replays tests/fuzz/corpus/s3_reply.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "galley/objectstore/s3_protocol.h"

namespace {

using galley::Status;
using namespace galley::objectstore;

constexpr long kStatuses[] = {200, 206, 200, 206, 204, 301, 304, 400,
                              403, 404, 412, 416, 429, 500, 503, 100};
constexpr uint64_t kCap = 4096;

void Require(bool condition) {
  if (!condition) std::abort();
}

void FuzzGetReply(const uint8_t* data, size_t size) {
  if (size < 5) return;
  const long http_status = kStatuses[data[1] % std::size(kStatuses)];
  const uint64_t offset = data[2] * 37u;
  const uint64_t length = (data[3] % 4 == 0) ? 0 : data[3] * 29u;
  const size_t piece = 1 + data[4] % 97;
  std::string_view rest(reinterpret_cast<const char*>(data + 5), size - 5);
  const size_t blank = rest.find("\n\n");
  const std::string_view head = rest.substr(0, blank);
  const std::string_view body =
      blank == std::string_view::npos ? std::string_view() : rest.substr(blank + 2);

  ReplyHeaders headers;
  size_t start = 0;
  while (start <= head.size()) {
    const size_t end = head.find('\n', start);
    headers.AddLine(head.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  (void)ParseContentRange(headers.content_range());

  if (http_status < 200 || http_status > 299) {
    const Status status = StatusForHttpReply(http_status, headers, body, "s3://b/k at http://h");
    Require(!status.ok());
    return;
  }
  GetReplyBody reply(offset, length, kCap);
  uint64_t sunk = 0;
  const GetReplyBody::Sink sink = [&sunk](std::span<const uint8_t> bytes) {
    sunk += bytes.size();
    return Status::Ok();
  };
  if (reply.Begin(http_status, headers).ok()) {
    for (size_t at = 0; at < body.size(); at += piece) {
      const std::string_view part = body.substr(at, piece);
      const auto progress = reply.Add(
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(part.data()), part.size()),
          sink);
      if (progress != GetReplyBody::Progress::kMore) break;
    }
  }
  const Status finished = reply.Finish();
  Require(sunk == reply.kept());
  Require(reply.kept() <= (length > 0 ? length : kCap));
  if (finished.ok() && length > 0) Require(reply.kept() == length);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0]) {
    case 0: {
      galley::Result<ListingPage> page = ParseListingPage(rest);
      if (page.ok()) {
        Require(!page->truncated || !page->next_continuation_token.empty());
        for (const ObjectInfo& object : page->objects) Require(!object.key.empty());
      }
      break;
    }
    case 1: {
      const std::string code = S3ErrorCode(rest);
      Require(code.size() <= 64);
      break;
    }
    case 2: {
      const auto range = ParseContentRange(rest);
      if (range)
        Require(range->first <= range->last && (!range->total || range->last < *range->total));
      break;
    }
    default:
      FuzzGetReply(data, size);
      break;
  }
  return 0;
}
