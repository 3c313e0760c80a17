#include "tests/integration/metadata_clone.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

namespace galley::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::vector<std::string> MakeFilesPrivate(const fs::path& parent, const fs::path& data) {
  fs::permissions(parent, fs::perms(0755));
  std::vector<std::string> relative;
  for (const auto& entry : fs::recursive_directory_iterator(data)) {
    fs::permissions(entry.path(), fs::perms(entry.is_directory() ? 0755 : 0600));
    if (entry.is_regular_file()) relative.push_back(fs::relative(entry.path(), data).string());
  }
  return relative;
}

namespace {

// As the other user: the clone's files, each `grey` padded to its
// original's size (after the JPEG's end), with its original's times.
Status WriteClone(const MetadataClone& clone, const std::vector<uint8_t>& grey) {
  for (const std::string& name : clone.relative) {
    struct stat info {};
    if (::stat((clone.data / name).c_str(), &info) != 0) return Status::Internal("stat " + name);
    const fs::path path = clone.clone / name;
    fs::create_directories(path.parent_path());
    if (static_cast<size_t>(info.st_size) < grey.size()) return Status::Internal("small");
    std::vector<uint8_t> bytes = grey;
    bytes.resize(static_cast<size_t>(info.st_size), 0);
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    const struct timespec times[2] = {info.st_atim, info.st_mtim};
    if (::utimensat(AT_FDCWD, path.c_str(), times, 0) != 0) {
      return Status::Internal("utimensat " + path.string());
    }
  }
  return Status::Ok();
}

// As the other user: one epoch of the clone, counted.
Status ReadClone(const MetadataClone& clone) {
  ClientOptions options;
  options.socket_path = clone.socket;
  options.request_timeout = 30s;
  GALLEY_ASSIGN_OR_RETURN(auto client, Client::Connect(options));
  GALLEY_ASSIGN_OR_RETURN(auto job, client.OpenJob(clone.spec));
  size_t served = 0, private_pixels = 0, grey_pixels = 0;
  while (true) {
    GALLEY_ASSIGN_OR_RETURN(auto batch, job.Next(30s));
    const size_t sample_bytes = batch.data_bytes() / batch.size();
    const auto* data = static_cast<const uint8_t*>(batch.data());
    for (size_t i = 0; i < batch.size(); ++i) {
      const std::vector<uint8_t> sample(data + i * sample_bytes, data + (i + 1) * sample_bytes);
      ++served;
      if (clone.private_samples->at(batch.item_ids()[i]) == sample) ++private_pixels;
      const bool flat = std::all_of(sample.begin(), sample.end(), [&](uint8_t v) {
        return std::abs(int{v} - int{sample[0]}) <= 2;
      });
      if (flat) ++grey_pixels;
    }
    if (batch.last_in_epoch()) break;
  }
  return Status(StatusCode::kOk, std::to_string(served) + " " + std::to_string(private_pixels) +
                                     " " + std::to_string(grey_pixels));
}

}  // namespace

Outcome ReadAMetadataCloneAsNobody(const MetadataClone& clone) {
  fs::create_directories(clone.clone);
  if (::chown(clone.clone.c_str(), kNobodyUid, kNobodyGid) != 0) {
    return Outcome{-1, "chown " + clone.clone.string()};
  }
  // Smaller than any private image, so each clone file can be padded.
  std::vector<uint8_t> grey;
  if (!cv::imencode(".jpg", cv::Mat(8, 8, CV_8UC3, cv::Scalar::all(128)), grey)) {
    return Outcome{-1, "cannot encode the grey JPEG"};
  }
  return RunAs(kNobodyUid, kNobodyGid, {}, [&]() -> Status {
    if (clone.first) GALLEY_RETURN_IF_ERROR(clone.first());
    GALLEY_RETURN_IF_ERROR(WriteClone(clone, grey));
    return ReadClone(clone);
  });
}

}  // namespace galley::testing
