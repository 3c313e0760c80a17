// ManifestTable: a manifest with a header row, read record by record: CSV,
// TSV or JSON lines. One column names each item's image (a path relative
// to the manifest's folder); every other column is a field of the item
// (JobSpec::fields), which the job receives as JSON text and decodes.
//
// A CSV or TSV column is typed once, over the whole column, so that every
// batch of it has one type (docs/datasets.md, "Column types"): integers
// where every non-empty cell is an integer literal without a leading zero
// that fits 64 bits (and no cell is empty); floats where every non-empty
// cell is a finite decimal number (integers included), an empty cell then
// NaN; JSON where every non-empty cell is a JSON array or object (a
// multi-label list "[3, 17]"), an empty cell then null; otherwise strings,
// exactly as written ("007" stays "007", as Python's csv module reads it),
// an empty cell then null. Spaces around a number or a JSON value are
// allowed. CSV follows RFC 4180 (double quotes around a cell, "" for a
// quote, a line break inside quotes part of the cell: a record may span
// lines). A JSON lines file holds one object per line whose keys are the
// columns; the first line decides them and each later line must have the
// same keys; its values keep their own JSON types.
//
// The first non-image column also gives the item's label when it is an
// integer column (the label) or a string column without an empty cell (a
// class name); otherwise the items are unlabelled.
//
// Thread-safety: a plain value; one thread at a time.
#ifndef GALLEY_SERVER_DATASET_MANIFEST_TABLE_H_
#define GALLEY_SERVER_DATASET_MANIFEST_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "galley/status.h"

namespace galley {

enum class TableFormat { kCsv, kTsv, kJsonLines };

// The table format of a manifest named `path`: JSON lines for `.jsonl`,
// CSV for `.csv`, TSV for anything else (read with a header row only when
// the job names fields, so headerless `path<TAB>label` files keep working).
TableFormat TableFormatOf(const std::filesystem::path& path);
// Whether `path` is read with a header row whatever the job asks (.csv,
// .jsonl).
bool HasHeaderByName(const std::filesystem::path& path);

// Reads CSV text as RFC 4180 writes it, piece by piece (a record's lines,
// each fed after the '\n' that ended the one before): a double quote at the
// start of a cell opens a quoted cell, "" inside it is a quote, and a quote
// closes it; a comma or a line break inside quotes belongs to the cell. A
// quote elsewhere is an ordinary character.
//
// Thread-safety: a plain value; one thread at a time.
class CsvScanner {
 public:
  // Reads `text`. With `cells` (holding at least the current cell), the
  // characters go into cells->back() and each comma starts a new cell.
  // False, having stopped there, when the record would pass `max_cells`.
  bool Feed(std::string_view text, std::vector<std::string>* cells = nullptr,
            size_t max_cells = SIZE_MAX);
  // Whether the text fed so far leaves a quoted cell open: the record goes
  // on past the line break.
  bool in_quotes() const { return quoted_; }

 private:
  bool quoted_ = false;
  bool was_quoted_ = false;  // the current cell was quoted (and closed)
  bool cell_empty_ = true;
  size_t cell_count_ = 1;
};

class ManifestTable {
 public:
  // What a row gives its item.
  struct Row {
    std::string image;  // the image column's text
    std::string label;  // the first field's text ("" when there is none)
    // The fields (wire/field_record.h): a CSV or TSV row's cells as
    // written, which TypedValue turns into JSON text once the column's type
    // is known; a JSON line's values as JSON text.
    std::vector<uint8_t> record;
  };

  // How a field column's values reach the job, decided over the whole
  // column (the header comment says by which rule).
  enum class ColumnType : uint8_t { kInteger, kFloat, kJson, kText, kAsWritten };

  // What kinds of value a column holds, as bits.
  enum ValueKind : uint8_t {
    kEmpty = 1,    // an empty cell, a JSON null
    kInteger = 2,  // an integer literal without a leading zero, within int64
    kFloat = 4,    // another finite decimal number
    kJsonContainer = 8,
    kString = 16,  // anything else (a JSON string)
    kBool = 32,    // a JSON true or false
  };

  // `image_column` names the image column; "" = the first. A header (and
  // so every row) has at most `max_columns` columns.
  ManifestTable(TableFormat format, std::string image_column, uint32_t max_columns)
      : format_(format), image_column_(std::move(image_column)), max_columns_(max_columns) {}

  // Reads the header row (a JSON line's keys). InvalidArgument for more
  // than max_columns columns (found before the cells are all split or the
  // line parsed), an empty or repeated column name (found in one pass), or
  // an image column the header lacks.
  Status Header(std::string_view line);
  // Reads one data row, noting the kinds of its values. InvalidArgument,
  // saying what, for a row that does not parse or has another number of
  // columns.
  Result<Row> Parse(std::string_view line);
  // Whether the header line is also the first row (a JSON line).
  bool header_is_a_row() const { return format_ == TableFormat::kJsonLines; }
  // The field columns, in header order (the image column left out).
  const std::vector<std::string>& field_names() const { return field_names_; }
  // After Header: the column naming the images.
  const std::string& image_column() const { return columns_[image_index_]; }

  // After the last row: each field column's type, and what a batch of it
  // collates to: "int" (an int64 tensor), "float" (float64, null as NaN),
  // "bool", or "" (a list of the values).
  std::vector<ColumnType> column_types() const;
  std::vector<std::string> collations() const;
  // Whether the first field column gives labels: integers, or class names.
  bool integer_labels() const;
  bool named_labels() const;

  // A cell as written, as the JSON text of a column of `type`.
  static std::string TypedValue(ColumnType type, std::string_view cell);
  // The kind of a CSV or TSV cell as written.
  static ValueKind CellKind(std::string_view cell);

 private:
  Result<std::vector<std::string>> SplitCells(std::string_view line) const;

  // InvalidArgument when `cells` columns are more than max_columns_.
  Status CheckColumnCount(size_t cells) const;

  const TableFormat format_;
  const std::string image_column_;
  const uint32_t max_columns_;
  std::vector<std::string> columns_;
  size_t image_index_ = 0;
  std::vector<std::string> field_names_;
  // Per field column, the ValueKind bits its values showed.
  std::vector<uint8_t> kinds_;
};

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_MANIFEST_TABLE_H_
