// ManifestTable: a manifest with a header row, read line by line: CSV,
// TSV or JSON lines. One column names each item's image (a path relative
// to the manifest's folder); every other column is a field of the item
// (JobSpec::fields), kept as JSON text so that the job decodes ints,
// floats, strings, lists and objects as they were written.
//
// CSV and TSV cells are typed as a spreadsheet would: an integer, a finite
// decimal number, a JSON array or object (a multi-label list "[3, 17]"), an
// empty cell as null, anything else a string. CSV follows RFC 4180 within a
// line (double quotes around a cell, "" for a quote); a quoted cell may not
// span lines. A JSON lines file holds one object per line whose keys are
// the columns; the first line decides them and each later line must have
// the same keys.
//
// The first non-image column also gives the item's label when every row
// holds an integer there (the label) or every row a plain string (a class
// name); otherwise the items are unlabelled.
//
// Thread-safety: a plain value; one thread at a time.
#ifndef GALLEY_SERVER_DATASET_MANIFEST_TABLE_H_
#define GALLEY_SERVER_DATASET_MANIFEST_TABLE_H_

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

class ManifestTable {
 public:
  // What a row gives its item.
  struct Row {
    std::string image;  // the image column's text
    std::string label;  // the first field's text ("" when there is none)
    enum class LabelKind { kInteger, kText, kOther } label_kind = LabelKind::kOther;
    std::vector<uint8_t> record;  // the fields, as JSON text (wire/field_record.h)
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
  // Reads one data row. InvalidArgument, saying what, for a row that does
  // not parse or has another number of columns.
  Result<Row> Parse(std::string_view line) const;
  // Whether the header line is also the first row (a JSON line).
  bool header_is_a_row() const { return format_ == TableFormat::kJsonLines; }
  // The field columns, in header order (the image column left out).
  const std::vector<std::string>& field_names() const { return field_names_; }

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
};

}  // namespace galley

#endif  // GALLEY_SERVER_DATASET_MANIFEST_TABLE_H_
