// Connects to a galleyd, prints the client's version and the daemon's status
// document, and reads one batch of a dataset: the smallest real use of the
// installed client library.
//
//   galley_consumer SOCKET DATASET
#include <galley/client.h>
#include <galley/version.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s SOCKET DATASET\n", argv[0]);
    return 2;
  }
  galley::ClientOptions options;
  options.socket_path = argv[1];
  options.client_name = "galley-consumer";
  auto client = galley::Client::Connect(options);
  if (!client.ok()) {
    std::fprintf(stderr, "connect: %s\n", client.status().ToString().c_str());
    return 1;
  }
  auto status = client->Query("status");
  if (!status.ok()) {
    std::fprintf(stderr, "query: %s\n", status.status().ToString().c_str());
    return 1;
  }
  galley::JobSpec spec;
  spec.dataset = argv[2];
  spec.batch_size = 4;
  spec.transform_json =
      R"({"ops":[{"op":"Resize","size":[32]},{"op":"CenterCrop","size":[32,32]}],)"
      R"("output":{"layout":"NCHW","dtype":"uint8"}})";
  spec.epochs = 1;
  auto job = client->OpenJob(spec);
  if (!job.ok()) {
    std::fprintf(stderr, "open: %s\n", job.status().ToString().c_str());
    return 1;
  }
  auto batch = job->Next();
  if (!batch.ok()) {
    std::fprintf(stderr, "next: %s\n", batch.status().ToString().c_str());
    return 1;
  }
  std::printf("client %s protocol %u\n", galley::kVersion, galley::kProtocolVersion);
  std::printf("batch of %zu samples\n", batch->labels().size());
  std::printf("%s\n", status->c_str());
  return 0;
}
