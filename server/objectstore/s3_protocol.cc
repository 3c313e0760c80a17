#include "galley/objectstore/s3_protocol.h"

#include <algorithm>
#include <charconv>
#include <pugixml.hpp>
#include <utility>

namespace galley::objectstore {

namespace {

char LowerAscii(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), LowerAscii);
  return out;
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (LowerAscii(a[i]) != LowerAscii(b[i])) return false;
  }
  return true;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r' ||
                           text.back() == '\n')) {
    text.remove_suffix(1);
  }
  return text;
}

// A decimal without sign, spaces or overflow.
std::optional<uint64_t> ParseDecimal(std::string_view text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || IsDigit(c); }

uint16_t DefaultPort(std::string_view scheme) { return scheme == "https" ? 443 : 80; }

std::string Authority(const EndpointUrl& endpoint) {
  return endpoint.port == 0 ? endpoint.host : endpoint.host + ":" + std::to_string(endpoint.port);
}

// AWS region names: "us-east-1", "eu-central-2", "us-gov-west-1".
bool IsRegionName(std::string_view region) {
  if (region.empty() || region.size() > 32) return false;
  return std::all_of(region.begin(), region.end(),
                     [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

// "s3.<region>.amazonaws.com", AWS's regional endpoint.
bool IsAwsRegionalHost(std::string_view host) {
  constexpr std::string_view kPrefix = "s3.";
  constexpr std::string_view kSuffix = ".amazonaws.com";
  if (host.size() <= kPrefix.size() + kSuffix.size()) return false;
  if (host.substr(0, kPrefix.size()) != kPrefix) return false;
  if (host.substr(host.size() - kSuffix.size()) != kSuffix) return false;
  return IsRegionName(host.substr(kPrefix.size(), host.size() - kPrefix.size() - kSuffix.size()));
}

// Only printable ASCII of a peer's text goes into a message, and not much.
std::string Printable(std::string_view text, size_t max_chars) {
  std::string out;
  for (char c : text) {
    if (out.size() >= max_chars) break;
    if (c >= 0x20 && c < 0x7f) out.push_back(c);
  }
  return out;
}

// An element's name without a namespace prefix ("s3:Key" -> "Key").
std::string_view LocalName(const pugi::xml_node& node) {
  std::string_view name = node.name();
  const size_t colon = name.find(':');
  return colon == std::string_view::npos ? name : name.substr(colon + 1);
}

pugi::xml_node Child(const pugi::xml_node& parent, std::string_view name) {
  for (pugi::xml_node child = parent.first_child(); child; child = child.next_sibling()) {
    if (child.type() == pugi::node_element && LocalName(child) == name) return child;
  }
  return {};
}

Result<pugi::xml_document*> LoadXml(pugi::xml_document* doc, std::string_view xml) {
  // No DOCTYPE processing exists in pugixml: entities other than the five
  // predefined ones stay text, so a listing cannot pull in files or grow.
  const pugi::xml_parse_result parsed =
      doc->load_buffer(xml.data(), xml.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!parsed) {
    return Status::ProtocolError(std::string("the reply is no XML document (") +
                                 parsed.description() + " at byte " +
                                 std::to_string(parsed.offset) + ")");
  }
  return doc;
}

}  // namespace

std::string EndpointUrl::ToString() const { return scheme + "://" + Authority(*this); }

bool EndpointUrl::IsIpLiteral() const {
  if (!host.empty() && host.front() == '[') return true;
  return !host.empty() &&
         std::all_of(host.begin(), host.end(), [](char c) { return IsDigit(c) || c == '.'; });
}

Result<EndpointUrl> ParseEndpointUrl(std::string_view url) {
  const auto invalid = [&](std::string_view why) {
    return Status::InvalidArgument("S3 endpoint \"" + Printable(url, 200) + "\" " +
                                   std::string(why) +
                                   "; write scheme://host[:port] with http or https, no path");
  };
  EndpointUrl endpoint;
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return invalid("has no scheme");
  endpoint.scheme = Lower(url.substr(0, scheme_end));
  if (endpoint.scheme != "http" && endpoint.scheme != "https") {
    return invalid("is neither http nor https");
  }
  std::string_view authority = url.substr(scheme_end + 3);
  if (!authority.empty() && authority.back() == '/') authority.remove_suffix(1);
  if (authority.find_first_of("/?#@\\") != std::string_view::npos) {
    return invalid("has a path, query or user part");
  }
  std::string_view host;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return invalid("has an unclosed IPv6 address");
    host = authority.substr(0, close + 1);
    const std::string_view inside = host.substr(1, host.size() - 2);
    const bool v6_chars = !inside.empty() && std::all_of(inside.begin(), inside.end(), [](char c) {
      return IsDigit(c) || (LowerAscii(c) >= 'a' && LowerAscii(c) <= 'f') || c == ':' || c == '.';
    });
    if (!v6_chars) return invalid("has a malformed IPv6 address");
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return invalid("has text after its IPv6 address");
      port = after.substr(1);
      if (port.empty()) return invalid("has an empty port");
    }
  } else {
    const size_t colon = authority.find(':');
    host = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) return invalid("has an empty port");
    }
    const bool host_chars = std::all_of(host.begin(), host.end(), [](char c) {
      return IsLowerAlnum(LowerAscii(c)) || c == '.' || c == '-';
    });
    if (host.empty() || host.size() > 253 || !host_chars || host.front() == '.' ||
        host.front() == '-') {
      return invalid("has no valid host name");
    }
  }
  endpoint.host = Lower(host);
  if (!port.empty()) {
    const std::optional<uint64_t> number = ParseDecimal(port);
    if (!number || *number == 0 || *number > 65535) return invalid("has a port outside 1-65535");
    endpoint.port = static_cast<uint16_t>(*number);
    if (endpoint.port == DefaultPort(endpoint.scheme)) endpoint.port = 0;
  }
  return endpoint;
}

Result<EndpointUrl> ResolveEndpoint(const Endpoint& endpoint,
                                    const std::vector<EndpointUrl>& allowed) {
  if (!IsRegionName(endpoint.region)) {
    return Status::InvalidArgument("S3 region \"" + Printable(endpoint.region, 64) +
                                   "\" is no region name (like us-east-1)");
  }
  EndpointUrl resolved;
  if (endpoint.url.empty()) {
    resolved.scheme = "https";
    resolved.host = "s3." + endpoint.region + ".amazonaws.com";
  } else {
    GALLEY_ASSIGN_OR_RETURN(resolved, ParseEndpointUrl(endpoint.url));
  }
  const bool listed =
      allowed.empty()
          ? resolved.scheme == "https" && resolved.port == 0 && IsAwsRegionalHost(resolved.host)
          : std::find(allowed.begin(), allowed.end(), resolved) != allowed.end();
  if (!listed) {
    return Status::InvalidArgument(
        "S3 endpoint " + resolved.ToString() +
        " is not allowed on this node: galleyd sends requests only to the endpoints its "
        "allowed_s3_endpoints option lists" +
        (allowed.empty() ? " (none: AWS's https://s3.<region>.amazonaws.com only)" : "") +
        "; ask the node's administrator to add it");
  }
  if (!endpoint.path_style && resolved.IsIpLiteral()) {
    return Status::InvalidArgument("S3 endpoint " + resolved.ToString() +
                                   " is an IP address, which has no bucket host names: use "
                                   "path-style addressing (addressing_style = path)");
  }
  return resolved;
}

Status CheckBucketName(std::string_view bucket) {
  bool valid = bucket.size() >= 3 && bucket.size() <= 63 && IsLowerAlnum(bucket.front()) &&
               IsLowerAlnum(bucket.back());
  for (char c : bucket) valid = valid && (IsLowerAlnum(c) || c == '.' || c == '-');
  if (valid) return Status::Ok();
  return Status::InvalidArgument("\"" + Printable(bucket, 80) +
                                 "\" is no S3 bucket name (3 to 63 of a-z, 0-9, '.' and '-', "
                                 "starting and ending with a letter or digit)");
}

Status CheckKey(std::string_view key, bool may_be_empty) {
  if (key.empty() && !may_be_empty) {
    return Status::InvalidArgument("an S3 object key is empty");
  }
  if (key.size() > 1024) {
    return Status::InvalidArgument("S3 key \"" + Printable(key, 80) + "...\" is " +
                                   std::to_string(key.size()) +
                                   " bytes long; S3 keys have at most 1024");
  }
  return Status::Ok();
}

Status CheckHeaderValue(std::string_view value, std::string_view what) {
  const bool clean = std::all_of(value.begin(), value.end(), [](char c) {
    return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
  });
  if (clean) return Status::Ok();
  return Status::InvalidArgument(std::string(what) +
                                 " holds a control character (a line break?); check how it "
                                 "was written");
}

std::string UriEncode(std::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size() * 3);
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    const bool unreserved = IsLowerAlnum(LowerAscii(c)) || c == '-' || c == '.' || c == '_' ||
                            c == '~' || (keep_slash && c == '/');
    if (unreserved) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xf]);
    }
  }
  return out;
}

std::string ObjectUrl(const EndpointUrl& endpoint, bool path_style, std::string_view bucket,
                      std::string_view key) {
  if (path_style) {
    return endpoint.ToString() + "/" + UriEncode(bucket, false) + "/" + UriEncode(key, true);
  }
  return endpoint.scheme + "://" + std::string(bucket) + "." + Authority(endpoint) + "/" +
         UriEncode(key, true);
}

std::string ListUrl(const EndpointUrl& endpoint, bool path_style, std::string_view bucket,
                    std::string_view prefix, std::string_view continuation_token,
                    uint32_t max_keys) {
  // Already in the byte order of the parameter names, as SigV4's canonical
  // query orders them.
  std::string query;
  if (!continuation_token.empty()) {
    query += "continuation-token=" + UriEncode(continuation_token, false) + "&";
  }
  query +=
      "list-type=2&max-keys=" + std::to_string(max_keys) + "&prefix=" + UriEncode(prefix, false);
  if (path_style) return endpoint.ToString() + "/" + UriEncode(bucket, false) + "?" + query;
  return endpoint.scheme + "://" + std::string(bucket) + "." + Authority(endpoint) + "/?" + query;
}

std::string DescribeRequest(const EndpointUrl& endpoint, std::string_view bucket,
                            std::string_view key) {
  return "s3://" + std::string(bucket) + "/" + Printable(key, 300) + " at " + endpoint.ToString();
}

void ReplyHeaders::AddLine(std::string_view line) {
  if (line.size() >= 5 && line.substr(0, 5) == "HTTP/") {
    *this = ReplyHeaders();
    return;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return;
  const std::string_view name = Trim(line.substr(0, colon));
  const std::string_view value = Trim(line.substr(colon + 1));
  if (EqualsNoCase(name, "content-range")) {
    content_range_ = std::string(value);
  } else if (EqualsNoCase(name, "content-length")) {
    content_length_ = ParseDecimal(value);
  } else if (EqualsNoCase(name, "etag")) {
    etag_ = StripEtag(value);
  } else if (EqualsNoCase(name, "location")) {
    location_ = std::string(value);
  } else if (EqualsNoCase(name, "retry-after")) {
    retry_after_ = std::string(value.substr(0, 64));
  }
}

std::chrono::seconds RetryAfterDelay(std::string_view value, int64_t now,
                                     int64_t (*parse_date)(const std::string&)) {
  constexpr int64_t kMostSeconds = 24 * 3600;
  value = Trim(value);
  if (value.empty()) return std::chrono::seconds(0);
  int64_t seconds = 0;
  if (std::optional<uint64_t> delay = ParseDecimal(value)) {
    seconds = static_cast<int64_t>(std::min<uint64_t>(*delay, kMostSeconds));
  } else if (const int64_t when = parse_date(std::string(value)); when >= 0) {
    seconds = when - now;
  }
  return std::chrono::seconds(std::clamp<int64_t>(seconds, 0, kMostSeconds));
}

std::optional<ContentRange> ParseContentRange(std::string_view value) {
  value = Trim(value);
  if (value.size() < 6 || !EqualsNoCase(value.substr(0, 6), "bytes ")) return std::nullopt;
  value.remove_prefix(6);
  const size_t dash = value.find('-');
  const size_t slash = value.find('/');
  if (dash == std::string_view::npos || slash == std::string_view::npos || slash < dash) {
    return std::nullopt;
  }
  ContentRange range;
  const std::optional<uint64_t> first = ParseDecimal(value.substr(0, dash));
  const std::optional<uint64_t> last = ParseDecimal(value.substr(dash + 1, slash - dash - 1));
  if (!first || !last || *first > *last) return std::nullopt;
  range.first = *first;
  range.last = *last;
  const std::string_view total = value.substr(slash + 1);
  if (total != "*") {
    range.total = ParseDecimal(total);
    if (!range.total || *range.total <= range.last) return std::nullopt;
  }
  return range;
}

std::string StripEtag(std::string_view etag) {
  etag = Trim(etag);
  if (etag.size() >= 2 && etag.substr(0, 2) == "W/") etag.remove_prefix(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return std::string(etag);
}

GetReplyBody::GetReplyBody(uint64_t offset, uint64_t length, uint64_t open_ended_cap)
    : offset_(offset), length_(length), open_ended_cap_(open_ended_cap) {}

Status GetReplyBody::Begin(long http_status, const ReplyHeaders& headers) {
  begun_ = true;
  const bool ranged = offset_ > 0 || length_ > 0;
  const std::string end_text =
      length_ > 0 ? std::to_string(offset_ + length_ - 1) : std::string("the end");
  const std::string asked = "bytes " + std::to_string(offset_) + "-" + end_text;
  if (!headers.content_range().empty() && (http_status == 200 || http_status == 206)) {
    const std::optional<ContentRange> range = ParseContentRange(headers.content_range());
    if (!range) {
      status_ = Status::ProtocolError("the reply's Content-Range \"" +
                                      Printable(headers.content_range(), 100) +
                                      "\" is malformed (asked " + asked + ")");
      return status_;
    }
    const uint64_t declared = range->last - range->first + 1;
    const bool ends_with_object = range->total && range->last + 1 == *range->total;
    const bool too_long = length_ > 0 && declared > length_;
    const bool short_early = length_ > 0 && declared < length_ && !ends_with_object;
    const bool open_ended_short = length_ == 0 && range->total && !ends_with_object;
    if (range->first != offset_ || too_long || short_early || open_ended_short) {
      status_ =
          Status::ProtocolError("the reply holds bytes " + std::to_string(range->first) + "-" +
                                std::to_string(range->last) + ", not the " + asked + " asked");
      return status_;
    }
    limit_ = declared;
    sized_ = true;
  } else if (http_status == 200) {
    // The whole object: from a server that ignores Range, or for a GET
    // that asked for all of it.
    whole_object_ = ranged;
    skip_ = offset_;
    const std::optional<uint64_t> size = headers.content_length();
    if (size && *size <= offset_ && ranged) {
      status_ = Status::DataLoss("the object has " + std::to_string(*size) +
                                 " bytes, fewer than the " + asked + " asked");
      return status_;
    }
    if (length_ > 0) {
      limit_ = length_;
      sized_ = true;
    } else if (size) {
      limit_ = *size - offset_;
      sized_ = true;
    } else {
      limit_ = open_ended_cap_;
    }
  } else {
    status_ = Status::ProtocolError(
        "the store answered " + std::to_string(http_status) +
        (http_status == 206 ? " without a Content-Range" : " where 200 or 206 was expected") +
        " (asked " + asked + ")");
    return status_;
  }
  if (length_ == 0 && sized_ && limit_ > open_ended_cap_) {
    status_ = Status::ResourceExhausted("the object's " + std::to_string(limit_) +
                                        " bytes from byte " + std::to_string(offset_) +
                                        " are more than a read to its end may bring into memory (" +
                                        std::to_string(open_ended_cap_) + " bytes)");
    return status_;
  }
  return Status::Ok();
}

GetReplyBody::Progress GetReplyBody::Add(std::span<const uint8_t> data, const Sink& sink) {
  if (!status_.ok()) return Progress::kFailed;
  if (!begun_) {
    status_ = Status::ProtocolError("a reply body came before its headers");
    return Progress::kFailed;
  }
  const uint64_t skipped = std::min<uint64_t>(skip_, data.size());
  skip_ -= skipped;
  data = data.subspan(skipped);
  const uint64_t room = limit_ - kept_;
  bool complete = false;
  if (data.size() > room) {
    if (whole_object_ && length_ > 0) {
      complete = true;  // the rest of the object is not needed
    } else if (!sized_) {
      status_ = Status::ResourceExhausted(
          "the object is larger than a read to its end may bring into memory (" +
          std::to_string(open_ended_cap_) + " bytes)");
      return Progress::kFailed;
    } else {
      status_ = Status::ProtocolError("the reply's body is longer than the " +
                                      std::to_string(limit_) + " bytes it declares");
      return Progress::kFailed;
    }
    data = data.subspan(0, room);
  }
  if (!data.empty()) {
    Status sunk = sink(data);
    if (!sunk.ok()) {
      status_ = std::move(sunk);
      return Progress::kFailed;
    }
    kept_ += data.size();
  }
  if (whole_object_ && length_ > 0 && kept_ == limit_) complete = true;
  return complete ? Progress::kComplete : Progress::kMore;
}

Status GetReplyBody::Finish() const {
  if (!status_.ok()) return status_;
  if (!begun_) return Status::ProtocolError("the reply ended before its headers");
  const uint64_t wanted = length_ > 0 ? length_ : (sized_ ? limit_ : 0);
  if (kept_ < wanted) {
    return Status::DataLoss("the reply ended after " + std::to_string(kept_) + " of the " +
                            std::to_string(wanted) + " bytes asked from byte " +
                            std::to_string(offset_) +
                            " (the object is shorter than the dataset expects)");
  }
  return Status::Ok();
}

std::string S3ErrorCode(std::string_view body) {
  pugi::xml_document doc;
  if (!LoadXml(&doc, body).ok()) return "";
  const pugi::xml_node root = doc.document_element();
  if (LocalName(root) != "Error") return "";
  std::string code = Printable(Child(root, "Code").child_value(), 64);
  code.erase(std::remove(code.begin(), code.end(), ' '), code.end());
  return code;
}

bool IsRetryableHttpStatus(long http_status) {
  return http_status == 408 || http_status == 429 || (http_status >= 500 && http_status <= 599);
}

Status StatusForHttpReply(long http_status, const ReplyHeaders& headers, std::string_view body,
                          std::string_view what) {
  const std::string code = S3ErrorCode(body);
  const std::string answer =
      "(" + std::to_string(http_status) + (code.empty() ? "" : " " + code) + ")";
  const std::string where(what);
  if (http_status >= 300 && http_status <= 399) {
    // Only the redirect's scheme and host: its query could carry a
    // presigned URL's signature.
    std::string target;
    const std::string_view location = headers.location();
    const size_t scheme_end = location.find("://");
    if (scheme_end != std::string_view::npos) {
      const size_t path = location.find_first_of("/?#", scheme_end + 3);
      if (Result<EndpointUrl> to = ParseEndpointUrl(location.substr(0, path)); to.ok()) {
        target = " to " + to->ToString();
      }
    }
    return Status::InvalidArgument(where + ": the store redirects " + answer + target +
                                   ", and galleyd follows no redirects: set the endpoint and "
                                   "region the bucket is served from");
  }
  if ((http_status == 400 || http_status == 401 || http_status == 403) &&
      (code == "ExpiredToken" || code == "TokenRefreshRequired" || code == "InvalidToken" ||
       code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch")) {
    return Status::PermissionDenied(
        where + ": " + std::string(kCredentialRefusalWords) + " " + answer +
        ": they expired or were revoked, and no job reading this dataset has sent galleyd "
        "fresh ones (the galley client re-resolves them while a job runs: docs/access.md)");
  }
  if (http_status == 401 || http_status == 403) {
    return Status::PermissionDenied(where + ": access denied " + answer +
                                    ": check the job's AWS credentials and that they may read "
                                    "this object");
  }
  if (http_status == 404) {
    return Status::NotFound(
        where + ": " + (code == "NoSuchBucket" ? "no such bucket " : "no such object ") + answer);
  }
  if (http_status == 412) {
    return Status::DataLoss(where + ": the object changed " + answer +
                            ": it is no longer the version (ETag) the dataset was listed with");
  }
  if (http_status == 416) {
    return Status::DataLoss(where + ": the object is shorter than the range read " + answer +
                            ": it changed since the dataset was listed");
  }
  if (IsRetryableHttpStatus(http_status)) {
    return Status::Unavailable(where + ": the store answered " + answer);
  }
  if (http_status >= 400 && http_status <= 499) {
    return Status::InvalidArgument(where + ": the store refused the request " + answer);
  }
  return Status::ProtocolError(where + ": unexpected HTTP status " + answer);
}

Result<ListingPage> ParseListingPage(std::string_view xml) {
  pugi::xml_document doc;
  GALLEY_RETURN_IF_ERROR(LoadXml(&doc, xml).status());
  const pugi::xml_node root = doc.document_element();
  if (LocalName(root) == "Error") {
    return Status::ProtocolError("the listing is an error: " + S3ErrorCode(xml));
  }
  if (LocalName(root) != "ListBucketResult") {
    return Status::ProtocolError("the reply is no ListObjectsV2 page (its root element is <" +
                                 Printable(root.name(), 64) + ">)");
  }
  ListingPage page;
  for (pugi::xml_node node = root.first_child(); node; node = node.next_sibling()) {
    if (node.type() != pugi::node_element) continue;
    const std::string_view name = LocalName(node);
    if (name == "IsTruncated") {
      const std::string_view value = Trim(node.child_value());
      if (value != "true" && value != "false") {
        return Status::ProtocolError("the listing's IsTruncated is \"" + Printable(value, 32) +
                                     "\", neither true nor false");
      }
      page.truncated = value == "true";
    } else if (name == "NextContinuationToken") {
      page.next_continuation_token = node.child_value();
    } else if (name == "Contents") {
      ObjectInfo info;
      info.key = Child(node, "Key").child_value();
      const std::optional<uint64_t> size = ParseDecimal(Trim(Child(node, "Size").child_value()));
      if (info.key.empty() || !size) {
        return Status::ProtocolError(
            "the listing has an entry without a key or a size (after \"" +
            Printable(page.objects.empty() ? std::string_view("") : page.objects.back().key, 200) +
            "\")");
      }
      info.size = *size;
      info.etag = StripEtag(Child(node, "ETag").child_value());
      page.objects.push_back(std::move(info));
    }
  }
  if (page.truncated && page.next_continuation_token.empty()) {
    return Status::ProtocolError("the listing is truncated but gives no NextContinuationToken");
  }
  return page;
}

}  // namespace galley::objectstore
