// The element type and layout of a batch's tensor, with their names on the
// wire, in transform specs and in Python ("uint8", "NCHW", ...): the one
// place those names are written. Constant functions; safe from any thread.
#ifndef GALLEY_TENSOR_FORMAT_H_
#define GALLEY_TENSOR_FORMAT_H_

#include <optional>
#include <string_view>

namespace galley {

enum class DType { kUInt8, kFloat32 };
enum class Layout { kNCHW, kNHWC };

constexpr std::string_view DTypeName(DType dtype) {
  return dtype == DType::kUInt8 ? "uint8" : "float32";
}
constexpr std::optional<DType> ParseDType(std::string_view name) {
  if (name == DTypeName(DType::kUInt8)) return DType::kUInt8;
  if (name == DTypeName(DType::kFloat32)) return DType::kFloat32;
  return std::nullopt;
}

constexpr std::string_view LayoutName(Layout layout) {
  return layout == Layout::kNCHW ? "NCHW" : "NHWC";
}
constexpr std::optional<Layout> ParseLayout(std::string_view name) {
  if (name == LayoutName(Layout::kNCHW)) return Layout::kNCHW;
  if (name == LayoutName(Layout::kNHWC)) return Layout::kNHWC;
  return std::nullopt;
}

}  // namespace galley

#endif  // GALLEY_TENSOR_FORMAT_H_
