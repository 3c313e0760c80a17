#include "server/image/transform_spec.h"

#include <cmath>
#include <set>
#include <string>
#include <string_view>

namespace galley::image {
namespace {

using nlohmann::json;

Status Invalid(std::string_view where, std::string_view what) {
  return Status::InvalidArgument("transform " + std::string(where) + ": " + std::string(what));
}

Status CheckFields(const json& object, std::string_view where,
                   const std::set<std::string, std::less<>>& allowed) {
  for (const auto& [key, value] : object.items()) {
    if (!allowed.contains(key)) return Invalid(where, "unknown field '" + key + "'");
  }
  return Status::Ok();
}

Result<double> ParseNumber(const json& value, std::string_view where) {
  if (!value.is_number()) return Invalid(where, "must be a number");
  const double number = value.get<double>();
  if (!std::isfinite(number)) return Invalid(where, "must be finite");
  return number;
}

// A size: one positive integer, or a list of one or two. With allow_single the
// one-element form is kept as is (Resize's shorter side); otherwise it is
// expanded to [n, n] as torchvision's _setup_size does.
Result<std::vector<int>> ParseSize(const json& value, std::string_view where, bool allow_single) {
  std::vector<json> items;
  if (value.is_array()) {
    items.assign(value.begin(), value.end());
  } else {
    items.push_back(value);
  }
  if (items.empty() || items.size() > 2) return Invalid(where, "must have one or two numbers");
  std::vector<int> size;
  for (const json& item : items) {
    if (!item.is_number_integer()) return Invalid(where, "must hold integers");
    const int64_t n = item.get<int64_t>();
    if (n <= 0) return Invalid(where, "must be positive");
    if (n > kMaxOutputSide) {
      return Invalid(where, "must be at most " + std::to_string(kMaxOutputSide));
    }
    size.push_back(static_cast<int>(n));
  }
  if (size.size() == 1 && !allow_single) size.push_back(size[0]);
  return size;
}

Result<std::array<double, 2>> ParseRange(const json& value, std::string_view where) {
  if (!value.is_array() || value.size() != 2) return Invalid(where, "must be [min, max]");
  std::array<double, 2> range{};
  for (int i = 0; i < 2; ++i) {
    GALLEY_ASSIGN_OR_RETURN(range[i], ParseNumber(value[i], where));
    if (range[i] <= 0) return Invalid(where, "must be positive");
  }
  if (range[0] > range[1]) return Invalid(where, "must be ordered [min, max]");
  return range;
}

Result<Interpolation> ParseInterpolation(const json& value, std::string_view where) {
  if (value.is_string()) {
    const auto name = value.get<std::string>();
    if (name == "nearest") return Interpolation::kNearest;
    if (name == "bilinear") return Interpolation::kBilinear;
    if (name == "bicubic") return Interpolation::kBicubic;
  }
  return Invalid(where, "must be \"nearest\", \"bilinear\" or \"bicubic\"");
}

const char* InterpolationName(Interpolation interpolation) {
  switch (interpolation) {
    case Interpolation::kNearest:
      return "nearest";
    case Interpolation::kBicubic:
      return "bicubic";
    case Interpolation::kBilinear:
      break;
  }
  return "bilinear";
}

Result<TransformOp> ParseOp(const json& value, size_t index) {
  const std::string at = "ops[" + std::to_string(index) + "]";
  if (!value.is_object()) return Invalid(at, "must be an object");
  if (!value.contains("op") || !value["op"].is_string()) {
    return Invalid(at, "needs an \"op\" name");
  }
  const std::string name = value["op"].get<std::string>();
  const std::string where = at + " " + name;
  TransformOp op;
  if (name == "RandomResizedCrop") {
    op.kind = OpKind::kRandomResizedCrop;
    GALLEY_RETURN_IF_ERROR(
        CheckFields(value, where, {"op", "size", "scale", "ratio", "interpolation"}));
  } else if (name == "Resize") {
    op.kind = OpKind::kResize;
    GALLEY_RETURN_IF_ERROR(CheckFields(value, where, {"op", "size", "interpolation"}));
  } else if (name == "CenterCrop") {
    op.kind = OpKind::kCenterCrop;
    GALLEY_RETURN_IF_ERROR(CheckFields(value, where, {"op", "size"}));
  } else if (name == "RandomHorizontalFlip") {
    op.kind = OpKind::kRandomHorizontalFlip;
    GALLEY_RETURN_IF_ERROR(CheckFields(value, where, {"op", "p"}));
  } else {
    return Invalid(at, "unknown op '" + name +
                           "' (supported: RandomResizedCrop, Resize, CenterCrop, "
                           "RandomHorizontalFlip)");
  }
  if (op.kind != OpKind::kRandomHorizontalFlip) {
    if (!value.contains("size")) return Invalid(where, "field 'size' is required");
    GALLEY_ASSIGN_OR_RETURN(
        op.size, ParseSize(value["size"], where + " field 'size'", op.kind == OpKind::kResize));
  }
  if (value.contains("scale")) {
    GALLEY_ASSIGN_OR_RETURN(op.scale, ParseRange(value["scale"], where + " field 'scale'"));
  }
  if (value.contains("ratio")) {
    GALLEY_ASSIGN_OR_RETURN(op.ratio, ParseRange(value["ratio"], where + " field 'ratio'"));
  }
  if (value.contains("interpolation")) {
    GALLEY_ASSIGN_OR_RETURN(op.interpolation, ParseInterpolation(value["interpolation"],
                                                                 where + " field 'interpolation'"));
  }
  if (value.contains("p")) {
    GALLEY_ASSIGN_OR_RETURN(op.p, ParseNumber(value["p"], where + " field 'p'"));
    if (op.p < 0 || op.p > 1) return Invalid(where + " field 'p'", "must lie in [0, 1]");
  }
  return op;
}

Result<std::array<double, 3>> ParseChannels(const json& value, std::string_view where) {
  if (!value.is_array() || (value.size() != 1 && value.size() != 3)) {
    return Invalid(where, "must be a list of 1 or 3 numbers");
  }
  std::array<double, 3> channels{};
  for (size_t c = 0; c < 3; ++c) {
    GALLEY_ASSIGN_OR_RETURN(channels[c], ParseNumber(value[value.size() == 1 ? 0 : c], where));
  }
  return channels;
}

Result<OutputSpec> ParseOutput(const json& value) {
  OutputSpec output;
  if (!value.is_object()) return Invalid("output", "must be an object");
  GALLEY_RETURN_IF_ERROR(CheckFields(value, "output", {"layout", "dtype", "mean", "std"}));
  if (value.contains("layout")) {
    const json& layout = value["layout"];
    if (layout == "NCHW") {
      output.layout = Layout::kNCHW;
    } else if (layout == "NHWC") {
      output.layout = Layout::kNHWC;
    } else {
      return Invalid("output field 'layout'", "must be \"NCHW\" or \"NHWC\"");
    }
  }
  if (value.contains("dtype")) {
    const json& dtype = value["dtype"];
    if (dtype == "uint8") {
      output.dtype = DType::kUInt8;
    } else if (dtype == "float32") {
      output.dtype = DType::kFloat32;
    } else {
      return Invalid("output field 'dtype'", "must be \"uint8\" or \"float32\"");
    }
  }
  const bool has_mean = value.contains("mean");
  const bool has_std = value.contains("std");
  if (output.dtype == DType::kUInt8) {
    if (has_mean || has_std) {
      return Invalid("output", "mean/std normalise float32 output; dtype is uint8");
    }
    return output;
  }
  if (!has_mean || !has_std) return Invalid("output", "float32 output needs 'mean' and 'std'");
  GALLEY_ASSIGN_OR_RETURN(output.mean, ParseChannels(value["mean"], "output field 'mean'"));
  GALLEY_ASSIGN_OR_RETURN(output.std, ParseChannels(value["std"], "output field 'std'"));
  for (double s : output.std) {
    if (s == 0) return Invalid("output field 'std'", "must not be zero");
  }
  return output;
}

}  // namespace

Result<TransformSpec> ParseTransformSpec(const json& value) {
  if (!value.is_object()) return Invalid("spec", "must be a JSON object");
  GALLEY_RETURN_IF_ERROR(CheckFields(value, "spec", {"ops", "output"}));
  if (!value.contains("ops") || !value["ops"].is_array()) {
    return Invalid("spec", "needs an 'ops' list");
  }
  const json& ops = value["ops"];
  if (ops.size() > static_cast<size_t>(kMaxTransformOps)) {
    return Invalid("spec", "at most " + std::to_string(kMaxTransformOps) + " ops");
  }
  TransformSpec spec;
  for (size_t i = 0; i < ops.size(); ++i) {
    GALLEY_ASSIGN_OR_RETURN(TransformOp op, ParseOp(ops[i], i));
    // The batch is one tensor, so the last op that sets the size must fix both sides.
    if (op.kind != OpKind::kRandomHorizontalFlip) {
      const bool fixed = op.size.size() == 2;
      spec.output_height = fixed ? op.size[0] : 0;
      spec.output_width = fixed ? op.size[1] : 0;
    }
    spec.ops.push_back(std::move(op));
  }
  if (spec.output_height == 0) {
    return Invalid("spec",
                   "output size depends on the input image; end the size-setting ops with "
                   "RandomResizedCrop, CenterCrop or a Resize to [h, w]");
  }
  if (value.contains("output")) {
    GALLEY_ASSIGN_OR_RETURN(spec.output, ParseOutput(value["output"]));
  }
  return spec;
}

nlohmann::json TransformSpecToJson(const TransformSpec& spec) {
  json ops = json::array();
  for (const TransformOp& op : spec.ops) {
    json o;
    switch (op.kind) {
      case OpKind::kRandomResizedCrop:
        o = {{"op", "RandomResizedCrop"},
             {"size", op.size},
             {"scale", op.scale},
             {"ratio", op.ratio},
             {"interpolation", InterpolationName(op.interpolation)}};
        break;
      case OpKind::kResize:
        o = {{"op", "Resize"},
             {"size", op.size},
             {"interpolation", InterpolationName(op.interpolation)}};
        break;
      case OpKind::kCenterCrop:
        o = {{"op", "CenterCrop"}, {"size", op.size}};
        break;
      case OpKind::kRandomHorizontalFlip:
        o = {{"op", "RandomHorizontalFlip"}, {"p", op.p}};
        break;
    }
    ops.push_back(std::move(o));
  }
  json output = {{"layout", spec.output.layout == Layout::kNCHW ? "NCHW" : "NHWC"},
                 {"dtype", spec.output.dtype == DType::kUInt8 ? "uint8" : "float32"}};
  if (spec.output.dtype == DType::kFloat32) {
    output["mean"] = spec.output.mean;
    output["std"] = spec.output.std;
  }
  return {{"ops", std::move(ops)}, {"output", std::move(output)}};
}

}  // namespace galley::image
