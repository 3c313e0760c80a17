// Test support: the route by which one user could read another's images
// through a node-wide tier, and the check that it is closed. Root's dataset
// is made private (files 0600); the other user (nobody) writes a clone of
// it under a folder of their own, with the same relative names, sizes and
// modification times but every file a flat grey 8x8 JPEG padded with zeros,
// and reads one epoch of the clone through galleyd. A tier keyed by what a
// clone can imitate would hand them root's pixels; a sound one serves them
// their own grey.
#ifndef GALLEY_TESTS_INTEGRATION_METADATA_CLONE_H_
#define GALLEY_TESTS_INTEGRATION_METADATA_CLONE_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "galley/client.h"
#include "galley/status.h"
#include "tests/integration/other_user.h"

namespace galley::testing {

// Each served sample's bytes by item id.
using SamplesById = std::map<uint64_t, std::vector<uint8_t>>;

// Opens `parent` to other users (0755) and makes every file below `data`
// root's alone (0600; folders 0755); returns the files' names relative to
// `data`.
std::vector<std::string> MakeFilesPrivate(const std::filesystem::path& parent,
                                          const std::filesystem::path& data);

struct MetadataClone {
  std::filesystem::path data;          // root's private dataset
  std::vector<std::string> relative;   // its files (MakeFilesPrivate)
  std::filesystem::path clone;         // the other user's copy, made here
  std::string socket;                  // galleyd's
  JobSpec spec;                        // one epoch of `clone`
  const SamplesById* private_samples;  // what root's epoch served
  // Run as the other user before the clone is written; may be empty.
  std::function<Status()> first;
};

// Makes `clone.clone` (owned by nobody), then, as nobody, runs `first`,
// writes the clone and reads one epoch of it. The Outcome's message on
// success is "<served> <samples equal to root's> <samples flat grey>".
Outcome ReadAMetadataCloneAsNobody(const MetadataClone& clone);

}  // namespace galley::testing

#endif  // GALLEY_TESTS_INTEGRATION_METADATA_CLONE_H_
