#include "galley/dataset/manifest_table.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_set>

#include "galley/dataset/sample_fields.h"
#include "wire/field_record.h"

namespace galley {
namespace {

using json = nlohmann::ordered_json;  // a JSON line's keys in their written order

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

void AppendText(std::vector<uint8_t>* record, const std::string& text) {
  wire::AppendFieldValue(record,
                         std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

// A CSV or TSV cell as JSON text, typed as a spreadsheet would; the kind of
// label it makes.
std::string TypedCell(const std::string& cell, ManifestTable::Row::LabelKind* kind) {
  using Kind = ManifestTable::Row::LabelKind;
  *kind = Kind::kOther;
  if (cell.empty()) return "null";
  int64_t integer = 0;
  if (ParseIntegerText(cell, &integer)) {
    *kind = Kind::kInteger;
    return std::to_string(integer);
  }
  double number = 0;
  const char* end = cell.data() + cell.size();
  const auto [ptr, ec] = std::from_chars(cell.data(), end, number);
  if (ec == std::errc() && ptr == end && std::isfinite(number)) return json(number).dump();
  // Passed as written: accept() builds no tree, whatever the nesting.
  if ((cell.front() == '[' || cell.front() == '{') && json::accept(cell)) return cell;
  *kind = Kind::kText;
  return json(cell).dump(-1, ' ', false, json::error_handler_t::replace);
}

// Whether a JSON line nests arrays and objects at most kMaxDepth deep, so
// that building and printing its tree (both recursive) stays shallow; counts
// into `members` the top-level object's members (its commas at depth 1,
// plus one), so that a line with too many keys is refused before it is
// parsed (an ordered object finds each key by a linear search).
constexpr int kMaxDepth = 64;
bool Shallow(std::string_view text, size_t* members) {
  int depth = 0;
  bool in_string = false;
  *members = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 1) {
      ++*members;
    }
  }
  return true;
}

Result<json> ParseLine(std::string_view line, uint32_t max_members) {
  size_t members = 0;
  if (!Shallow(line, &members)) {
    return Status::InvalidArgument("the line nests deeper than " + std::to_string(kMaxDepth));
  }
  if (members > max_members) {
    return Status::InvalidArgument("the line has more than " + std::to_string(max_members) +
                                   " keys (galleyd's max_manifest_columns)");
  }
  if (!json::accept(line)) return Status::InvalidArgument("the line is not JSON");
  return json::parse(line);
}

}  // namespace

TableFormat TableFormatOf(const std::filesystem::path& path) {
  const std::string suffix = Lower(path.extension().string());
  if (suffix == ".jsonl") return TableFormat::kJsonLines;
  if (suffix == ".csv") return TableFormat::kCsv;
  return TableFormat::kTsv;
}

bool HasHeaderByName(const std::filesystem::path& path) {
  const std::string suffix = Lower(path.extension().string());
  return suffix == ".csv" || suffix == ".jsonl";
}

Status ManifestTable::CheckColumnCount(size_t cells) const {
  if (cells <= max_columns_) return Status::Ok();
  return Status::InvalidArgument(
      "the line has more than " + std::to_string(max_columns_) +
      " columns (galleyd's max_manifest_columns); ask the node's operator to raise it");
}

Result<std::vector<std::string>> ManifestTable::SplitCells(std::string_view line) const {
  std::vector<std::string> cells(1);
  if (format_ == TableFormat::kTsv) {
    for (char c : line) {
      if (c == '\t') {
        GALLEY_RETURN_IF_ERROR(CheckColumnCount(cells.size() + 1));
        cells.emplace_back();
      } else {
        cells.back().push_back(c);
      }
    }
    return cells;
  }
  bool quoted = false, was_quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cells.back().push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cells.back().push_back(c);
      }
    } else if (c == ',') {
      GALLEY_RETURN_IF_ERROR(CheckColumnCount(cells.size() + 1));
      cells.emplace_back();
      was_quoted = false;
    } else if (c == '"' && cells.back().empty() && !was_quoted) {
      quoted = was_quoted = true;
    } else {
      cells.back().push_back(c);
    }
  }
  if (quoted) return Status::InvalidArgument("a quoted cell is not closed on its line");
  return cells;
}

Status ManifestTable::Header(std::string_view line) {
  if (format_ == TableFormat::kJsonLines) {
    GALLEY_ASSIGN_OR_RETURN(const json first, ParseLine(line, max_columns_));
    if (!first.is_object()) return Status::InvalidArgument("the first line is not a JSON object");
    for (const auto& [key, value] : first.items()) columns_.push_back(key);
  } else {
    GALLEY_ASSIGN_OR_RETURN(columns_, SplitCells(line));
  }
  std::unordered_set<std::string_view> seen;
  seen.reserve(columns_.size());
  for (const std::string& column : columns_) {
    if (column.empty()) return Status::InvalidArgument("the header has an empty column name");
    if (!seen.insert(column).second) {
      return Status::InvalidArgument("the header names column '" + column + "' twice");
    }
  }
  if (columns_.empty()) return Status::InvalidArgument("the header names no column");
  image_index_ = 0;
  if (!image_column_.empty()) {
    auto it = std::find(columns_.begin(), columns_.end(), image_column_);
    if (it == columns_.end()) {
      return Status::InvalidArgument("the header has no column '" + image_column_ +
                                     "' (image_key) for the images");
    }
    image_index_ = static_cast<size_t>(it - columns_.begin());
  }
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (i != image_index_) field_names_.push_back(columns_[i]);
  }
  return Status::Ok();
}

Result<ManifestTable::Row> ManifestTable::Parse(std::string_view line) const {
  Row row;
  std::vector<std::string> values;  // JSON text per column but the image
  std::vector<Row::LabelKind> kinds;
  if (format_ == TableFormat::kJsonLines) {
    GALLEY_ASSIGN_OR_RETURN(const json object, ParseLine(line, max_columns_));
    if (!object.is_object() || object.size() != columns_.size()) {
      return Status::InvalidArgument("the line is not an object with the first line's " +
                                     std::to_string(columns_.size()) + " keys");
    }
    // Rows usually repeat the first line's key order: each key is then
    // found where the walk is, not by a search through the object.
    auto in_order = object.begin();
    for (size_t i = 0; i < columns_.size(); ++i) {
      auto it = in_order != object.end() && in_order.key() == columns_[i]
                    ? in_order
                    : object.find(columns_[i]);
      if (in_order != object.end()) ++in_order;
      if (it == object.end()) {
        return Status::InvalidArgument("the line has no key '" + columns_[i] + "'");
      }
      if (i == image_index_) {
        if (!it->is_string()) {
          return Status::InvalidArgument("'" + columns_[i] + "' is not a path string");
        }
        row.image = it->get<std::string>();
        continue;
      }
      kinds.push_back(it->is_number_integer() ? Row::LabelKind::kInteger
                      : it->is_string()       ? Row::LabelKind::kText
                                              : Row::LabelKind::kOther);
      values.push_back(it->dump(-1, ' ', false, json::error_handler_t::replace));
      if (kinds.size() == 1) row.label = it->is_string() ? it->get<std::string>() : values.back();
    }
  } else {
    GALLEY_ASSIGN_OR_RETURN(auto cells, SplitCells(line));
    if (cells.size() != columns_.size()) {
      return Status::InvalidArgument("the row has " + std::to_string(cells.size()) +
                                     " cells, the header " + std::to_string(columns_.size()));
    }
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i == image_index_) {
        row.image = cells[i];
        continue;
      }
      Row::LabelKind kind;
      values.push_back(TypedCell(cells[i], &kind));
      kinds.push_back(kind);
      if (kinds.size() == 1) row.label = cells[i];
    }
  }
  if (row.image.empty()) return Status::InvalidArgument("the image column is empty");
  if (!kinds.empty()) row.label_kind = kinds.front();
  for (const std::string& value : values) AppendText(&row.record, value);
  return row;
}

}  // namespace galley
