#include "galley/objectstore/object_store.h"

#include <future>
#include <utility>

namespace galley::objectstore {

namespace {

bool IsBucketChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
}
bool IsAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

}  // namespace

Result<S3Url> S3Url::Parse(std::string_view url) {
  constexpr std::string_view kScheme = "s3://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    std::string message(url);
    message += " is no S3 URL: write s3://BUCKET/KEY or s3://BUCKET/PREFIX/";
    return Status::InvalidArgument(std::move(message));
  }
  std::string_view rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  S3Url parsed;
  parsed.bucket = std::string(rest.substr(0, slash));
  if (slash != std::string_view::npos) parsed.key = std::string(rest.substr(slash + 1));
  const std::string& bucket = parsed.bucket;
  bool valid = bucket.size() >= 3 && bucket.size() <= 63 && IsAlnum(bucket.front()) &&
               IsAlnum(bucket.back());
  for (char c : bucket) valid = valid && IsBucketChar(c);
  if (!valid) {
    std::string message(url);
    message += ": \"" + bucket +
               "\" is no S3 bucket name (3 to 63 of a-z, 0-9, '.' and '-', starting and "
               "ending with a letter or digit)";
    return Status::InvalidArgument(std::move(message));
  }
  return parsed;
}

bool IsCredentialRefusal(const Status& status) {
  return status.code() == StatusCode::kPermissionDenied &&
         status.message().find(kCredentialRefusalWords) != std::string::npos;
}

Result<std::vector<uint8_t>> ObjectStore::Get(const Access& access, const std::string& bucket,
                                              const std::string& key, uint64_t offset,
                                              uint64_t length, const std::string& etag) {
  // The callback runs exactly once on the store's thread; the promise
  // carries its result back to this one.
  std::promise<Result<std::vector<uint8_t>>> promise;
  std::future<Result<std::vector<uint8_t>>> future = promise.get_future();
  GetAsync(
      access, bucket, key, offset, length, etag,
      [&promise](Result<std::vector<uint8_t>> result) { promise.set_value(std::move(result)); });
  return future.get();
}

}  // namespace galley::objectstore
