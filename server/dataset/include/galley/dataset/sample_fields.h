// Sample fields: the checks galleyd makes of a sample's members besides its
// image before they reach a job (JobSpec::fields).
//
// A field travels as bytes and is decoded in the job, but a member that
// cannot be what its name says fails its sample in the daemon, under the
// job's on_error like an image that does not decode: `.json` must be JSON,
// `.cls` and `.index` an integer in text. Names are compared lower-case,
// the way shard members are grouped. Other members pass as they are.
//
// Thread-safety: plain functions of their arguments.
#ifndef GALLEY_SERVER_DATASET_SAMPLE_FIELDS_H_
#define GALLEY_SERVER_DATASET_SAMPLE_FIELDS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "galley/status.h"

namespace galley {

// Fields a source fills from what it knows of the sample rather than from
// a member: the sample's key, and the shard (or manifest) holding it, as
// webdataset names them.
inline constexpr std::string_view kKeyField = "__key__";
inline constexpr std::string_view kUrlField = "__url__";

inline bool IsSyntheticField(std::string_view name) {
  return name == kKeyField || name == kUrlField;
}

// Ok when `value` may be served as field `name`; else InvalidArgument
// saying what is wrong with it ("is not valid JSON: ...").
Status CheckFieldValue(std::string_view name, std::span<const uint8_t> value);

// Whether `text` is one JSON value (RFC 8259; UTF-8, an optional byte order
// mark; \u escapes whose surrogates pair up). Checked in place, without a
// copy of any string or number in it.
bool IsJsonText(std::string_view text);

// Whether `text`, less surrounding white space, is a decimal int64.
bool ParseIntegerText(std::string_view text, int64_t* value);

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_SAMPLE_FIELDS_H_
