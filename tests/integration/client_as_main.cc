// galley_client_as: a client that runs as another user, for tests whose
// daemon is built in the test's own process (in_process_daemon.h). The test
// starts it with posix_spawn (ChildAs's ClientSteps constructor,
// other_user.h), so no code of the test's process runs in the child between
// fork and exec: a child forked beside the daemon's threads could inherit a
// lock one of them held (under AddressSanitizer such a child hung).
//
//   galley_client_as UID GID GROUPS SOCKET STEP...
//
// It drops to UID, GID and the supplementary GROUPS (comma-separated, "-"
// for none) before anything else, connects to SOCKET and runs the steps in
// order, stopping at the first that fails. A <job body> is the JSON of
// wire::JobSpecToJson, as an OpenJob request carries it.
//   open=<job body>      opens a job and holds it; its output is
//                        "opened: segment_bytes N"
//   epoch=<job body>     opens a job, reads its first epoch whole and
//                        closes it; its output is "epoch: N items"
//   read_until_error     reads the batches of the job the last open step
//                        holds until one fails: that failure is the
//                        step's (a job that is never ended is a hang,
//                        which ChildAs's report bound ends)
//   listing=<job body>   asks for the dataset's listing, every item from
//                        the first on; its output is the reply
//   query=<name>         asks the query; its output is the reply
//   cancel=<job id>      cancels that job; its output is "cancelled"
//   forget=<dataset>     forgets that dataset's listing; output "forgotten"
//   drain                asks the daemon to drain; its output is "draining"
// On stdout it writes one report in ChildAs's form, "<code>\n<message>":
// the failing step's StatusCode, or 0, and as the message each finished
// step's output on a line of its own, then "step N: <its message>" for the
// step that failed. It then closes stdout and holds its jobs and connection
// until stdin closes (ChildAs::Release), and exits 0.
#include <grp.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "galley/client.h"
#include "wire/messages.h"

namespace galley {
namespace {

// Supplementary groups from "-" or "10,20".
bool ParseGroups(const std::string& text, std::vector<gid_t>* groups) {
  if (text == "-") return true;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    char* end = nullptr;
    const unsigned long id = std::strtoul(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0') return false;
    groups->push_back(static_cast<gid_t>(id));
  }
  return true;
}

Status DropTo(const char* uid_text, const char* gid_text, const char* groups_text) {
  std::vector<gid_t> groups;
  if (!ParseGroups(groups_text, &groups)) return Status::InvalidArgument("bad groups");
  const auto uid = static_cast<uid_t>(std::strtoul(uid_text, nullptr, 10));
  const auto gid = static_cast<gid_t>(std::strtoul(gid_text, nullptr, 10));
  if (::setgroups(groups.size(), groups.data()) != 0 || ::setresgid(gid, gid, gid) != 0 ||
      ::setresuid(uid, uid, uid) != 0) {
    return Status::Internal("cannot drop privileges");
  }
  return Status::Ok();
}

// What the client holds until it is released.
struct Held {
  std::vector<Job> jobs;
};

// How long one batch may take: a bound on a hang (a loaded machine, a
// sanitized build), not a measurement.
constexpr std::chrono::seconds kBatchBound{60};

// The job a step's "<name>=<job body>" names.
Result<JobSpec> SpecOf(std::string_view body_text) {
  const auto body = nlohmann::json::parse(body_text, nullptr, false);
  if (body.is_discarded()) return Status::InvalidArgument("the step's job body is not JSON");
  return wire::JobSpecFromJson(body);
}

// The text after "<name>=" when `step` is one, else nullopt.
std::optional<std::string_view> ArgumentOf(std::string_view step, std::string_view name) {
  if (step.size() <= name.size() || !step.starts_with(name) || step[name.size()] != '=') {
    return std::nullopt;
  }
  return step.substr(name.size() + 1);
}

Result<uint64_t> ReadEpoch(Job& job) {
  uint64_t items = 0;
  while (true) {
    GALLEY_ASSIGN_OR_RETURN(Batch batch, job.Next(kBatchBound));
    items += batch.size();
    if (batch.last_in_epoch()) return items;
  }
}

// Runs one step; its output on success.
Result<std::string> RunStep(Client& client, std::string_view step, Held* held) {
  if (auto body = ArgumentOf(step, "open")) {
    GALLEY_ASSIGN_OR_RETURN(JobSpec spec, SpecOf(*body));
    GALLEY_ASSIGN_OR_RETURN(Job job, client.OpenJob(spec));
    const std::string output = "opened: segment_bytes " + std::to_string(job.info().segment_bytes);
    held->jobs.push_back(std::move(job));
    return output;
  }
  if (auto body = ArgumentOf(step, "epoch")) {
    GALLEY_ASSIGN_OR_RETURN(JobSpec spec, SpecOf(*body));
    GALLEY_ASSIGN_OR_RETURN(Job job, client.OpenJob(spec));
    GALLEY_ASSIGN_OR_RETURN(uint64_t items, ReadEpoch(job));
    return "epoch: " + std::to_string(items) + " items";
  }
  if (step == "read_until_error") {
    if (held->jobs.empty()) return Status::InvalidArgument("read_until_error: no job is open");
    while (true) {
      auto batch = held->jobs.back().Next(kBatchBound);
      if (!batch.ok()) return batch.status();
    }
  }
  if (auto body = ArgumentOf(step, "listing")) {
    GALLEY_ASSIGN_OR_RETURN(JobSpec spec, SpecOf(*body));
    return client.Listing(spec, 0);
  }
  if (auto name = ArgumentOf(step, "query")) return client.Query(std::string(*name));
  if (auto id = ArgumentOf(step, "cancel")) {
    uint64_t job_id = 0;
    const auto [end, error] = std::from_chars(id->data(), id->data() + id->size(), job_id);
    if (error != std::errc() || end != id->data() + id->size()) {
      return Status::InvalidArgument("cancel: '" + std::string(*id) + "' is not a job id");
    }
    GALLEY_RETURN_IF_ERROR(client.Cancel(job_id));
    return std::string("cancelled");
  }
  if (auto dataset = ArgumentOf(step, "forget")) {
    GALLEY_RETURN_IF_ERROR(client.Forget(std::string(*dataset)));
    return std::string("forgotten");
  }
  if (step == "drain") {
    GALLEY_RETURN_IF_ERROR(client.Drain());
    return std::string("draining");
  }
  return Status::InvalidArgument("unknown step " + std::string(step));
}

// The report: the first failure's code, or 0, and the steps' outputs.
Status RunSteps(const std::string& socket, const std::vector<std::string>& steps, Held* held) {
  ClientOptions options;
  options.socket_path = socket;
  // A bound on a hang on a busy machine, as the tests give their own
  // clients.
  options.request_timeout = std::chrono::seconds(30);
  GALLEY_ASSIGN_OR_RETURN(Client client, Client::Connect(options));
  std::string outputs;
  for (size_t i = 0; i < steps.size(); ++i) {
    auto output = RunStep(client, steps[i], held);
    if (!output.ok()) {
      return Status(output.status().code(),
                    outputs + "step " + std::to_string(i + 1) + ": " + output.status().message());
    }
    outputs += *output + (i + 1 < steps.size() ? "\n" : "");
  }
  // The connection is not needed to hold the jobs: each has its own.
  return Status(StatusCode::kOk, outputs);
}

int Main(int argc, char** argv) {
  Held held;
  Status status = Status::InvalidArgument("usage: galley_client_as UID GID GROUPS SOCKET STEP...");
  if (argc >= 5) {
    status = DropTo(argv[1], argv[2], argv[3]);
    if (status.ok())
      status = RunSteps(argv[4], std::vector<std::string>(argv + 5, argv + argc), &held);
  }
  const std::string report =
      std::to_string(static_cast<int>(status.code())) + "\n" + status.message();
  (void)!::write(STDOUT_FILENO, report.data(), report.size());
  ::close(STDOUT_FILENO);
  char byte;
  (void)!::read(STDIN_FILENO, &byte, 1);  // returns at Release, or when the test ends
  return 0;
}

}  // namespace
}  // namespace galley

int main(int argc, char** argv) { return galley::Main(argc, argv); }
