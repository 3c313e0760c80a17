// galleyctl: asks a running galleyd about its state.
//
//   galleyctl [--socket PATH] [--json] status|datasets|jobs|cache|plan
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "galley/client.h"
#include "galley/version.h"

namespace {

// Prints a JSON document as indented "key: value" lines for people.
void PrintHuman(const nlohmann::json& value, int indent = 0) {
  const std::string pad(indent, ' ');
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      if (child.is_structured() && !child.empty()) {
        std::cout << pad << key << ":\n";
        PrintHuman(child, indent + 2);
      } else {
        std::cout << pad << key << ": "
                  << (child.is_string() ? child.get<std::string>() : child.dump()) << "\n";
      }
    }
  } else if (value.is_array()) {
    for (const auto& child : value) {
      if (child.is_structured()) {
        std::cout << pad << "-\n";
        PrintHuman(child, indent + 2);
      } else {
        std::cout << pad << "- " << child.dump() << "\n";
      }
    }
  } else {
    std::cout << pad << value.dump() << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"galleyctl: inspect a running galleyd"};
  galley::ClientOptions options;
  options.client_name = "galleyctl";
  bool as_json = false;
  std::string what = "status";
  app.set_version_flag("--version", std::string("galleyctl ") + galley::kVersion + " (protocol " +
                                        std::to_string(galley::kProtocolVersion) + ")");
  app.add_option("--socket", options.socket_path, "galleyd's control socket");
  app.add_flag("--json", as_json, "print the raw JSON document");
  app.add_option("what", what, "status | datasets | jobs | cache | plan")
      ->check(CLI::IsMember({"status", "datasets", "jobs", "cache", "plan"}));
  CLI11_PARSE(app, argc, argv);

  auto client = galley::Client::Connect(options);
  if (!client.ok()) {
    std::fprintf(stderr, "galleyctl: %s\n", client.status().ToString().c_str());
    return 1;
  }
  auto reply = client->Query(what);
  if (!reply.ok()) {
    std::fprintf(stderr, "galleyctl: %s\n", reply.status().ToString().c_str());
    return 1;
  }
  if (as_json) {
    std::cout << *reply << "\n";
  } else {
    PrintHuman(nlohmann::json::parse(*reply));
  }
  return 0;
}
