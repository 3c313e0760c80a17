// OpenS3Client in a build with GALLEY_OBJECT_STORE=OFF (no libcurl).
#include "galley/objectstore/s3_client.h"

namespace galley::objectstore {

Result<std::unique_ptr<ObjectStore>> OpenS3Client(const S3ClientOptions&) {
  return Status::Unavailable(
      "this galleyd was built without S3 support (GALLEY_OBJECT_STORE=OFF, as in the pip "
      "wheel): install galley's Debian package or build from source with libcurl and pugixml "
      "(docs/install.md)");
}

}  // namespace galley::objectstore
