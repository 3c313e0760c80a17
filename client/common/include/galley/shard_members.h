// The kinds of a tar shard sample's members, by extension: which member is
// the image when image_key is not given, and which field values galleyd
// checks as JSON, integers or UTF-8 text (server/dataset/sample_fields.cc)
// and the Python package decodes as such (galley/fields.py reads these
// lists through the extension, as galley._galley.shard_member_kinds). The
// one list of each. Constant data; safe from any thread.
#ifndef GALLEY_SHARD_MEMBERS_H_
#define GALLEY_SHARD_MEMBERS_H_

#include <string_view>

namespace galley {

// The image member's extensions, in the order a sample's are tried when the
// job names none (those the decoders read).
inline constexpr std::string_view kShardImageExtensions[] = {"jpg", "jpeg", "png", "webp"};
// Field members whose value must be JSON (Python: json.loads).
inline constexpr std::string_view kJsonMemberExtensions[] = {"json", "jsn"};
// Field members whose value must be a decimal integer (Python: int).
inline constexpr std::string_view kIntegerMemberExtensions[] = {"cls",   "cls2", "class", "count",
                                                                "index", "inx",  "id"};
// Field members whose value must be UTF-8 text (Python: str).
inline constexpr std::string_view kTextMemberExtensions[] = {"txt", "text", "transcript"};

}  // namespace galley

#endif  // GALLEY_SHARD_MEMBERS_H_
