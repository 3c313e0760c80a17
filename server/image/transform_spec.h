// TransformSpec: the validated, canonical form of a transform pipeline's JSON.
//
// The JSON travels on the wire from the Python client (docs/transforms.md):
//   {"ops": [{"op": "RandomResizedCrop", "size": [224, 224], ...}, ...],
//    "output": {"layout": "NCHW", "dtype": "uint8"}}
// Parsing checks every field and fills torchvision's defaults, so two specs
// that mean the same pipeline have the same canonical JSON. Plain values;
// safe to share between threads once built.
#ifndef GALLEY_SERVER_IMAGE_TRANSFORM_SPEC_H_
#define GALLEY_SERVER_IMAGE_TRANSFORM_SPEC_H_

#include <array>
#include <nlohmann/json.hpp>
#include <vector>

#include "galley/status.h"

namespace galley::image {

enum class Layout { kNCHW, kNHWC };
enum class DType { kUInt8, kFloat32 };
enum class Interpolation { kNearest, kBilinear, kBicubic };

enum class OpKind { kRandomResizedCrop, kResize, kCenterCrop, kRandomHorizontalFlip };

// One op with every field filled in. Sizes are [h, w], except Resize with a
// single number, which sets the shorter side (size has one element then).
struct TransformOp {
  OpKind kind = OpKind::kResize;
  std::vector<int> size;
  std::array<double, 2> scale = {0.08, 1.0};
  std::array<double, 2> ratio = {3.0 / 4.0, 4.0 / 3.0};
  Interpolation interpolation = Interpolation::kBilinear;
  double p = 0.5;
};

struct OutputSpec {
  Layout layout = Layout::kNCHW;
  DType dtype = DType::kUInt8;
  // Per-channel Normalize parameters (float32 only): out = (x / 255 - mean) / std.
  std::array<double, 3> mean = {0, 0, 0};
  std::array<double, 3> std = {1, 1, 1};
};

struct TransformSpec {
  std::vector<TransformOp> ops;
  OutputSpec output;
  // The fixed output size every sample has, [h, w].
  int output_height = 0;
  int output_width = 0;
};

// Limits that keep one request from asking for absurd memory.
inline constexpr int kMaxTransformOps = 16;
inline constexpr int kMaxOutputSide = 8192;

// Validates `json` (unknown ops or fields, wrong types, non-positive sizes,
// (min, max) pairs out of order, p outside [0, 1], std == 0, non-finite
// numbers, an output size that depends on the input) and returns the spec, or
// InvalidArgument naming the op and field.
Result<TransformSpec> ParseTransformSpec(const nlohmann::json& json);

// Canonical JSON: every default filled in, fields in a fixed order.
nlohmann::json TransformSpecToJson(const TransformSpec& spec);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_TRANSFORM_SPEC_H_
