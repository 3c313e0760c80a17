// JSON bodies of the control-plane messages that carry structured values
// (docs/protocol.md). Parsing is strict: a missing required field, a field of
// the wrong type or a value out of range is an InvalidArgument naming it.
// Pure functions; safe from any thread.
#ifndef GALLEY_WIRE_MESSAGES_H_
#define GALLEY_WIRE_MESSAGES_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "galley/client.h"
#include "galley/job_spec.h"
#include "galley/status.h"

namespace galley::wire {

// Deepest nesting of arrays and objects a message may have. Deeper input is
// refused before parsing: nlohmann's dump and destructor recurse.
inline constexpr int kMaxJsonDepth = 64;

// The most memory a body's parsed form may take, as MeasureJson counts it:
// room for about three million item ids. A few bytes of text can cost a
// hundred once parsed (`[],` is an array), so the text's size alone does not
// bound it.
inline constexpr uint64_t kMaxParsedBytes = uint64_t{96} << 20;

// What parsing `payload` would take in memory, found by one scan that
// builds nothing: 16 bytes per value, 16 more per element of an array, 64
// more per array or object, 96 plus its length per object key, 48 plus its
// length per string. InvalidArgument when its brackets do not match or a
// string does not end, when it is nested more than kMaxJsonDepth deep, or
// when it would take more than `max_parsed_bytes` (the scan stops there).
// Not a validation: ParseObject still parses what passes.
Result<uint64_t> MeasureJson(std::string_view payload, uint64_t max_parsed_bytes = kMaxParsedBytes);

// Parses a payload that must be a JSON object (an empty payload is {}),
// nested at most kMaxJsonDepth deep and measuring at most kMaxParsedBytes
// (MeasureJson) before anything is built.
Result<nlohmann::json> ParseObject(std::string_view payload);

// Serialises `value` without ever throwing: text that is not valid UTF-8
// (a Latin-1 file name, say) has its bad bytes replaced by U+FFFD. For
// replies and diagnostics, where a lossy name beats a dead daemon.
std::string DumpJson(const nlohmann::json& value);
// Serialises `value`, refusing text that is not valid UTF-8 with an
// InvalidArgument naming the problem. For requests, where altering a path
// would silently name another file.
Result<std::string> EncodeJson(const nlohmann::json& value);

// True if `text` is well-formed UTF-8.
bool IsValidUtf8(std::string_view text);
// `text` with every byte that is not part of well-formed UTF-8, and every
// control character, written as \xNN: safe to show and to put in JSON.
std::string EscapeBytes(std::string_view text);

// The OpenJob body (docs/protocol.md §1.4). JobSpecFromJson refuses a field
// it does not know, naming it: both sides speak one protocol version.
nlohmann::json JobSpecToJson(const JobSpec& spec);
// The `s3` object of OpenJob, the listing request and RefreshCredentials.
nlohmann::json ObjectStoreAccessToJson(const ObjectStoreAccess& access);
// InvalidArgument, naming `field`, for anything but an object of the known
// fields (strings of at most 4096 bytes, path_style a boolean).
Result<ObjectStoreAccess> ObjectStoreAccessFromJson(const nlohmann::json& value,
                                                    std::string_view field);
Result<JobSpec> JobSpecFromJson(const nlohmann::json& body);
// The body's field names in protocol order: the one list of them.
std::vector<std::string> JobSpecFieldNames();
// The body's fields that name a dataset, which the listing request below
// shares, in protocol order.
std::vector<std::string> ListingFieldNames();

// The "listing" Query (docs/protocol.md §1.6): the dataset named by the
// OpenJob fields that name one (dataset, shards, image_key, label_key),
// read by the same rules, the first item wanted and the most items wanted
// (absent: UINT64_MAX, as many as a page holds). Another field is refused,
// naming it.
nlohmann::json ListingRequestToJson(const JobSpec& spec, uint64_t begin, uint64_t count);
Result<JobSpec> ListingRequestFromJson(const nlohmann::json& body, uint64_t* begin,
                                       uint64_t* count);

nlohmann::json JobInfoToJson(const JobInfo& info);
Result<JobInfo> JobInfoFromJson(const nlohmann::json& body);

nlohmann::json ErrorToJson(const Status& status);
// Turns an Error body back into the Status it describes.
Status StatusFromErrorJson(const nlohmann::json& body);

}  // namespace galley::wire

#endif  // GALLEY_WIRE_MESSAGES_H_
