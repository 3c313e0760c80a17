#include "galley/objectstore/object_store.h"

#include <condition_variable>
#include <mutex>
#include <optional>

namespace galley::objectstore {

Result<S3Url> S3Url::Parse(std::string_view url) {
  constexpr std::string_view kScheme = "s3://";
  if (url.substr(0, kScheme.size()) != kScheme)
    return Status::InvalidArgument(std::string(url) + " is not an s3:// URL");
  url.remove_prefix(kScheme.size());
  const size_t slash = url.find('/');
  S3Url parsed;
  parsed.bucket = std::string(url.substr(0, slash));
  if (slash != std::string_view::npos) parsed.key = std::string(url.substr(slash + 1));
  const bool valid_bucket = parsed.bucket.size() >= 3 && parsed.bucket.size() <= 63 &&
                            parsed.bucket.find_first_not_of(
                                "abcdefghijklmnopqrstuvwxyz0123456789.-") == std::string::npos;
  if (!valid_bucket) {
    return Status::InvalidArgument("s3://" + std::string(url) +
                                   ": the bucket name must be 3 to 63 of a-z, 0-9, '.' and '-'");
  }
  return parsed;
}

Result<std::vector<uint8_t>> ObjectStore::Get(const Access& access, const std::string& bucket,
                                              const std::string& key, uint64_t offset,
                                              uint64_t length, const std::string& etag) {
  std::mutex mu;
  std::condition_variable done;
  std::optional<Result<std::vector<uint8_t>>> result;
  GetAsync(access, bucket, key, offset, length, etag, [&](Result<std::vector<uint8_t>> got) {
    std::lock_guard<std::mutex> lock(mu);
    result.emplace(std::move(got));
    done.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  done.wait(lock, [&] { return result.has_value(); });
  return std::move(*result);
}

}  // namespace galley::objectstore
