#include "galley/objectstore/s3_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>
#include <utility>

#include "galley/errno_text.h"
#include "galley/mutex.h"
#include "galley/objectstore/s3_protocol.h"
#include "galley/version.h"

namespace galley::objectstore {

namespace {

struct CurlEasyDeleter {
  void operator()(CURL* easy) const { curl_easy_cleanup(easy); }
};
using CurlEasy = std::unique_ptr<CURL, CurlEasyDeleter>;
struct CurlMultiDeleter {
  void operator()(CURLM* multi) const { curl_multi_cleanup(multi); }
};
using CurlMulti = std::unique_ptr<CURLM, CurlMultiDeleter>;
struct CurlListDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using CurlHeaderList = std::unique_ptr<curl_slist, CurlListDeleter>;

// An error reply's body is read only for its <Code>.
constexpr size_t kErrorBodyBytes = 64 << 10;
constexpr uint32_t kMaxEmptyListingPages = 100;

bool InitCurl() {
  static const bool ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  return ok;
}

enum class Verb { kGet, kHead, kList };

// A finished 2xx reply.
struct Reply {
  ReplyHeaders headers;
  std::vector<uint8_t> body;  // a GET's bytes in range
  std::string text;           // a listing page
};

// One request from the call that made it to its one answer, through its
// tries. Owned by the caller until submitted, then by the store's thread
// (or by Stream's caller, for its whole life).
struct Request {
  Verb verb = Verb::kGet;
  EndpointUrl endpoint;
  bool path_style = false;
  std::string url;
  std::string what;  // DescribeRequest()
  // The job's credentials; an empty user sends the request unsigned.
  std::string user;
  std::string secret;
  std::string sigv4;  // "aws:amz:<region>:s3"
  std::string session_token;
  uint64_t offset = 0;
  uint64_t length = 0;
  std::string etag;
  uint64_t open_ended_cap = 0;
  uint64_t text_cap = 0;  // a listing page's bytes
  uint32_t tries = 0;
  Status early_failure;  // not OK: never sent, answered with this
  std::function<void(Result<Reply>)> done;
  // Where GET bytes in range go (default: `body`).
  GetReplyBody::Sink sink;
  ObjectStoreCounters* counters = nullptr;

  // One try's state, reset by BeginTry().
  CURL* easy = nullptr;
  CurlHeaderList header_list;
  ReplyHeaders reply_headers;
  std::optional<GetReplyBody> get_body;
  Reply reply;
  std::string error_text;      // an error reply's body, cut at kErrorBodyBytes
  bool body_complete = false;  // a whole-object reply's range is whole
  bool text_cut = false;       // an error body was cut; the reply is read
  Status body_failure;         // why a listing page was refused
  char error_buffer[CURL_ERROR_SIZE] = {};
};

// What a try came to: an answer, or a failure another try may mend.
struct TryOutcome {
  Status status;
  bool retry = false;
};

long ResponseCode(CURL* easy) {
  long code = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
  return code;
}

size_t OnHeaderLine(char* data, size_t size, size_t count, void* user) {
  auto* request = static_cast<Request*>(user);
  request->reply_headers.AddLine(std::string_view(data, size * count));
  return size * count;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* request = static_cast<Request*>(user);
  const size_t bytes = size * count;
  const long code = ResponseCode(request->easy);
  const bool success = code >= 200 && code <= 299;
  if (request->verb == Verb::kGet && success) {
    request->counters->bytes.fetch_add(bytes, std::memory_order_relaxed);
    if (!request->get_body) {
      request->get_body.emplace(request->offset, request->length, request->open_ended_cap);
      if (!request->get_body->Begin(code, request->reply_headers).ok()) return 0;
    }
    const auto* first = reinterpret_cast<const uint8_t*>(data);
    switch (request->get_body->Add(std::span<const uint8_t>(first, bytes), request->sink)) {
      case GetReplyBody::Progress::kMore:
        return bytes;
      case GetReplyBody::Progress::kComplete:
        request->body_complete = true;
        return 0;  // the rest of the object is not needed: drop the connection
      case GetReplyBody::Progress::kFailed:
        return 0;
    }
    return 0;
  }
  if (request->verb == Verb::kList && success) {
    if (request->reply.text.size() + bytes > request->text_cap) {
      request->body_failure = Status::ProtocolError("the listing page is larger than " +
                                                    std::to_string(request->text_cap) + " bytes");
      return 0;
    }
    request->reply.text.append(data, bytes);
    return bytes;
  }
  const size_t room = kErrorBodyBytes - request->error_text.size();
  request->error_text.append(data, std::min(room, bytes));
  if (bytes > room) {
    request->text_cut = true;
    return 0;
  }
  return bytes;
}

bool IsRetryableCurlCode(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

// What one finished try of `request` means.
TryOutcome Evaluate(Request& request, CURLcode code) {
  const std::string& what = request.what;
  const auto located = [&](const Status& status) {
    return Status(status.code(), what + ": " + status.message());
  };
  if (code == CURLE_WRITE_ERROR) {
    if (request.get_body && !request.get_body->status().ok()) {
      return {located(request.get_body->status()), false};
    }
    if (!request.body_failure.ok()) return {located(request.body_failure), false};
    if (request.body_complete || request.text_cut) code = CURLE_OK;
  }
  if (code != CURLE_OK) {
    std::string detail = request.error_buffer[0] != '\0' ? std::string(request.error_buffer)
                                                         : std::string(curl_easy_strerror(code));
    if (IsRetryableCurlCode(code)) return {Status::Unavailable(what + ": " + detail), true};
    if (code == CURLE_PEER_FAILED_VERIFICATION) {
      return {
          Status::Unavailable(what + ": the endpoint's TLS certificate is not trusted (" + detail +
                              "); a private CA's certificates go in galleyd's s3_ca_file"),
          false};
    }
    return {Status::ProtocolError(what + ": " + detail), false};
  }
  const long http_status = ResponseCode(request.easy);
  if (http_status < 200 || http_status > 299) {
    return {StatusForHttpReply(http_status, request.reply_headers, request.error_text, what),
            IsRetryableHttpStatus(http_status)};
  }
  if (!request.etag.empty() && !request.reply_headers.etag().empty() &&
      request.reply_headers.etag() != request.etag) {
    // Some stores ignore If-Match (rclone serve s3 does): the reply's own
    // ETag tells the version that came.
    return {Status::DataLoss(what + ": the object changed: its ETag is now \"" +
                             request.reply_headers.etag() + "\", not the \"" + request.etag +
                             "\" the dataset was listed with"),
            false};
  }
  if (request.verb == Verb::kGet) {
    if (!request.get_body) {
      request.get_body.emplace(request.offset, request.length, request.open_ended_cap);
      if (!request.get_body->Begin(http_status, request.reply_headers).ok()) {
        return {located(request.get_body->status()), false};
      }
    }
    if (Status finished = request.get_body->Finish(); !finished.ok()) {
      return {located(finished), false};
    }
    if (request.get_body->whole_object()) {
      request.counters->full_bodies.fetch_add(1, std::memory_order_relaxed);
    }
  }
  return {Status::Ok(), false};
}

// Sets `easy` up for the next try of `request` (its state reset).
void BeginTry(CURL* easy, Request& request, const S3ClientOptions& options) {
  request.easy = easy;
  request.reply_headers = ReplyHeaders();
  request.get_body.reset();
  request.reply = Reply();
  request.error_text.clear();
  request.body_complete = false;
  request.text_cut = false;
  request.body_failure = Status::Ok();
  request.error_buffer[0] = '\0';

  curl_slist* list = nullptr;
  const auto add = [&list](const std::string& line) {
    list = curl_slist_append(list, line.c_str());
  };
  // Every header curl is given is signed; the payload hash is the one
  // libcurl's SigV4 reads from this header (S3 requires it be sent).
  add("x-amz-content-sha256: UNSIGNED-PAYLOAD");
  if (!request.session_token.empty()) add("x-amz-security-token: " + request.session_token);
  if (request.verb == Verb::kGet && (request.offset > 0 || request.length > 0)) {
    add("Range: bytes=" + std::to_string(request.offset) + "-" +
        (request.length > 0 ? std::to_string(request.offset + request.length - 1) : ""));
  }
  if (!request.etag.empty()) add("If-Match: \"" + request.etag + "\"");
  request.header_list.reset(list);

  curl_easy_setopt(easy, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(easy, CURLOPT_VERBOSE, 0L);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  // A key's "." and ".." segments are names, not directions.
  curl_easy_setopt(easy, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options.connect_timeout.count()));
  curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(options.low_speed_bytes));
  curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options.low_speed_time.count()));
  curl_easy_setopt(easy, CURLOPT_USERAGENT, "galley/" GALLEY_VERSION_STRING);
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!options.ca_file.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, options.ca_file.c_str());
  if (!request.user.empty()) {
    curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, request.sigv4.c_str());
    curl_easy_setopt(easy, CURLOPT_USERNAME, request.user.c_str());
    curl_easy_setopt(easy, CURLOPT_PASSWORD, request.secret.c_str());
  }
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, request.header_list.get());
  if (request.verb == Verb::kHead) {
    curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
  } else {
    curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
  }
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, OnHeaderLine);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &request);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &request);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, request.error_buffer);
  curl_easy_setopt(easy, CURLOPT_PRIVATE, &request);

  ObjectStoreCounters& counters = *request.counters;
  switch (request.verb) {
    case Verb::kGet:
      counters.gets.fetch_add(1, std::memory_order_relaxed);
      break;
    case Verb::kHead:
      counters.heads.fetch_add(1, std::memory_order_relaxed);
      break;
    case Verb::kList:
      counters.lists.fetch_add(1, std::memory_order_relaxed);
      break;
  }
  ++request.tries;
}

int64_t ParseHttpDate(const std::string& text) {
  return static_cast<int64_t>(curl_getdate(text.c_str(), nullptr));
}

std::string GaveUp(const Status& status, uint32_t tries) {
  return status.message() + "; gave up after " + std::to_string(tries) +
         (tries == 1 ? " try" : " tries");
}

class S3Client final : public ObjectStore {
 public:
  S3Client(const S3ClientOptions& options, std::vector<EndpointUrl> allowed, CurlMulti multi)
      : options_(options),
        allowed_(std::move(allowed)),
        multi_(std::move(multi)),
        jitter_(std::random_device{}()) {
    thread_ = std::thread([this] { Run(); });
  }

  ~S3Client() override {
    {
      MutexLock lock(&mu_);
      stopping_ = true;
    }
    curl_multi_wakeup(multi_.get());
    thread_.join();
  }

  void GetAsync(const Access& access, const std::string& bucket, const std::string& key,
                uint64_t offset, uint64_t length, const std::string& etag, GetDone done) override {
    std::unique_ptr<Request> request = Prepare(access, bucket, key, Verb::kGet);
    request->offset = offset;
    request->length = length;
    request->etag = StripEtag(etag);
    if (request->early_failure.ok()) {
      request->early_failure =
          CheckHeaderValue(request->etag, "the ETag " + request->what + " is read at");
    }
    if (request->early_failure.ok() && length > 0 && offset + length < offset) {
      request->early_failure =
          Status::InvalidArgument(request->what + ": the range read ends beyond 2^64");
    }
    request->open_ended_cap = options_.max_open_ended_get_bytes;
    request->reply.body.reserve(std::min<uint64_t>(length, 16u << 20));
    Request* raw = request.get();
    request->sink = [raw](std::span<const uint8_t> bytes) {
      raw->reply.body.insert(raw->reply.body.end(), bytes.begin(), bytes.end());
      return Status::Ok();
    };
    request->done = [done = std::move(done)](Result<Reply> reply) {
      if (!reply.ok()) {
        done(reply.status());
      } else {
        done(std::move(reply->body));
      }
    };
    Submit(std::move(request));
  }

  Result<ObjectInfo> Head(const Access& access, const std::string& bucket,
                          const std::string& key) override {
    std::unique_ptr<Request> request = Prepare(access, bucket, key, Verb::kHead);
    const std::string what = request->what;
    GALLEY_ASSIGN_OR_RETURN(Reply reply, SubmitAndWait(std::move(request)));
    if (!reply.headers.content_length()) {
      return Status::ProtocolError(what + ": the HEAD reply gives no Content-Length");
    }
    ObjectInfo info;
    info.key = key;
    info.size = *reply.headers.content_length();
    info.etag = reply.headers.etag();
    return info;
  }

  Status List(const Access& access, const std::string& bucket, const std::string& prefix,
              const std::function<Status(const ObjectInfo&)>& each) override {
    std::string token;
    std::string last_key;
    bool any = false;
    uint32_t empty_pages = 0;
    while (true) {
      std::unique_ptr<Request> request = Prepare(access, bucket, prefix, Verb::kList);
      const std::string what = request->what;
      if (request->early_failure.ok()) {
        request->url = ListUrl(request->endpoint, request->path_style, bucket, prefix, token,
                               options_.list_page_keys);
      }
      GALLEY_ASSIGN_OR_RETURN(Reply reply, SubmitAndWait(std::move(request)));
      Result<ListingPage> page = ParseListingPage(reply.text);
      if (!page.ok()) return Status(page.status().code(), what + ": " + page.status().message());
      for (const ObjectInfo& info : page->objects) {
        // S3 lists in key order; a listing that does not is no S3 listing
        // (and could go round for ever).
        if ((any && info.key <= last_key) || info.key.compare(0, prefix.size(), prefix) != 0) {
          return Status::ProtocolError(what + ": the listing's key \"" + info.key.substr(0, 200) +
                                       "\" is out of order or outside the prefix");
        }
        last_key = info.key;
        any = true;
        GALLEY_RETURN_IF_ERROR(each(info));
      }
      if (!page->truncated) return Status::Ok();
      empty_pages = page->objects.empty() ? empty_pages + 1 : 0;
      if (page->next_continuation_token == token || empty_pages > kMaxEmptyListingPages) {
        return Status::ProtocolError(what + ": the listing goes on without progress");
      }
      token = std::move(page->next_continuation_token);
    }
  }

  Status Stream(const Access& access, const std::string& bucket, const std::string& key,
                const std::string& etag,
                const std::function<Status(std::span<const uint8_t>)>& chunk) override {
    std::unique_ptr<Request> request = Prepare(access, bucket, key, Verb::kGet);
    request->etag = StripEtag(etag);
    if (request->early_failure.ok()) {
      request->early_failure =
          CheckHeaderValue(request->etag, "the ETag " + request->what + " is read at");
    }
    if (!request->early_failure.ok()) {
      counters_.failures.fetch_add(1, std::memory_order_relaxed);
      return request->early_failure;
    }
    // Nothing is held in memory: any size may pass.
    request->open_ended_cap = UINT64_MAX;
    uint64_t delivered = 0;
    Status chunk_failure;
    request->sink = [&](std::span<const uint8_t> bytes) {
      chunk_failure = chunk(bytes);
      if (chunk_failure.ok()) delivered += bytes.size();
      return chunk_failure;
    };
    CurlEasy easy(curl_easy_init());
    if (!easy) return Status::Internal(request->what + ": libcurl could not make a transfer");
    while (true) {
      // A retry goes on from the byte reached, of the version it started on.
      request->offset = delivered;
      curl_easy_reset(easy.get());
      BeginTry(easy.get(), *request, options_);
      counters_.in_flight.fetch_add(1, std::memory_order_relaxed);
      const CURLcode code = curl_easy_perform(easy.get());
      counters_.in_flight.fetch_sub(1, std::memory_order_relaxed);
      if (!chunk_failure.ok()) return chunk_failure;
      const long http_status = ResponseCode(easy.get());
      if (request->etag.empty() && http_status >= 200 && http_status <= 299) {
        request->etag = request->reply_headers.etag();
      }
      TryOutcome outcome = Evaluate(*request, code);
      if (outcome.status.ok()) return Status::Ok();
      if (!outcome.retry || request->tries > options_.max_retries) {
        counters_.failures.fetch_add(1, std::memory_order_relaxed);
        if (!outcome.retry) return outcome.status;
        return Status(outcome.status.code(), GaveUp(outcome.status, request->tries));
      }
      counters_.retries.fetch_add(1, std::memory_order_relaxed);
      std::this_thread::sleep_for(RetryDelay(*request));
    }
  }

  const ObjectStoreCounters& counters() const override { return counters_; }

 private:
  // A request for bucket/key (the prefix, for a listing) with the job's
  // credentials; early_failure set when it may not be sent.
  std::unique_ptr<Request> Prepare(const Access& access, const std::string& bucket,
                                   const std::string& key, Verb verb) {
    auto request = std::make_unique<Request>();
    request->verb = verb;
    request->counters = &counters_;
    request->text_cap = options_.max_listing_page_bytes;
    Result<EndpointUrl> endpoint = ResolveEndpoint(access.endpoint, allowed_);
    request->what =
        DescribeRequest(endpoint.ok() ? *endpoint : EndpointUrl{"https", "?", 0}, bucket, key);
    Status checked = endpoint.status();
    if (checked.ok()) checked = CheckBucketName(bucket);
    if (checked.ok()) checked = CheckKey(key, verb == Verb::kList);
    if (checked.ok()) {
      checked = CheckHeaderValue(access.credentials.access_key_id, "the job's AWS access key id");
    }
    if (checked.ok()) {
      checked = CheckHeaderValue(access.credentials.session_token, "the job's AWS session token");
    }
    if (!checked.ok()) {
      request->early_failure =
          Status(checked.code(), "s3://" + bucket.substr(0, 63) + "/" + key.substr(0, 300) + ": " +
                                     checked.message());
      return request;
    }
    request->endpoint = *endpoint;
    request->path_style = access.endpoint.path_style;
    request->url = ObjectUrl(*endpoint, access.endpoint.path_style, bucket, key);
    request->user = access.credentials.access_key_id;
    request->secret = access.credentials.secret_access_key;
    request->session_token = access.credentials.session_token;
    request->sigv4 = "aws:amz:" + access.endpoint.region + ":s3";
    return request;
  }

  Result<Reply> SubmitAndWait(std::unique_ptr<Request> request) {
    std::promise<Result<Reply>> promise;
    std::future<Result<Reply>> future = promise.get_future();
    request->done = [&promise](Result<Reply> reply) { promise.set_value(std::move(reply)); };
    Submit(std::move(request));
    return future.get();
  }

  void Submit(std::unique_ptr<Request> request) {
    {
      MutexLock lock(&mu_);
      if (!stopping_) {
        submitted_.push_back(std::move(request));
        request = nullptr;
      }
    }
    if (request) {
      request->done(Status::Cancelled(request->what + ": the object store is closing"));
      return;
    }
    curl_multi_wakeup(multi_.get());
  }

  // The wait before `request`'s next try: the backoff, or longer when the
  // store's reply said how long with Retry-After (503 SlowDown, 429), at
  // most backoff_cap.
  std::chrono::microseconds RetryDelay(const Request& request) {
    std::chrono::microseconds delay;
    {
      MutexLock lock(&mu_);
      delay = BackoffLocked(request.tries - 1);
    }
    const std::chrono::microseconds asked = RetryAfterDelay(
        request.reply_headers.retry_after(), static_cast<int64_t>(time(nullptr)), ParseHttpDate);
    return std::max(delay, std::min<std::chrono::microseconds>(asked, options_.backoff_cap));
  }

  // Backoff before retry `n` (from 0): full jitter.
  std::chrono::microseconds BackoffLocked(uint32_t n) REQUIRES(mu_) {
    const auto base = std::chrono::duration_cast<std::chrono::microseconds>(options_.backoff_base);
    const auto cap = std::chrono::duration_cast<std::chrono::microseconds>(options_.backoff_cap);
    const int64_t ceiling =
        n >= 30 ? cap.count() : std::min<int64_t>(cap.count(), base.count() << n);
    if (ceiling <= 0) return std::chrono::microseconds(0);
    std::uniform_int_distribution<int64_t> draw(0, ceiling - 1);
    return std::chrono::microseconds(draw(jitter_));
  }

  void Run();
  void StartTry(std::unique_ptr<Request> request);
  void OnTryDone(CURL* easy, CURLcode code);
  void Answer(std::unique_ptr<Request> request, Result<Reply> reply);

  const S3ClientOptions options_;
  const std::vector<EndpointUrl> allowed_;
  ObjectStoreCounters counters_;
  CurlMulti multi_;

  Mutex mu_;
  std::deque<std::unique_ptr<Request>> submitted_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::mt19937_64 jitter_ GUARDED_BY(mu_);

  // The store's thread's alone.
  std::deque<std::unique_ptr<Request>> waiting_;
  std::multimap<std::chrono::steady_clock::time_point, std::unique_ptr<Request>> backing_off_;
  std::vector<CurlEasy> idle_easies_;
  std::unordered_map<CURL*, std::pair<CurlEasy, std::unique_ptr<Request>>> active_;
  std::thread thread_;
};

void S3Client::Run() {
  while (true) {
    {
      MutexLock lock(&mu_);
      if (stopping_) break;
      while (!submitted_.empty()) {
        waiting_.push_back(std::move(submitted_.front()));
        submitted_.pop_front();
      }
    }
    // Retries that are due go first: their requests came first.
    const auto now = std::chrono::steady_clock::now();
    while (!backing_off_.empty() && backing_off_.begin()->first <= now) {
      waiting_.push_front(std::move(backing_off_.begin()->second));
      backing_off_.erase(backing_off_.begin());
    }
    while (active_.size() < options_.max_in_flight && !waiting_.empty()) {
      std::unique_ptr<Request> request = std::move(waiting_.front());
      waiting_.pop_front();
      if (!request->early_failure.ok()) {
        Status failure = request->early_failure;
        Answer(std::move(request), std::move(failure));
      } else {
        StartTry(std::move(request));
      }
    }
    int running = 0;
    curl_multi_perform(multi_.get(), &running);
    int left = 0;
    while (CURLMsg* message = curl_multi_info_read(multi_.get(), &left)) {
      if (message->msg == CURLMSG_DONE) OnTryDone(message->easy_handle, message->data.result);
    }
    // curl_multi_poll waits less when curl's own timers (timeouts, the
    // low-speed check) are due sooner; curl_multi_wakeup ends it at once.
    long wait_ms = 1000;
    if (!waiting_.empty() && active_.size() < options_.max_in_flight) wait_ms = 0;
    if (!backing_off_.empty()) {
      const auto until = std::chrono::ceil<std::chrono::milliseconds>(
          backing_off_.begin()->first - std::chrono::steady_clock::now());
      wait_ms = std::clamp<long>(static_cast<long>(until.count()), 0, wait_ms);
    }
    curl_multi_poll(multi_.get(), nullptr, 0, static_cast<int>(wait_ms), nullptr);
  }
  // Closing: every request still here is answered, once.
  std::vector<std::unique_ptr<Request>> left_over;
  for (auto& [easy, entry] : active_) {
    curl_multi_remove_handle(multi_.get(), easy);
    counters_.in_flight.fetch_sub(1, std::memory_order_relaxed);
    left_over.push_back(std::move(entry.second));
  }
  active_.clear();
  for (auto& [due, request] : backing_off_) left_over.push_back(std::move(request));
  backing_off_.clear();
  for (auto& request : waiting_) left_over.push_back(std::move(request));
  waiting_.clear();
  {
    MutexLock lock(&mu_);
    for (auto& request : submitted_) left_over.push_back(std::move(request));
    submitted_.clear();
  }
  for (auto& request : left_over) {
    Status closing = Status::Cancelled(request->what + ": the object store is closing");
    Answer(std::move(request), std::move(closing));
  }
}

void S3Client::StartTry(std::unique_ptr<Request> request) {
  CurlEasy easy;
  if (!idle_easies_.empty()) {
    easy = std::move(idle_easies_.back());
    idle_easies_.pop_back();
    curl_easy_reset(easy.get());
  } else {
    easy.reset(curl_easy_init());
  }
  if (!easy) {
    Status failure = Status::Internal(request->what + ": libcurl could not make a transfer");
    Answer(std::move(request), std::move(failure));
    return;
  }
  BeginTry(easy.get(), *request, options_);
  if (curl_multi_add_handle(multi_.get(), easy.get()) != CURLM_OK) {
    Status failure = Status::Internal(request->what + ": libcurl could not start the transfer");
    Answer(std::move(request), std::move(failure));
    return;
  }
  counters_.in_flight.fetch_add(1, std::memory_order_relaxed);
  CURL* key = easy.get();
  active_.emplace(key, std::make_pair(std::move(easy), std::move(request)));
}

void S3Client::OnTryDone(CURL* easy, CURLcode code) {
  auto found = active_.find(easy);
  if (found == active_.end()) return;
  CurlEasy handle = std::move(found->second.first);
  std::unique_ptr<Request> request = std::move(found->second.second);
  active_.erase(found);
  curl_multi_remove_handle(multi_.get(), easy);
  counters_.in_flight.fetch_sub(1, std::memory_order_relaxed);
  TryOutcome outcome = Evaluate(*request, code);
  // The handle goes back to the pool; its connection stays in the multi
  // handle's cache for the next request to the same host.
  request->easy = nullptr;
  idle_easies_.push_back(std::move(handle));
  if (outcome.status.ok()) {
    Reply reply = std::move(request->reply);
    reply.headers = request->reply_headers;
    Answer(std::move(request), std::move(reply));
    return;
  }
  if (outcome.retry && request->tries <= options_.max_retries) {
    counters_.retries.fetch_add(1, std::memory_order_relaxed);
    const std::chrono::microseconds delay = RetryDelay(*request);
    backing_off_.emplace(std::chrono::steady_clock::now() + delay, std::move(request));
    return;
  }
  if (outcome.retry) {
    outcome.status = Status(outcome.status.code(), GaveUp(outcome.status, request->tries));
  }
  Answer(std::move(request), std::move(outcome.status));
}

void S3Client::Answer(std::unique_ptr<Request> request, Result<Reply> reply) {
  if (!reply.ok()) counters_.failures.fetch_add(1, std::memory_order_relaxed);
  request->done(std::move(reply));
}

Status CheckOptions(const S3ClientOptions& options) {
  const auto out_of_range = [](const std::string& what) {
    return Status::InvalidArgument("S3 client option " + what);
  };
  if (options.max_in_flight < 1 || options.max_in_flight > 4096) {
    return out_of_range("max_in_flight is " + std::to_string(options.max_in_flight) +
                        "; it must be 1 to 4096");
  }
  if (options.max_retries > 20) {
    return out_of_range("max_retries is " + std::to_string(options.max_retries) +
                        "; it must be 0 to 20");
  }
  if (options.backoff_base.count() < 0 || options.backoff_cap < options.backoff_base) {
    return out_of_range("backoff_cap must be at least backoff_base, both 0 or more");
  }
  if (options.connect_timeout.count() < 1) return out_of_range("connect_timeout must be positive");
  if (options.low_speed_time.count() < 1 || options.low_speed_bytes < 1) {
    return out_of_range("low_speed_time and low_speed_bytes must be positive");
  }
  if (options.list_page_keys < 1 || options.list_page_keys > 1000) {
    return out_of_range("list_page_keys must be 1 to 1000");
  }
  if (options.max_listing_page_bytes < 4096) {
    return out_of_range("max_listing_page_bytes must be at least 4096");
  }
  if (!options.ca_file.empty()) {
    // Read now, so that a wrong path is an error at start, not a refusal
    // of every https request.
    std::FILE* file = std::fopen(options.ca_file.c_str(), "r");
    if (file == nullptr) {
      return Status::InvalidArgument("s3_ca_file " + options.ca_file +
                                     " cannot be read: " + ErrnoText(errno));
    }
    std::fclose(file);
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<ObjectStore>> OpenS3Client(const S3ClientOptions& options) {
  GALLEY_RETURN_IF_ERROR(CheckOptions(options));
  std::vector<EndpointUrl> allowed;
  for (const std::string& entry : options.allowed_endpoints) {
    Result<EndpointUrl> parsed = ParseEndpointUrl(entry);
    if (!parsed.ok()) {
      return Status::InvalidArgument("allowed_s3_endpoints: " + parsed.status().message());
    }
    allowed.push_back(std::move(*parsed));
  }
  if (!InitCurl()) return Status::Internal("libcurl could not be initialised");
  CurlMulti multi(curl_multi_init());
  if (!multi) return Status::Internal("libcurl could not make a multi handle");
  // Idle connections kept for reuse: one per request that may be in flight.
  curl_multi_setopt(multi.get(), CURLMOPT_MAXCONNECTS, static_cast<long>(options.max_in_flight));
  return std::unique_ptr<ObjectStore>(
      std::make_unique<S3Client>(options, std::move(allowed), std::move(multi)));
}

}  // namespace galley::objectstore
