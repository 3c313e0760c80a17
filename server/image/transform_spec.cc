#include "galley/image/transform_spec.h"

#include <cmath>
#include <set>
#include <string>
#include <string_view>

namespace galley::image {

const char* InterpolationName(Interpolation interpolation) {
  switch (interpolation) {
    case Interpolation::kNearest:
      return "nearest";
    case Interpolation::kBicubic:
      return "bicubic";
    case Interpolation::kBox:
      return "box";
    case Interpolation::kHamming:
      return "hamming";
    case Interpolation::kLanczos:
      return "lanczos";
    case Interpolation::kBilinear:
      break;
  }
  return "bilinear";
}

const char* PaddingModeName(PaddingMode mode) {
  switch (mode) {
    case PaddingMode::kEdge:
      return "edge";
    case PaddingMode::kReflect:
      return "reflect";
    case PaddingMode::kSymmetric:
      return "symmetric";
    case PaddingMode::kConstant:
      break;
  }
  return "constant";
}

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
    if (name == "box") return Interpolation::kBox;
    if (name == "hamming") return Interpolation::kHamming;
    if (name == "lanczos") return Interpolation::kLanczos;
  }
  return Invalid(where,
                 "must be \"nearest\", \"bilinear\", \"bicubic\", \"box\", \"hamming\" or "
                 "\"lanczos\"");
}

struct OpInfo {
  const char* name;
  OpKind kind;
  std::set<std::string, std::less<>> fields;
};

const std::vector<OpInfo>& OpTable() {
  static const std::vector<OpInfo> table = {
      {"RandomResizedCrop",
       OpKind::kRandomResizedCrop,
       {"size", "scale", "ratio", "interpolation"}},
      {"Resize", OpKind::kResize, {"size", "interpolation"}},
      {"CenterCrop", OpKind::kCenterCrop, {"size"}},
      {"RandomHorizontalFlip", OpKind::kRandomHorizontalFlip, {"p"}},
      {"RandomCrop",
       OpKind::kRandomCrop,
       {"size", "padding", "pad_if_needed", "fill", "padding_mode"}},
      {"Pad", OpKind::kPad, {"padding", "fill", "padding_mode"}},
      {"RandomVerticalFlip", OpKind::kRandomVerticalFlip, {"p"}},
      {"ColorJitter", OpKind::kColorJitter, {"brightness", "contrast", "saturation", "hue"}},
      {"Grayscale", OpKind::kGrayscale, {"num_output_channels"}},
      {"RandomGrayscale", OpKind::kRandomGrayscale, {"p"}},
      {"GaussianBlur", OpKind::kGaussianBlur, {"kernel_size", "sigma"}},
      {"RandomRotation",
       OpKind::kRandomRotation,
       {"degrees", "interpolation", "expand", "center", "fill"}},
      {"RandomAffine",
       OpKind::kRandomAffine,
       {"degrees", "translate", "scale", "shear", "interpolation", "fill", "center"}},
      {"RandomApply", OpKind::kRandomApply, {"transforms", "p"}},
      {"RandomChoice", OpKind::kRandomChoice, {"transforms", "p"}},
      {"RandomOrder", OpKind::kRandomOrder, {"transforms"}},
      {"AutoAugment", OpKind::kAutoAugment, {"policy", "interpolation", "fill"}},
      {"RandAugment",
       OpKind::kRandAugment,
       {"num_ops", "magnitude", "num_magnitude_bins", "interpolation", "fill"}},
      {"TrivialAugmentWide",
       OpKind::kTrivialAugmentWide,
       {"num_magnitude_bins", "interpolation", "fill"}},
      {"RandomErasing", OpKind::kRandomErasing, {"p", "scale", "ratio", "value"}},
      {"AugMix",
       OpKind::kAugMix,
       {"severity", "mixture_width", "chain_depth", "alpha", "all_ops", "interpolation", "fill"}},
  };
  return table;
}

// A (min, max) pair of any sign, or one number n meaning [center - n,
// center + n] (n >= 0), as torchvision's _check_input / _setup_angle.
Result<Range> ParseSymmetricRange(const json& value, std::string_view where, double center) {
  if (value.is_number()) {
    GALLEY_ASSIGN_OR_RETURN(const double n, ParseNumber(value, where));
    if (n < 0) return Invalid(where, "a single number must be non-negative");
    return Range{center - n, center + n};
  }
  if (!value.is_array() || value.size() != 2)
    return Invalid(where, "must be a number or [min, max]");
  Range range{};
  for (int i = 0; i < 2; ++i) {
    GALLEY_ASSIGN_OR_RETURN(range[i], ParseNumber(value[i], where));
  }
  if (range[0] > range[1]) return Invalid(where, "must be ordered [min, max]");
  return range;
}

Result<int> ParseInt(const json& value, std::string_view where, int low, int high) {
  if (!value.is_number_integer()) return Invalid(where, "must be an integer");
  const int64_t n = value.get<int64_t>();
  if (n < low || n > high) {
    return Invalid(where,
                   "must lie in [" + std::to_string(low) + ", " + std::to_string(high) + "]");
  }
  return static_cast<int>(n);
}

// torchvision's padding: one number (all sides), [left/right, top/bottom],
// or [left, top, right, bottom]; returned as the four.
Result<std::vector<int>> ParsePadding(const json& value, std::string_view where) {
  std::vector<json> items;
  if (value.is_array()) {
    items.assign(value.begin(), value.end());
  } else {
    items.push_back(value);
  }
  if (items.size() != 1 && items.size() != 2 && items.size() != 4) {
    return Invalid(where, "must have 1, 2 or 4 numbers");
  }
  std::vector<int> sides;
  for (const json& item : items) {
    GALLEY_ASSIGN_OR_RETURN(const int n, ParseInt(item, where, 0, kMaxOutputSide));
    sides.push_back(n);
  }
  if (sides.size() == 1) return std::vector<int>{sides[0], sides[0], sides[0], sides[0]};
  if (sides.size() == 2) return std::vector<int>{sides[0], sides[1], sides[0], sides[1]};
  return sides;
}

// A fill colour; PIL images take integers (truncated), tensors floats.
Result<std::array<double, 3>> ParseFill(const json& value, std::string_view where,
                                        bool truncate = true) {
  std::array<double, 3> fill{};
  if (value.is_null()) return fill;
  if (value.is_number()) {
    GALLEY_ASSIGN_OR_RETURN(const double n, ParseNumber(value, where));
    fill = {n, n, n};
  } else if (value.is_array() && (value.size() == 1 || value.size() == 3)) {
    for (size_t c = 0; c < 3; ++c) {
      GALLEY_ASSIGN_OR_RETURN(fill[c], ParseNumber(value[value.size() == 1 ? 0 : c], where));
    }
  } else {
    return Invalid(where, "must be a number or one per channel");
  }
  for (double& f : fill) {
    if (f < 0 || f > 255) return Invalid(where, "must lie in [0, 255]");
    if (truncate) f = std::trunc(f);
  }
  return fill;
}

const char* PolicyName(AutoAugmentPolicy policy) {
  switch (policy) {
    case AutoAugmentPolicy::kCifar10:
      return "cifar10";
    case AutoAugmentPolicy::kSvhn:
      return "svhn";
    case AutoAugmentPolicy::kImageNet:
      break;
  }
  return "imagenet";
}

bool SetsSize(OpKind kind) {
  return kind == OpKind::kRandomResizedCrop || kind == OpKind::kResize ||
         kind == OpKind::kCenterCrop || kind == OpKind::kRandomCrop || kind == OpKind::kPad;
}

// Parses the fields every new op may have; `where` names the op.
Status ParseExtraFields(const json& value, const std::string& where, TransformOp& op) {
  auto field = [&](const char* name) { return where + " field '" + name + "'"; };
  if (value.contains("padding") && !value["padding"].is_null()) {
    GALLEY_ASSIGN_OR_RETURN(op.padding, ParsePadding(value["padding"], field("padding")));
  } else if (op.kind == OpKind::kPad) {
    return Invalid(where, "field 'padding' is required");
  }
  if (value.contains("pad_if_needed")) {
    if (!value["pad_if_needed"].is_boolean())
      return Invalid(field("pad_if_needed"), "must be a boolean");
    op.pad_if_needed = value["pad_if_needed"].get<bool>();
  }
  if (value.contains("padding_mode")) {
    const json& mode = value["padding_mode"];
    if (mode == "constant") {
      op.padding_mode = PaddingMode::kConstant;
    } else if (mode == "edge") {
      op.padding_mode = PaddingMode::kEdge;
    } else if (mode == "reflect") {
      op.padding_mode = PaddingMode::kReflect;
    } else if (mode == "symmetric") {
      op.padding_mode = PaddingMode::kSymmetric;
    } else {
      return Invalid(field("padding_mode"),
                     "must be \"constant\", \"edge\", \"reflect\" or \"symmetric\"");
    }
  }
  if (op.kind == OpKind::kAugMix) {
    if (value.contains("fill") && !value["fill"].is_null()) {
      GALLEY_ASSIGN_OR_RETURN(op.tensor_fill, ParseFill(value["fill"], field("fill"), false));
    }
  } else if (value.contains("fill")) {
    GALLEY_ASSIGN_OR_RETURN(op.fill, ParseFill(value["fill"], field("fill")));
  }
  if (op.kind == OpKind::kAugMix) {
    if (value.contains("severity")) {
      GALLEY_ASSIGN_OR_RETURN(op.severity, ParseInt(value["severity"], field("severity"), 1, 10));
    }
    if (value.contains("mixture_width")) {
      GALLEY_ASSIGN_OR_RETURN(op.mixture_width,
                              ParseInt(value["mixture_width"], field("mixture_width"), 1, 8));
    }
    if (value.contains("chain_depth")) {
      GALLEY_ASSIGN_OR_RETURN(op.chain_depth,
                              ParseInt(value["chain_depth"], field("chain_depth"), -1000, 8));
    }
    if (value.contains("alpha")) {
      GALLEY_ASSIGN_OR_RETURN(op.alpha, ParseNumber(value["alpha"], field("alpha")));
      if (!(op.alpha > 0)) return Invalid(field("alpha"), "must be positive");
    }
    if (value.contains("all_ops")) {
      if (!value["all_ops"].is_boolean()) return Invalid(field("all_ops"), "must be a boolean");
      op.all_ops = value["all_ops"].get<bool>();
    }
  }
  // ColorJitter: factors centred on 1 (hue on 0), None when absent or null.
  const std::pair<const char*, std::optional<Range>*> jitters[] = {{"brightness", &op.brightness},
                                                                   {"contrast", &op.contrast},
                                                                   {"saturation", &op.saturation},
                                                                   {"hue", &op.hue}};
  if (op.kind == OpKind::kColorJitter) {
    for (const auto& [name, target] : jitters) {
      if (!value.contains(name) || value[name].is_null()) continue;
      const bool is_hue = std::string_view(name) == "hue";
      GALLEY_ASSIGN_OR_RETURN(Range range,
                              ParseSymmetricRange(value[name], field(name), is_hue ? 0.0 : 1.0));
      if (is_hue && (range[0] < -0.5 || range[1] > 0.5)) {
        return Invalid(field(name), "must lie in [-0.5, 0.5]");
      }
      if (!is_hue) range[0] = std::max(0.0, range[0]);  // torchvision clamps at 0
      *target = range;
    }
  }
  if (op.kind == OpKind::kGrayscale && value.contains("num_output_channels")) {
    GALLEY_ASSIGN_OR_RETURN(const int channels, ParseInt(value["num_output_channels"],
                                                         field("num_output_channels"), 1, 3));
    if (channels != 3) {
      return Invalid(field("num_output_channels"),
                     "galley's output has 3 channels; use num_output_channels=3");
    }
  }
  if (op.kind == OpKind::kGaussianBlur) {
    if (!value.contains("kernel_size")) return Invalid(where, "field 'kernel_size' is required");
    GALLEY_ASSIGN_OR_RETURN(const std::vector<int> kernel,
                            ParseSize(value["kernel_size"], field("kernel_size"), false));
    for (int k : kernel) {
      if (k % 2 == 0 || k > 255)
        return Invalid(field("kernel_size"), "must be odd and at most 255");
    }
    op.kernel_size = {kernel[0], kernel[1]};
    if (value.contains("sigma")) {
      if (value["sigma"].is_number()) {
        GALLEY_ASSIGN_OR_RETURN(const double s, ParseNumber(value["sigma"], field("sigma")));
        op.sigma = {s, s};
      } else {
        GALLEY_ASSIGN_OR_RETURN(op.sigma, ParseRange(value["sigma"], field("sigma")));
      }
      if (op.sigma[0] <= 0) return Invalid(field("sigma"), "must be positive");
    }
  }
  if (op.kind == OpKind::kRandomRotation || op.kind == OpKind::kRandomAffine) {
    if (!value.contains("degrees")) return Invalid(where, "field 'degrees' is required");
    GALLEY_ASSIGN_OR_RETURN(op.degrees,
                            ParseSymmetricRange(value["degrees"], field("degrees"), 0.0));
    if (value.contains("expand") && value["expand"] != false) {
      return Invalid(field("expand"),
                     "expand=True makes the size depend on the angle; galley supports "
                     "expand=False (crop or resize after the rotation instead)");
    }
    if (value.contains("center") && !value["center"].is_null()) {
      return Invalid(field("center"), "only the image centre (center=None) is supported");
    }
  }
  if (op.kind == OpKind::kRandomAffine) {
    if (value.contains("translate") && !value["translate"].is_null()) {
      const json& t = value["translate"];
      if (!t.is_array() || t.size() != 2) return Invalid(field("translate"), "must be [a, b]");
      Range range{};
      for (int i = 0; i < 2; ++i) {
        GALLEY_ASSIGN_OR_RETURN(range[i], ParseNumber(t[i], field("translate")));
        if (range[i] < 0 || range[i] > 1) return Invalid(field("translate"), "must lie in [0, 1]");
      }
      op.translate = range;
    }
    if (value.contains("scale") && !value["scale"].is_null()) {
      GALLEY_ASSIGN_OR_RETURN(op.affine_scale, ParseRange(value["scale"], field("scale")));
    }
    if (value.contains("shear") && !value["shear"].is_null()) {
      const json& shear = value["shear"];
      if (shear.is_number() || (shear.is_array() && shear.size() == 2)) {
        GALLEY_ASSIGN_OR_RETURN(op.shear_x, ParseSymmetricRange(shear, field("shear"), 0.0));
      } else if (shear.is_array() && shear.size() == 4) {
        GALLEY_ASSIGN_OR_RETURN(op.shear_x, ParseSymmetricRange(json::array({shear[0], shear[1]}),
                                                                field("shear"), 0.0));
        GALLEY_ASSIGN_OR_RETURN(op.shear_y, ParseSymmetricRange(json::array({shear[2], shear[3]}),
                                                                field("shear"), 0.0));
      } else {
        return Invalid(field("shear"), "must be a number, [min, max] or four numbers");
      }
    }
  }
  if (op.kind == OpKind::kAutoAugment && value.contains("policy")) {
    const json& policy = value["policy"];
    if (policy == "imagenet") {
      op.policy = AutoAugmentPolicy::kImageNet;
    } else if (policy == "cifar10") {
      op.policy = AutoAugmentPolicy::kCifar10;
    } else if (policy == "svhn") {
      op.policy = AutoAugmentPolicy::kSvhn;
    } else {
      return Invalid(field("policy"), "must be \"imagenet\", \"cifar10\" or \"svhn\"");
    }
  }
  if (value.contains("num_magnitude_bins")) {
    GALLEY_ASSIGN_OR_RETURN(op.num_magnitude_bins, ParseInt(value["num_magnitude_bins"],
                                                            field("num_magnitude_bins"), 2, 1000));
  }
  if (value.contains("num_ops")) {
    GALLEY_ASSIGN_OR_RETURN(op.num_ops, ParseInt(value["num_ops"], field("num_ops"), 0, 8));
  }
  if (value.contains("magnitude")) {
    GALLEY_ASSIGN_OR_RETURN(op.magnitude,
                            ParseInt(value["magnitude"], field("magnitude"), 0, 1000));
  }
  if (op.kind == OpKind::kRandAugment && op.magnitude >= op.num_magnitude_bins) {
    return Invalid(field("magnitude"), "must be below num_magnitude_bins");
  }
  if (op.kind == OpKind::kRandomErasing) {
    op.scale = {0.02, 0.33};
    op.ratio = {0.3, 3.3};
    if (value.contains("value")) {
      const json& v = value["value"];
      if (v == "random") {
        op.erase_value.reset();
      } else if (v.is_number() || (v.is_array() && (v.size() == 1 || v.size() == 3))) {
        std::array<double, 3> channels{};
        for (size_t c = 0; c < 3; ++c) {
          const json& item = v.is_array() ? v[v.size() == 1 ? 0 : c] : v;
          GALLEY_ASSIGN_OR_RETURN(channels[c], ParseNumber(item, field("value")));
        }
        op.erase_value = channels;
      } else {
        return Invalid(field("value"), "must be a number, one per channel, or \"random\"");
      }
    }
  }
  return Status::Ok();
}

Result<TransformOp> ParseOp(const json& value, const std::string& at, int depth, int& nested);

Status ParseChildren(const json& value, const std::string& where, int depth, int& nested,
                     TransformOp& op) {
  if (!value.contains("transforms") || !value["transforms"].is_array() ||
      value["transforms"].empty()) {
    return Invalid(where, "needs a non-empty 'transforms' list");
  }
  if (depth >= kMaxNestingDepth) {
    return Invalid(where, "nested more than " + std::to_string(kMaxNestingDepth) + " deep");
  }
  const json& children = value["transforms"];
  for (size_t i = 0; i < children.size(); ++i) {
    if (++nested > kMaxNestedOps) {
      return Invalid(where, "at most " + std::to_string(kMaxNestedOps) + " nested ops");
    }
    const std::string child_at = where + " transforms[" + std::to_string(i) + "]";
    GALLEY_ASSIGN_OR_RETURN(TransformOp child, ParseOp(children[i], child_at, depth + 1, nested));
    if (SetsSize(child.kind) || child.kind == OpKind::kRandomErasing) {
      // A batch is one tensor: the size may not depend on a random choice.
      return Invalid(child_at,
                     "ops that change the image size, and RandomErasing, cannot be inside "
                     "RandomApply / RandomChoice / RandomOrder");
    }
    op.children.push_back(std::move(child));
  }
  if (op.kind == OpKind::kRandomChoice && value.contains("p") && !value["p"].is_null()) {
    const json& weights = value["p"];
    if (!weights.is_array() || weights.size() != op.children.size()) {
      return Invalid(where + " field 'p'", "must give one weight per transform");
    }
    double total = 0;
    for (const json& w : weights) {
      GALLEY_ASSIGN_OR_RETURN(const double weight, ParseNumber(w, where + " field 'p'"));
      if (weight < 0) return Invalid(where + " field 'p'", "weights must be non-negative");
      total += weight;
      op.weights.push_back(weight);
    }
    if (total <= 0) return Invalid(where + " field 'p'", "weights must not all be zero");
  }
  return Status::Ok();
}

Result<TransformOp> ParseOp(const json& value, const std::string& at, int depth, int& nested) {
  if (!value.is_object()) return Invalid(at, "must be an object");
  if (!value.contains("op") || !value["op"].is_string()) {
    return Invalid(at, "needs an \"op\" name");
  }
  const std::string name = value["op"].get<std::string>();
  const std::string where = at + " " + name;
  TransformOp op;
  const OpInfo* info = nullptr;
  for (const OpInfo& candidate : OpTable()) {
    if (name == candidate.name) info = &candidate;
  }
  if (info == nullptr) {
    std::string names;
    for (const OpInfo& candidate : OpTable()) {
      names += names.empty() ? "" : ", ";
      names += candidate.name;
    }
    return Invalid(at, "unknown op '" + name + "' (supported: " + names + ")");
  }
  op.kind = info->kind;
  std::set<std::string, std::less<>> allowed = info->fields;
  allowed.insert("op");
  GALLEY_RETURN_IF_ERROR(CheckFields(value, where, allowed));
  if (info->fields.contains("size")) {
    if (!value.contains("size")) return Invalid(where, "field 'size' is required");
    GALLEY_ASSIGN_OR_RETURN(
        op.size, ParseSize(value["size"], where + " field 'size'", op.kind == OpKind::kResize));
  }
  // Warps default to nearest, as torchvision's do.
  const bool warp = op.kind == OpKind::kRandomRotation || op.kind == OpKind::kRandomAffine ||
                    op.kind == OpKind::kAutoAugment || op.kind == OpKind::kRandAugment ||
                    op.kind == OpKind::kTrivialAugmentWide;
  if (warp) op.interpolation = Interpolation::kNearest;
  // AugMix defaults to bilinear, as torchvision's does.
  if (op.kind == OpKind::kRandomApply) op.p = 0.5;
  if (op.kind == OpKind::kRandomGrayscale) op.p = 0.1;
  GALLEY_RETURN_IF_ERROR(ParseExtraFields(value, where, op));
  if (op.kind == OpKind::kRandomApply || op.kind == OpKind::kRandomChoice ||
      op.kind == OpKind::kRandomOrder) {
    GALLEY_RETURN_IF_ERROR(ParseChildren(value, where, depth, nested, op));
  }
  if (value.contains("scale") && op.kind != OpKind::kRandomAffine) {
    GALLEY_ASSIGN_OR_RETURN(op.scale, ParseRange(value["scale"], where + " field 'scale'"));
  }
  if (value.contains("ratio")) {
    GALLEY_ASSIGN_OR_RETURN(op.ratio, ParseRange(value["ratio"], where + " field 'ratio'"));
  }
  if (value.contains("interpolation")) {
    GALLEY_ASSIGN_OR_RETURN(op.interpolation, ParseInterpolation(value["interpolation"],
                                                                 where + " field 'interpolation'"));
    // PIL's Image.transform (the warps) has only nearest, bilinear, bicubic.
    if (warp && op.interpolation != Interpolation::kNearest &&
        op.interpolation != Interpolation::kBilinear &&
        op.interpolation != Interpolation::kBicubic) {
      return Invalid(where + " field 'interpolation'",
                     "warps support \"nearest\", \"bilinear\" or \"bicubic\"");
    }
    // torchvision's AugMix runs its tensor kernels, whose grid_sample has
    // only these two (torchvision raises for others at the first sample).
    if (op.kind == OpKind::kAugMix && op.interpolation != Interpolation::kNearest &&
        op.interpolation != Interpolation::kBilinear) {
      return Invalid(where + " field 'interpolation'",
                     "AugMix supports \"nearest\" or \"bilinear\" (torchvision's tensor "
                     "kernels, which AugMix uses, have no other)");
    }
  }
  if (value.contains("p") && op.kind != OpKind::kRandomChoice) {
    GALLEY_ASSIGN_OR_RETURN(op.p, ParseNumber(value["p"], where + " field 'p'"));
    if (op.p < 0 || op.p > 1) return Invalid(where + " field 'p'", "must lie in [0, 1]");
  }
  return op;
}

json OpToJson(const TransformOp& op) {
  const char* name = "";
  for (const OpInfo& info : OpTable()) {
    if (info.kind == op.kind) name = info.name;
  }
  json o = {{"op", name}};
  auto optional_range = [](const std::optional<Range>& range) -> json {
    return range ? json(*range) : json(nullptr);
  };
  auto children = [&]() {
    json list = json::array();
    for (const TransformOp& child : op.children) list.push_back(OpToJson(child));
    return list;
  };
  switch (op.kind) {
    case OpKind::kRandomResizedCrop:
      o.update({{"size", op.size},
                {"scale", op.scale},
                {"ratio", op.ratio},
                {"interpolation", InterpolationName(op.interpolation)}});
      break;
    case OpKind::kResize:
      o.update({{"size", op.size}, {"interpolation", InterpolationName(op.interpolation)}});
      break;
    case OpKind::kCenterCrop:
      o["size"] = op.size;
      break;
    case OpKind::kRandomHorizontalFlip:
    case OpKind::kRandomVerticalFlip:
    case OpKind::kRandomGrayscale:
      o["p"] = op.p;
      break;
    case OpKind::kRandomCrop:
      o.update({{"size", op.size},
                {"padding", op.padding.empty() ? json(nullptr) : json(op.padding)},
                {"pad_if_needed", op.pad_if_needed},
                {"fill", op.fill},
                {"padding_mode", PaddingModeName(op.padding_mode)}});
      break;
    case OpKind::kPad:
      o.update({{"padding", op.padding},
                {"fill", op.fill},
                {"padding_mode", PaddingModeName(op.padding_mode)}});
      break;
    case OpKind::kColorJitter:
      o.update({{"brightness", optional_range(op.brightness)},
                {"contrast", optional_range(op.contrast)},
                {"saturation", optional_range(op.saturation)},
                {"hue", optional_range(op.hue)}});
      break;
    case OpKind::kGrayscale:
      o["num_output_channels"] = 3;
      break;
    case OpKind::kGaussianBlur:
      o.update({{"kernel_size", op.kernel_size}, {"sigma", op.sigma}});
      break;
    case OpKind::kRandomRotation:
      o.update({{"degrees", op.degrees},
                {"interpolation", InterpolationName(op.interpolation)},
                {"fill", op.fill}});
      break;
    case OpKind::kRandomAffine: {
      json shear = nullptr;
      if (op.shear_x && op.shear_y) {
        shear = {(*op.shear_x)[0], (*op.shear_x)[1], (*op.shear_y)[0], (*op.shear_y)[1]};
      } else if (op.shear_x) {
        shear = *op.shear_x;
      }
      o.update({{"degrees", op.degrees},
                {"translate", optional_range(op.translate)},
                {"scale", optional_range(op.affine_scale)},
                {"shear", shear},
                {"interpolation", InterpolationName(op.interpolation)},
                {"fill", op.fill}});
      break;
    }
    case OpKind::kRandomApply:
      o.update({{"transforms", children()}, {"p", op.p}});
      break;
    case OpKind::kRandomChoice:
      o.update({{"transforms", children()},
                {"p", op.weights.empty() ? json(nullptr) : json(op.weights)}});
      break;
    case OpKind::kRandomOrder:
      o["transforms"] = children();
      break;
    case OpKind::kAutoAugment:
      o.update({{"policy", PolicyName(op.policy)},
                {"interpolation", InterpolationName(op.interpolation)},
                {"fill", op.fill}});
      break;
    case OpKind::kRandAugment:
      o.update({{"num_ops", op.num_ops},
                {"magnitude", op.magnitude},
                {"num_magnitude_bins", op.num_magnitude_bins},
                {"interpolation", InterpolationName(op.interpolation)},
                {"fill", op.fill}});
      break;
    case OpKind::kTrivialAugmentWide:
      o.update({{"num_magnitude_bins", op.num_magnitude_bins},
                {"interpolation", InterpolationName(op.interpolation)},
                {"fill", op.fill}});
      break;
    case OpKind::kAugMix:
      o.update({{"severity", op.severity},
                {"mixture_width", op.mixture_width},
                {"chain_depth", op.chain_depth > 0 ? op.chain_depth : -1},
                {"alpha", op.alpha},
                {"all_ops", op.all_ops},
                {"interpolation", InterpolationName(op.interpolation)},
                {"fill", op.tensor_fill ? json(*op.tensor_fill) : json(nullptr)}});
      break;
    case OpKind::kRandomErasing:
      o.update({{"p", op.p},
                {"scale", op.scale},
                {"ratio", op.ratio},
                {"value", op.erase_value ? json(*op.erase_value) : json("random")}});
      break;
  }
  return o;
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
    const auto parsed =
        layout.is_string() ? ParseLayout(layout.get_ref<const std::string&>()) : std::nullopt;
    if (!parsed) return Invalid("output field 'layout'", "must be \"NCHW\" or \"NHWC\"");
    output.layout = *parsed;
  }
  if (value.contains("dtype")) {
    const json& dtype = value["dtype"];
    const auto parsed =
        dtype.is_string() ? ParseDType(dtype.get_ref<const std::string&>()) : std::nullopt;
    if (!parsed) return Invalid("output field 'dtype'", "must be \"uint8\" or \"float32\"");
    output.dtype = *parsed;
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
  int nested = 0;
  bool erasing = false;
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string at = "ops[" + std::to_string(i) + "]";
    GALLEY_ASSIGN_OR_RETURN(TransformOp op, ParseOp(ops[i], at, 0, nested));
    if (op.kind == OpKind::kRandomErasing) {
      erasing = true;
    } else if (erasing) {
      // RandomErasing works on the output tensor, after every image op.
      return Invalid(at, "only RandomErasing may follow RandomErasing");
    }
    // The batch is one tensor, so the last op that sets the size must fix both sides.
    if (op.kind == OpKind::kPad) {
      if (spec.output_height > 0) {
        spec.output_height += op.padding[1] + op.padding[3];
        spec.output_width += op.padding[0] + op.padding[2];
        if (spec.output_height > kMaxOutputSide || spec.output_width > kMaxOutputSide) {
          return Invalid(at, "output larger than " + std::to_string(kMaxOutputSide));
        }
      }
    } else if (SetsSize(op.kind)) {
      const bool fixed = op.size.size() == 2;
      spec.output_height = fixed ? op.size[0] : 0;
      spec.output_width = fixed ? op.size[1] : 0;
    }
    spec.ops.push_back(std::move(op));
  }
  if (spec.output_height == 0) {
    return Invalid("spec",
                   "output size depends on the input image; end the size-setting ops with "
                   "RandomResizedCrop, CenterCrop, RandomCrop or a Resize to [h, w]");
  }
  if (value.contains("output")) {
    GALLEY_ASSIGN_OR_RETURN(spec.output, ParseOutput(value["output"]));
  }
  for (const TransformOp& op : spec.ops) {
    if (op.kind != OpKind::kRandomErasing || spec.output.dtype != DType::kUInt8) continue;
    // torchvision would write these into a uint8 tensor; only whole levels fit.
    if (!op.erase_value) {
      return Invalid("RandomErasing field 'value'", "\"random\" needs float32 output (Normalize)");
    }
    for (double v : *op.erase_value) {
      if (v < 0 || v > 255 || v != std::trunc(v)) {
        return Invalid("RandomErasing field 'value'", "uint8 output takes integers in [0, 255]");
      }
    }
  }
  return spec;
}

nlohmann::json TransformSpecToJson(const TransformSpec& spec) {
  json ops = json::array();
  for (const TransformOp& op : spec.ops) ops.push_back(OpToJson(op));
  json output = {{"layout", LayoutName(spec.output.layout)},
                 {"dtype", DTypeName(spec.output.dtype)}};
  if (spec.output.dtype == DType::kFloat32) {
    output["mean"] = spec.output.mean;
    output["std"] = spec.output.std;
  }
  return {{"ops", std::move(ops)}, {"output", std::move(output)}};
}

}  // namespace galley::image
