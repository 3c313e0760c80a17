// Fuzz target: every image decoder behind the allow-list, through the same
// entry points the pipeline uses. The pixel limit is lowered so a valid
// large image costs the fuzzer little memory; bombs must be refused from
// the header either way.
#include <cstdint>
#include <span>

#include "server/image/decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galley::image;
  const std::span<const uint8_t> bytes(data, size);
  (void)ReadHeader(bytes);
  DecodeOptions options;
  options.max_pixels = 2048 * 2048;
  (void)Decode(bytes, options);
  (void)DecodeScaled(bytes, options, 16, 16);
  return 0;
}
