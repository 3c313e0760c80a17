// The last phase of a sample: SampleWriter turns the rows of the final image
// into the output sample in the layout and dtype the spec asks for (uint8
// NCHW or NHWC, or float32 normalised as ToTensor + Normalize would give),
// mirrored when a horizontal flip is still pending and mapped through a
// per-channel table when the plan's trailing table ops are folded into the
// write; WriteErasures then applies RandomErasing to the finished sample.
//
// A new output format is written here; ops that rewrite pixels belong to
// the plan (sample_plan.h) and its runner (plan_runner.h).
//
// Thread-safety: a SampleWriter writes one sample from one thread; the free
// functions keep no state.
#ifndef GALLEY_SERVER_IMAGE_SAMPLE_WRITER_H_
#define GALLEY_SERVER_IMAGE_SAMPLE_WRITER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "galley/image/pixel_ops.h"
#include "galley/image/resample.h"
#include "galley/image/sample_plan.h"
#include "galley/image/transform_spec.h"

namespace galley::image {

// float32 output per channel and byte value: (float(x) / 255 - mean) / std,
// computed in float as torchvision does, so output matches it bit for bit.
using NormalizationTable = std::array<std::array<float, 256>, 3>;
NormalizationTable MakeNormalizationTable(const OutputSpec& output);

// Bytes of one sample: 3 * H * W * (1 for uint8, 4 for float32).
size_t SampleBytes(const TransformSpec& spec);

// Turns interleaved RGB rows of the final image into the sample: NCHW or
// NHWC, uint8 or normalised float32, mirrored when flipped, each byte first
// mapped through `lut` when given (the plan's trailing table ops, folded
// into the write). As a resampler sink it hands out the destination row
// itself when no conversion is needed. `table` (and `lut`, when given) must
// outlive the writer; `row` is the caller's reusable row buffer.
class SampleWriter : public RgbRowSink {
 public:
  SampleWriter(int width, int height, bool flipped, const OutputSpec& output,
               const NormalizationTable& table, const ChannelLut* lut, std::byte* dst,
               std::vector<uint8_t>& row);

  uint8_t* Row(int y) override;
  void Done(int y) override;

  // Writes row y of the final image.
  void Write(int y, const uint8_t* rgb) const;

 private:
  void WriteBytes(int y, const uint8_t* rgb) const;
  void WriteFloats(int y, const uint8_t* rgb) const;

  int width_;
  size_t plane_;
  bool flipped_;
  Layout layout_;
  DType dtype_;
  const NormalizationTable* table_;
  std::array<float, 3> mean_, std_;
  bool computed_ = true;           // float NCHW without a LUT: computed rather than looked up
  NormalizationTable composed_{};  // float output through a LUT
  const ChannelLut* lut_;          // uint8 output only
  std::byte* dst_;
  bool direct_;
  uint8_t* row_ = nullptr;
  uint8_t* channel_row_ = nullptr;  // float NCHW: one row split into channels
};

// Writes RandomErasing's rectangles into the finished width x height sample.
void WriteErasures(std::span<const Erasure> erasures, const OutputSpec& output, int width,
                   int height, std::byte* dst);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_SAMPLE_WRITER_H_
