#include "server/image/transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <utility>

#include "server/image/sample_random.h"

namespace galley::image {
namespace {

// Bounds the memory one sample may take on its way to the output: a Resize
// of the shorter side on a needle-thin image could otherwise ask for gigabytes.
constexpr int64_t kMaxIntermediatePixels = int64_t{1} << 26;

// Python's round(): halves go to the even neighbour (default FE_TONEAREST).
int RoundHalfEven(double value) { return static_cast<int>(std::nearbyint(value)); }

struct Rect {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};

// One geometric step of a sample's plan. A crop rectangle is in the
// coordinates of the image as torchvision would see it at that point (after
// any earlier flip) and may extend past its edges, which reads as zeros.
struct Step {
  enum class Kind { kCrop, kResize, kFlip };
  Kind kind = Kind::kFlip;
  Rect rect;
  int width = 0;  // resize target
  int height = 0;
  Interpolation interpolation = Interpolation::kBilinear;
};

// The steps of one sample. Fixed capacity, so planning allocates nothing.
struct Plan {
  std::array<Step, 2 * kMaxTransformOps> steps;
  int count = 0;
  void Add(const Step& step) { steps[count++] = step; }
};

// torchvision's RandomResizedCrop.get_params: ten tries at a random area and
// log-uniform aspect ratio, then a centred crop clamped to the ratio range.
Rect RandomResizedCropRect(int width, int height, const TransformOp& op, SampleRandom& random) {
  const double area = static_cast<double>(width) * height;
  const double log_ratio_low = std::log(op.ratio[0]);
  const double log_ratio_high = std::log(op.ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * random.Uniform(op.scale[0], op.scale[1]);
    const double aspect_ratio = std::exp(random.Uniform(log_ratio_low, log_ratio_high));
    const int w = RoundHalfEven(std::sqrt(target_area * aspect_ratio));
    const int h = RoundHalfEven(std::sqrt(target_area / aspect_ratio));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int y = static_cast<int>(random.UniformInt(0, height - h));
      const int x = static_cast<int>(random.UniformInt(0, width - w));
      return {x, y, w, h};
    }
  }
  const double in_ratio = static_cast<double>(width) / height;
  int w = width;
  int h = height;
  if (in_ratio < op.ratio[0]) {
    h = RoundHalfEven(w / op.ratio[0]);
  } else if (in_ratio > op.ratio[1]) {
    w = RoundHalfEven(h * op.ratio[1]);
  }
  return {(width - w) / 2, (height - h) / 2, w, h};
}

// torchvision's center_crop, padding included: a side longer than the image
// is padded with zeros, (c - n) // 2 before and the rest after.
Rect CenterCropRect(int width, int height, int crop_height, int crop_width) {
  auto offset = [](int n, int c) {
    return c > n ? -((c - n) / 2) : RoundHalfEven((n - c) / 2.0);
  };
  return {offset(width, crop_width), offset(height, crop_height), crop_width, crop_height};
}

Result<Plan> MakePlan(const TransformSpec& spec, int width, int height, SampleRandom& random) {
  Plan plan;
  auto add_resize = [&](int w, int h, Interpolation interpolation) -> Status {
    if (static_cast<int64_t>(w) * h > kMaxIntermediatePixels) {
      return Status::ResourceExhausted("transform would resize a " + std::to_string(width) + "x" +
                                       std::to_string(height) + " image to " + std::to_string(w) +
                                       "x" + std::to_string(h));
    }
    Step step;
    step.kind = Step::Kind::kResize;
    step.width = w;
    step.height = h;
    step.interpolation = interpolation;
    plan.Add(step);
    width = w;
    height = h;
    return Status::Ok();
  };
  auto add_crop = [&](const Rect& rect) {
    Step step;
    step.kind = Step::Kind::kCrop;
    step.rect = rect;
    plan.Add(step);
    width = rect.width;
    height = rect.height;
  };
  for (const TransformOp& op : spec.ops) {
    switch (op.kind) {
      case OpKind::kRandomResizedCrop:
        add_crop(RandomResizedCropRect(width, height, op, random));
        GALLEY_RETURN_IF_ERROR(add_resize(op.size[1], op.size[0], op.interpolation));
        break;
      case OpKind::kResize:
        if (op.size.size() == 2) {
          GALLEY_RETURN_IF_ERROR(add_resize(op.size[1], op.size[0], op.interpolation));
        } else {
          // _compute_resized_output_size: the shorter side becomes size, the
          // longer one int(size * long / short), truncated.
          const int64_t shorter = std::min(width, height);
          const int64_t longer = std::max(width, height);
          const int new_short = op.size[0];
          const double new_long_exact = static_cast<double>(new_short * longer) / shorter;
          if (new_long_exact > static_cast<double>(kMaxIntermediatePixels)) {
            return Status::ResourceExhausted("transform Resize: image too elongated");
          }
          const int new_long = static_cast<int>(new_long_exact);
          const bool portrait = width <= height;
          GALLEY_RETURN_IF_ERROR(add_resize(portrait ? new_short : new_long,
                                            portrait ? new_long : new_short, op.interpolation));
        }
        break;
      case OpKind::kCenterCrop:
        add_crop(CenterCropRect(width, height, op.size[0], op.size[1]));
        break;
      case OpKind::kRandomHorizontalFlip:
        // torchvision: flip when torch.rand(1) < p.
        if (random.Uniform(0.0, 1.0) < op.p) {
          Step step;
          step.kind = Step::Kind::kFlip;
          plan.Add(step);
        }
        break;
    }
  }
  return plan;
}

int CvInterpolation(Interpolation interpolation, int in_width, int in_height, int out_width,
                    int out_height) {
  if (interpolation == Interpolation::kNearest) return cv::INTER_NEAREST_EXACT;  // PIL's rounding
  // PIL-backed torchvision antialiases when shrinking; INTER_AREA is OpenCV's
  // antialiasing resampler. Enlarging (on either axis) interpolates.
  if (out_width <= in_width && out_height <= in_height) return cv::INTER_AREA;
  return interpolation == Interpolation::kBicubic ? cv::INTER_CUBIC : cv::INTER_LINEAR;
}

// Two reusable HWC buffers per thread, used alternately so a step can read
// from one while writing the other.
class Scratch {
 public:
  cv::Mat Take(int width, int height, int avoid) {
    const int index = avoid == 0 ? 1 : 0;
    auto& buffer = buffers_[index];
    const size_t bytes = static_cast<size_t>(width) * height * 3;
    if (buffer.size() < bytes) buffer.resize(bytes);
    taken_ = index;
    return cv::Mat(height, width, CV_8UC3, buffer.data());
  }
  int taken() const { return taken_; }

 private:
  std::array<std::vector<uint8_t>, 2> buffers_;
  int taken_ = -1;
};

// The image between steps: a view (often a ROI of the source, no copy), the
// pending horizontal flip, and, for scaled decodes, how many stored pixels
// stand for one logical pixel until the first resize absorbs the difference.
struct Current {
  cv::Mat mat;
  int buffer = -1;  // scratch buffer holding mat, or -1 for the source
  bool flipped = false;
  int logical_width = 0;
  int logical_height = 0;
  double scale_x = 1.0;
  double scale_y = 1.0;
  bool scaled() const { return scale_x != 1.0 || scale_y != 1.0; }
};

void Crop(Rect rect, Current& current, Scratch& scratch) {
  // A flip is applied at the end, so a crop of the flipped image is the
  // mirrored crop of the unflipped one.
  if (current.flipped) rect.x = current.logical_width - rect.x - rect.width;
  current.logical_width = rect.width;
  current.logical_height = rect.height;
  if (current.scaled()) {
    const int x0 = static_cast<int>(std::lround(rect.x * current.scale_x));
    const int y0 = static_cast<int>(std::lround(rect.y * current.scale_y));
    const int x1 = static_cast<int>(std::lround((rect.x + rect.width) * current.scale_x));
    const int y1 = static_cast<int>(std::lround((rect.y + rect.height) * current.scale_y));
    rect = {x0, y0, std::max(1, x1 - x0), std::max(1, y1 - y0)};
  }
  const cv::Rect wanted(rect.x, rect.y, rect.width, rect.height);
  const cv::Rect bounds(0, 0, current.mat.cols, current.mat.rows);
  if ((wanted & bounds) == wanted) {
    current.mat = current.mat(wanted);
    return;
  }
  cv::Mat padded = scratch.Take(rect.width, rect.height, current.buffer);
  padded.setTo(cv::Scalar::all(0));
  const cv::Rect inside = wanted & bounds;
  if (!inside.empty()) {
    current.mat(inside).copyTo(padded(inside - wanted.tl()));
  }
  current.mat = padded;
  current.buffer = scratch.taken();
}

void Resize(const Step& step, Current& current, Scratch& scratch) {
  const bool same_size = current.mat.cols == step.width && current.mat.rows == step.height;
  current.logical_width = step.width;
  current.logical_height = step.height;
  current.scale_x = current.scale_y = 1.0;
  if (same_size) return;
  cv::Mat resized = scratch.Take(step.width, step.height, current.buffer);
  // Horizontal flips commute with resampling (the filters are symmetric), so
  // the pending flip stays pending.
  cv::resize(current.mat, resized, resized.size(), 0, 0,
             CvInterpolation(step.interpolation, current.mat.cols, current.mat.rows, step.width,
                             step.height));
  current.mat = resized;
  current.buffer = scratch.taken();
}

void WriteUInt8(const cv::Mat& image, bool flipped, Layout layout, uint8_t* dst) {
  const int width = image.cols;
  const int height = image.rows;
  const size_t plane = static_cast<size_t>(width) * height;
  for (int y = 0; y < height; ++y) {
    const uint8_t* row = image.ptr<uint8_t>(y);
    if (layout == Layout::kNHWC) {
      uint8_t* out = dst + static_cast<size_t>(y) * width * 3;
      if (!flipped) {
        std::memcpy(out, row, static_cast<size_t>(width) * 3);
      } else {
        for (int x = 0; x < width; ++x) std::memcpy(out + x * 3, row + (width - 1 - x) * 3, 3);
      }
      continue;
    }
    uint8_t* r = dst + static_cast<size_t>(y) * width;
    uint8_t* g = r + plane;
    uint8_t* b = g + plane;
    for (int x = 0; x < width; ++x) {
      const uint8_t* pixel = row + (flipped ? width - 1 - x : x) * 3;
      r[x] = pixel[0];
      g[x] = pixel[1];
      b[x] = pixel[2];
    }
  }
}

void WriteFloat(const cv::Mat& image, bool flipped, Layout layout,
                const std::array<std::array<float, 256>, 3>& table, std::byte* dst) {
  const int width = image.cols;
  const int height = image.rows;
  const size_t plane = static_cast<size_t>(width) * height;
  // memcpy per value: dst need not be 4-byte aligned, and compilers turn
  // this into plain stores.
  auto store = [dst](size_t index, float value) {
    std::memcpy(dst + index * sizeof(float), &value, sizeof(float));
  };
  for (int y = 0; y < height; ++y) {
    const uint8_t* row = image.ptr<uint8_t>(y);
    const size_t row_start = static_cast<size_t>(y) * width;
    for (int x = 0; x < width; ++x) {
      const uint8_t* pixel = row + (flipped ? width - 1 - x : x) * 3;
      for (int c = 0; c < 3; ++c) {
        const size_t index =
            layout == Layout::kNCHW ? c * plane + row_start + x : (row_start + x) * 3 + c;
        store(index, table[c][pixel[c]]);
      }
    }
  }
}

}  // namespace

TransformPipeline::TransformPipeline(TransformSpec spec) : spec_(std::move(spec)) {
  signature_ = TransformSpecToJson(spec_).dump();
  for (int c = 0; c < 3; ++c) {
    const float mean = static_cast<float>(spec_.output.mean[c]);
    const float std = static_cast<float>(spec_.output.std[c]);
    for (int v = 0; v < 256; ++v) {
      normalized_[c][v] = (static_cast<float>(v) / 255.0f - mean) / std;
    }
  }
}

Result<TransformPipeline> TransformPipeline::FromJson(const nlohmann::json& spec) {
  GALLEY_ASSIGN_OR_RETURN(TransformSpec parsed, ParseTransformSpec(spec));
  return TransformPipeline(std::move(parsed));
}

nlohmann::json TransformPipeline::ToJson() const { return TransformSpecToJson(spec_); }

size_t TransformPipeline::sample_bytes() const {
  const size_t element = spec_.output.dtype == DType::kUInt8 ? 1 : sizeof(float);
  return size_t{3} * spec_.output_height * spec_.output_width * element;
}

bool TransformPipeline::is_random() const {
  return std::any_of(spec_.ops.begin(), spec_.ops.end(), [](const TransformOp& op) {
    return op.kind == OpKind::kRandomResizedCrop ||
           (op.kind == OpKind::kRandomHorizontalFlip && op.p > 0 && op.p < 1);
  });
}

Status TransformPipeline::Apply(const RgbImage& src, uint64_t seed, uint64_t epoch, uint64_t item,
                                std::span<std::byte> dst) const {
  return Run(src, src.width, src.height, seed, epoch, item, dst);
}

Status TransformPipeline::ApplyScaled(const RgbImage& scaled, int full_width, int full_height,
                                      uint64_t seed, uint64_t epoch, uint64_t item,
                                      std::span<std::byte> dst) const {
  if (full_width <= 0 || full_height <= 0 || full_width < scaled.width ||
      full_height < scaled.height) {
    return Status::InvalidArgument("ApplyScaled: full size must cover the scaled image");
  }
  return Run(scaled, full_width, full_height, seed, epoch, item, dst);
}

Status TransformPipeline::Run(const RgbImage& src, int logical_width, int logical_height,
                              uint64_t seed, uint64_t epoch, uint64_t item,
                              std::span<std::byte> dst) const {
  if (src.width <= 0 || src.height <= 0 ||
      src.pixels.size() != static_cast<size_t>(src.width) * src.height * 3) {
    return Status::InvalidArgument("transform input is not a well-formed RGB image");
  }
  if (dst.size() != sample_bytes()) {
    return Status::InvalidArgument("transform output buffer has " + std::to_string(dst.size()) +
                                   " bytes, the sample needs " + std::to_string(sample_bytes()));
  }
  SampleRandom random(seed, epoch, item);
  GALLEY_ASSIGN_OR_RETURN(const Plan plan, MakePlan(spec_, logical_width, logical_height, random));

  thread_local Scratch scratch;
  Current current;
  current.mat = cv::Mat(src.height, src.width, CV_8UC3, const_cast<uint8_t*>(src.pixels.data()));
  current.logical_width = logical_width;
  current.logical_height = logical_height;
  current.scale_x = static_cast<double>(src.width) / logical_width;
  current.scale_y = static_cast<double>(src.height) / logical_height;
  for (int i = 0; i < plan.count; ++i) {
    const Step& step = plan.steps[i];
    switch (step.kind) {
      case Step::Kind::kCrop:
        Crop(step.rect, current, scratch);
        break;
      case Step::Kind::kResize:
        Resize(step, current, scratch);
        break;
      case Step::Kind::kFlip:
        current.flipped = !current.flipped;
        break;
    }
  }
  if (current.scaled() || current.mat.cols != spec_.output_width ||
      current.mat.rows != spec_.output_height) {
    return Status::InvalidArgument(
        "pipeline has no resize after the crop, so it needs full-resolution pixels");
  }
  if (spec_.output.dtype == DType::kUInt8) {
    WriteUInt8(current.mat, current.flipped, spec_.output.layout,
               reinterpret_cast<uint8_t*>(dst.data()));
  } else {
    WriteFloat(current.mat, current.flipped, spec_.output.layout, normalized_, dst.data());
  }
  return Status::Ok();
}

Result<CropWindow> TransformPipeline::SourceWindow(int source_width, int source_height,
                                                   uint64_t seed, uint64_t epoch,
                                                   uint64_t item) const {
  if (source_width <= 0 || source_height <= 0) {
    return Status::InvalidArgument("SourceWindow: source size must be positive");
  }
  SampleRandom random(seed, epoch, item);
  GALLEY_ASSIGN_OR_RETURN(const Plan plan, MakePlan(spec_, source_width, source_height, random));
  // source = origin + pitch * current, per axis, in unflipped coordinates.
  double origin_x = 0, origin_y = 0, pitch_x = 1, pitch_y = 1;
  int width = source_width;
  int height = source_height;
  bool flipped = false;
  CropWindow window;
  window.min_decode_width = source_width;
  window.min_decode_height = source_height;
  bool resized = false;
  for (int i = 0; i < plan.count; ++i) {
    const Step& step = plan.steps[i];
    switch (step.kind) {
      case Step::Kind::kCrop: {
        const int x = flipped ? width - step.rect.x - step.rect.width : step.rect.x;
        origin_x += pitch_x * x;
        origin_y += pitch_y * step.rect.y;
        width = step.rect.width;
        height = step.rect.height;
        break;
      }
      case Step::Kind::kResize:
        if (!resized && (width != step.width || height != step.height)) {
          resized = true;
          window.resized_width = step.width;
          window.resized_height = step.height;
          const double region_width = pitch_x * width;  // in source pixels
          const double region_height = pitch_y * height;
          window.min_decode_width = std::min(
              source_width,
              static_cast<int>(std::ceil(source_width * step.width / region_width - 1e-9)));
          window.min_decode_height = std::min(
              source_height,
              static_cast<int>(std::ceil(source_height * step.height / region_height - 1e-9)));
        }
        pitch_x *= static_cast<double>(width) / step.width;
        pitch_y *= static_cast<double>(height) / step.height;
        width = step.width;
        height = step.height;
        break;
      case Step::Kind::kFlip:
        flipped = !flipped;
        break;
    }
  }
  const int x0 = std::clamp(static_cast<int>(std::floor(origin_x)), 0, source_width);
  const int y0 = std::clamp(static_cast<int>(std::floor(origin_y)), 0, source_height);
  const int x1 =
      std::clamp(static_cast<int>(std::ceil(origin_x + pitch_x * width)), 0, source_width);
  const int y1 =
      std::clamp(static_cast<int>(std::ceil(origin_y + pitch_y * height)), 0, source_height);
  window.x = x0;
  window.y = y0;
  window.width = x1 - x0;
  window.height = y1 - y0;
  return window;
}

}  // namespace galley::image
