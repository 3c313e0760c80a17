#include "galley/job_spec.h"

#include "wire/messages.h"

namespace galley {

Result<JobSpec> ParseJobSpec(std::string_view json_text) {
  GALLEY_ASSIGN_OR_RETURN(auto body, wire::ParseObject(json_text));
  return wire::JobSpecFromJson(body);
}

std::vector<std::string> JobSpecFieldNames() { return wire::JobSpecFieldNames(); }

}  // namespace galley
