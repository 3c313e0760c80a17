// Sample fields: the checks galleyd makes of a sample's values besides its
// image before they reach a job (JobSpec::fields).
//
// A field travels as bytes and is decoded in the job, but a value that
// cannot be decoded as its name says fails its sample in the daemon, under
// the job's on_error like an image that does not decode. A shard member is
// judged by its extension (its name's last dot-separated part, compared
// lower-case), as the job decodes it: `.json`/`.jsn` must be JSON nesting
// at most kMaxFieldJsonDepth levels; `.cls`, `.cls2`, `.class`, `.count`,
// `.index`, `.inx`, `.id` an integer in text; `.txt`, `.text`,
// `.transcript` UTF-8 text; `.npy` a NumPy file numpy.load reads without
// unpickling. A manifest's value (JSON text) must be UTF-8 and nest at most
// as deep. Other members pass as they are.
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

// How deep a field's JSON may nest: Python's json module recurses once per
// level and stops near sys.getrecursionlimit() (1,000), less the caller's
// own frames.
inline constexpr int kMaxFieldJsonDepth = 500;
// numpy.load's max_header_size: a longer .npy header is refused there.
inline constexpr size_t kMaxNpyHeaderBytes = 10000;

// Ok when shard member value `value` may be served as field `name`; else
// InvalidArgument saying what is wrong with it ("is not valid JSON").
Status CheckFieldValue(std::string_view name, std::span<const uint8_t> value);

// Whether `text` is one JSON value (RFC 8259; UTF-8, an optional byte order
// mark; \u escapes whose surrogates pair up). Checked in place, without a
// copy of any string or number in it.
bool IsJsonText(std::string_view text);

// Ok when a manifest's value (JSON text) may be served: UTF-8, nesting at
// most kMaxFieldJsonDepth levels.
Status CheckManifestValue(std::string_view text);

// InvalidArgument when JSON `text` nests deeper than kMaxFieldJsonDepth.
Status CheckJsonDepth(std::string_view text);

// What a scan that builds nothing finds of JSON `text` (strings skipped):
// how deep it nests arrays and objects, and its top-level container's
// members (its commas at depth 1, plus one).
struct JsonShape {
  int depth = 0;
  size_t top_level_members = 1;
};
JsonShape ScanJsonShape(std::string_view text);

// Whether `text`, less surrounding white space, is a decimal int64.
bool ParseIntegerText(std::string_view text, int64_t* value);

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_SAMPLE_FIELDS_H_
