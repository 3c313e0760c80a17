#include "galley/dataset/manifest_table.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_set>

#include "galley/dataset/sample_fields.h"
#include "wire/field_record.h"
#include "wire/messages.h"

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

std::string_view Trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// A decimal number as a cell holds it (an optional sign, then what
// std::from_chars reads), the whole text; finite only.
bool ParseNumber(std::string_view text, double* value) {
  const bool negative = !text.empty() && text.front() == '-';
  if (!text.empty() && (text.front() == '+' || text.front() == '-')) text.remove_prefix(1);
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, *value);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(*value)) return false;
  if (negative) *value = -*value;
  return true;
}

// An integer literal as a cell holds it (spaces around it and a leading
// '+' allowed), within int64.
bool ParseIntegerCell(std::string_view text, int64_t* value) {
  text = Trimmed(text);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  return ParseIntegerText(text, value);
}

// The ValueKind of a JSON line's value.
ManifestTable::ValueKind JsonKind(const json& value) {
  if (value.is_null()) return ManifestTable::kEmpty;
  if (value.is_boolean()) return ManifestTable::kBool;
  if (value.is_number_unsigned()) {
    return value.get<uint64_t>() <= uint64_t{std::numeric_limits<int64_t>::max()}
               ? ManifestTable::kInteger
               : ManifestTable::kFloat;
  }
  if (value.is_number_integer()) return ManifestTable::kInteger;
  if (value.is_number()) return ManifestTable::kFloat;
  if (value.is_string()) return ManifestTable::kString;
  return ManifestTable::kJsonContainer;
}

// How deep a JSON line may nest arrays and objects, so that building and
// printing its tree (both recursive) stays shallow. Its top-level members
// are counted too (JsonShape), so that a line with too many keys is refused
// before it is parsed (an ordered object finds each key by a linear search).
constexpr int kMaxDepth = 64;

Result<json> ParseLine(std::string_view line, uint32_t max_members) {
  const JsonShape shape = ScanJsonShape(line);
  if (shape.depth > kMaxDepth) {
    return Status::InvalidArgument("the line nests deeper than " + std::to_string(kMaxDepth));
  }
  if (shape.top_level_members > max_members) {
    return Status::InvalidArgument("the line has more than " + std::to_string(max_members) +
                                   " keys (galleyd's max_manifest_columns)");
  }
  if (!json::accept(line)) return Status::InvalidArgument("the line is not JSON");
  return json::parse(line);
}

}  // namespace

bool CsvScanner::Feed(std::string_view text, std::vector<std::string>* cells, size_t max_cells) {
  const auto append = [&](char c) {
    cell_empty_ = false;
    if (cells != nullptr) cells->back().push_back(c);
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted_) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        append('"');
        ++i;
      } else if (c == '"') {
        quoted_ = false;  // a quote ending a fed piece ends the cell: a line break follows
      } else {
        append(c);
      }
    } else if (c == ',') {
      if (++cell_count_ > max_cells) return false;
      if (cells != nullptr) cells->emplace_back();
      cell_empty_ = true;
      was_quoted_ = false;
    } else if (c == '"' && cell_empty_ && !was_quoted_) {
      quoted_ = was_quoted_ = true;
    } else {
      append(c);
    }
  }
  return true;
}

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
  CsvScanner scanner;
  if (!scanner.Feed(line, &cells, max_columns_)) {
    GALLEY_RETURN_IF_ERROR(CheckColumnCount(size_t{max_columns_} + 1));
  }
  if (scanner.in_quotes()) {
    return Status::InvalidArgument(
        "a quoted cell is not closed before the end of the file (a cell may span lines only "
        "inside double quotes, as RFC 4180 writes it)");
  }
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
  kinds_.assign(field_names_.size(), 0);
  return Status::Ok();
}

Result<ManifestTable::Row> ManifestTable::Parse(std::string_view line) {
  Row row;
  std::vector<std::string> values;  // per column but the image
  std::vector<uint8_t> kinds(field_names_.size(), 0);
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
      kinds[values.size()] |= JsonKind(*it);
      values.push_back(it->dump(-1, ' ', false, json::error_handler_t::replace));
      if (values.size() == 1) row.label = it->is_string() ? it->get<std::string>() : values.back();
    }
  } else {
    GALLEY_ASSIGN_OR_RETURN(auto cells, SplitCells(line));
    if (cells.size() != columns_.size()) {
      return Status::InvalidArgument("the row has " + std::to_string(cells.size()) +
                                     " cells, the header " + std::to_string(columns_.size()));
    }
    for (size_t i = 0, field = 0; i < cells.size(); ++i) {
      if (i == image_index_) {
        row.image = cells[i];
        continue;
      }
      kinds[field++] |= CellKind(cells[i]);
      values.push_back(std::move(cells[i]));
    }
    if (!values.empty()) row.label = values.front();
  }
  if (row.image.empty()) return Status::InvalidArgument("the image column is empty");
  for (const std::string& value : values) AppendText(&row.record, value);
  // Noted only for a row that is kept.
  for (size_t f = 0; f < kinds.size(); ++f) kinds_[f] |= kinds[f];
  return row;
}

ManifestTable::ValueKind ManifestTable::CellKind(std::string_view cell) {
  if (cell.empty()) return kEmpty;
  const std::string_view text = Trimmed(cell);
  if (text.empty()) return kString;
  if (text.front() == '[' || text.front() == '{') {
    // accept() builds no tree, whatever the nesting.
    return json::accept(text) ? kJsonContainer : kString;
  }
  std::string_view digits = text;
  if (digits.front() == '+' || digits.front() == '-') digits.remove_prefix(1);
  // "007" and "007.5" are strings; "inf", "nan" and "0x1f" never numbers.
  if (digits.empty() ||
      !(std::isdigit(static_cast<unsigned char>(digits.front())) || digits.front() == '.')) {
    return kString;
  }
  if (digits.size() > 1 && digits[0] == '0' && std::isdigit(static_cast<unsigned char>(digits[1])))
    return kString;
  if (std::all_of(digits.begin(), digits.end(),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    // An integer literal beyond int64 stays a string: as a float it would
    // lose digits (a 20-digit id).
    int64_t integer = 0;
    return ParseIntegerCell(text, &integer) ? kInteger : kString;
  }
  double number = 0;
  return ParseNumber(text, &number) ? kFloat : kString;
}

std::string ManifestTable::TypedValue(ColumnType type, std::string_view cell) {
  switch (type) {
    case ColumnType::kAsWritten:
      return std::string(cell);
    case ColumnType::kInteger: {
      int64_t integer = 0;
      ParseIntegerCell(cell, &integer);
      return std::to_string(integer);
    }
    case ColumnType::kFloat: {
      double number = 0;
      // Python's json reads NaN, which JSON itself lacks.
      if (cell.empty() || !ParseNumber(Trimmed(cell), &number)) return "NaN";
      return json(number).dump();
    }
    case ColumnType::kJson:
      return cell.empty() ? "null" : std::string(Trimmed(cell));
    case ColumnType::kText:
      break;
  }
  if (cell.empty()) return "null";
  // Bytes that are not UTF-8 stay as they are, inside quotes: galleyd fails
  // the sample for a job that names the column (a bad cell, like a broken
  // image) rather than serve it altered.
  if (!wire::IsValidUtf8(cell)) return "\"" + std::string(cell) + "\"";
  return json(std::string(cell)).dump();
}

std::vector<ManifestTable::ColumnType> ManifestTable::column_types() const {
  std::vector<ColumnType> types;
  for (const uint8_t kinds : kinds_) {
    const uint8_t given = kinds & ~kEmpty;
    if (format_ == TableFormat::kJsonLines) {
      types.push_back(ColumnType::kAsWritten);
    } else if (kinds == kInteger) {
      types.push_back(ColumnType::kInteger);
    } else if (given != 0 && (given & ~(kInteger | kFloat)) == 0) {
      types.push_back(ColumnType::kFloat);
    } else if (given == kJsonContainer) {
      types.push_back(ColumnType::kJson);
    } else {
      types.push_back(ColumnType::kText);
    }
  }
  return types;
}

std::vector<std::string> ManifestTable::collations() const {
  std::vector<std::string> collations;
  for (const uint8_t kinds : kinds_) {
    const uint8_t given = kinds & ~kEmpty;
    if (kinds == kInteger) {
      collations.push_back("int");
    } else if (given != 0 && (given & ~(kInteger | kFloat)) == 0) {
      collations.push_back("float");
    } else if (kinds == kBool) {
      collations.push_back("bool");
    } else {
      collations.push_back("");
    }
  }
  return collations;
}

bool ManifestTable::integer_labels() const { return !kinds_.empty() && kinds_[0] == kInteger; }

bool ManifestTable::named_labels() const {
  if (kinds_.empty() || (kinds_[0] & kEmpty) != 0) return false;
  return format_ == TableFormat::kJsonLines ? kinds_[0] == kString
                                            : column_types()[0] == ColumnType::kText;
}

}  // namespace galley
