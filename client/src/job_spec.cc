#include "galley/job_spec.h"

#include <algorithm>

#include "wire/messages.h"

namespace galley {

Result<JobSpec> ParseJobSpec(std::string_view json_text) {
  GALLEY_ASSIGN_OR_RETURN(auto body, wire::ParseObject(json_text));
  return wire::JobSpecFromJson(body);
}

std::vector<std::string> JobSpecFieldNames() { return wire::JobSpecFieldNames(); }

std::vector<std::string> ListingFieldNames() { return wire::ListingFieldNames(); }

uint64_t FieldAreaBytes(const JobSpec& spec) {
  if (spec.fields.empty()) return 0;
  if (spec.field_batch_bytes != 0) return spec.field_batch_bytes;
  return std::max<uint64_t>(uint64_t{spec.batch_size} << 16, spec.max_member_bytes);
}

}  // namespace galley
