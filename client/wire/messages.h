// JSON bodies of the control-plane messages that carry structured values
// (docs/protocol.md). Parsing is strict: a missing required field, a field of
// the wrong type or a value out of range is an InvalidArgument naming it.
// Pure functions; safe from any thread.
#ifndef GALLEY_WIRE_MESSAGES_H_
#define GALLEY_WIRE_MESSAGES_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "galley/client.h"
#include "galley/job_spec.h"
#include "galley/status.h"

namespace galley::wire {

// Parses a payload that must be a JSON object (an empty payload is {}).
Result<nlohmann::json> ParseObject(std::string_view payload);

nlohmann::json JobSpecToJson(const JobSpec& spec);
Result<JobSpec> JobSpecFromJson(const nlohmann::json& body);

nlohmann::json JobInfoToJson(const JobInfo& info);
Result<JobInfo> JobInfoFromJson(const nlohmann::json& body);

nlohmann::json ErrorToJson(const Status& status);
// Turns an Error body back into the Status it describes.
Status StatusFromErrorJson(const nlohmann::json& body);

}  // namespace galley::wire

#endif  // GALLEY_WIRE_MESSAGES_H_
