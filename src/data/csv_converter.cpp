// convert csv: one label column plus feature columns, to float32 /train, /test.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>

#include "data/progress.h"
#include "data/random.h"
#include "ringtrain/core/check.h"
#include "ringtrain/data/converters.h"
#include "ringtrain/data/dataset_writer.h"
#include "ringtrain/data/output_guard.h"

namespace ringtrain {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\"");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\"");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split_line(const std::string& line, char delim) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t end = line.find(delim, pos);
    out.push_back(trim(line.substr(pos, end == std::string::npos ? std::string::npos : end - pos)));
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return out;
}

bool parse_float(const std::string& s, float& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtof(s.c_str(), &end);
  return end == s.c_str() + s.size() && errno == 0;
}

struct CsvTable {
  std::vector<float> x;  // rows x features
  std::vector<std::int32_t> y;
  std::size_t features = 0;
  std::vector<std::string> header;
  // Every row's label as written and its line, for labels that are names
  // ("cat"): classes are then assigned across all files (assign_text_labels).
  std::vector<std::string> label_text;
  std::vector<std::size_t> line_of_row;
  bool text_labels = false;
  bool labelled = true;  // false with --label-column none: y stays empty
  std::size_t rows = 0;
};

CsvTable read_csv(const std::string& path, const CsvConvertOptions& o) {
  std::ifstream in(path);
  RT_CHECK(in.good(), "CSV file {} cannot be opened (does it exist?)", path);
  RT_CHECK(o.header == "auto" || o.header == "yes" || o.header == "no",
           "--header '{}': expected auto, yes or no", o.header);
  CsvTable t;
  std::string line;
  std::size_t line_no = 0, label_col = 0;
  bool first = true;
  float probe = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty()) continue;
    std::vector<std::string> cells = split_line(line, o.delimiter);
    if (first) {
      first = false;
      bool is_header = o.header == "yes";
      const bool unlabelled = o.label_column == "none";
      const bool by_index =
          !unlabelled && o.label_column.find_first_not_of("0123456789") == std::string::npos;
      // A header has a name over a feature column; a label that is a name
      // ("cat,0.5,1.2") does not make the first row a header.
      const std::size_t named_label = by_index ? std::stoul(o.label_column) : cells.size();
      if (o.header == "auto")
        for (std::size_t c = 0; c < cells.size(); ++c)
          is_header = is_header || (c != named_label && !parse_float(cells[c], probe));
      if (is_header) t.header = cells;
      if (unlabelled) {
        label_col = cells.size();  // no column is the label
      } else if (!by_index) {
        RT_CHECK(is_header, "--label-column '{}' is a name but {} has no header row",
                 o.label_column, path);
        auto it = std::find(cells.begin(), cells.end(), o.label_column);
        RT_CHECK(it != cells.end(), "--label-column '{}': no such column in the header of {}",
                 o.label_column, path);
        label_col = static_cast<std::size_t>(it - cells.begin());
      } else {
        label_col = std::stoul(o.label_column);
      }
      RT_CHECK(unlabelled || label_col < cells.size(), "--label-column {}: {} has only {} columns",
               o.label_column, path, cells.size());
      RT_CHECK(cells.size() >= (unlabelled ? 1u : 2u),
               "{}: needs a label column and at least one feature column", path);
      t.features = unlabelled ? cells.size() : cells.size() - 1;
      t.labelled = !unlabelled;
      if (is_header) continue;
    }
    const std::size_t columns = t.features + (t.labelled ? 1 : 0);
    RT_CHECK(cells.size() == columns, "{}:{}: {} columns, expected {} ({}{} features)", path,
             line_no, cells.size(), columns, t.labelled ? "label + " : "", t.features);
    ++t.rows;
    t.line_of_row.push_back(line_no);
    if (t.labelled) t.label_text.push_back(cells[label_col]);
    for (std::size_t c = 0; c < cells.size(); ++c) {
      float v = 0;
      if (c == label_col && !parse_float(cells[c], v)) {
        // A class name: its number comes once every file is read.
        RT_CHECK(!cells[c].empty(), "{}:{}: the label (column {}) is empty", path, line_no, c + 1);
        t.text_labels = true;
        t.y.push_back(-1);
        continue;
      }
      RT_CHECK(parse_float(cells[c], v), "{}:{}: column {}: '{}' is not a number", path, line_no,
               c + 1, cells[c]);
      // strtof reads "nan" and "inf": in a dataset they surface much later as
      // non-finite gradients that name no row.
      RT_CHECK(std::isfinite(v),
               "{}:{}: column {}: '{}' is not a finite number (NaN and Inf are refused: fix or "
               "drop the row)",
               path, line_no, c + 1, cells[c]);
      if (c == label_col) {
        RT_CHECK(v >= 0 && v == static_cast<float>(static_cast<std::int32_t>(v)) && v < 2e9f,
                 "{}:{}: label '{}' is not a non-negative integer", path, line_no, cells[c]);
        t.y.push_back(static_cast<std::int32_t>(v));
      } else {
        t.x.push_back(v);
      }
    }
  }
  RT_CHECK(t.rows > 0, "CSV file {} has no data rows", path);
  return t;
}

// Labels that are names become classes: in the order of --class-names when
// given (a label not in it is an error naming its row), else sorted, so the
// same names give the same classes in every file. Returns the class names.
std::vector<std::string> assign_text_labels(
    const CsvConvertOptions& o, const std::vector<std::pair<std::string, CsvTable*>>& files) {
  std::vector<std::string> names = o.class_names;
  if (names.empty()) {
    for (const auto& [path, t] : files)
      names.insert(names.end(), t->label_text.begin(), t->label_text.end());
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
  }
  std::string listed;
  for (const auto& n : names) listed += (listed.empty() ? "" : ",") + n;
  for (const auto& [path, t] : files)
    for (std::size_t r = 0; r < t->label_text.size(); ++r) {
      const auto it = std::find(names.begin(), names.end(), t->label_text[r]);
      RT_CHECK(it != names.end(), "{}:{}: label '{}' is not one of --class-names {}", path,
               t->line_of_row[r], t->label_text[r], listed);
      t->y[r] = static_cast<std::int32_t>(it - names.begin());
    }
  return names;
}

}  // namespace

ConvertSummary convert_csv(const CsvConvertOptions& o) {
  guard_output(o.output, {{"--train", o.train}, {"--test", o.test}}, o.force);
  CsvTable train = read_csv(o.train, o);
  CsvTable test;
  if (!o.test.empty()) {
    test = read_csv(o.test, o);
    RT_CHECK(test.features == train.features, "{} has {} features but {} has {}", o.test,
             test.features, o.train, train.features);
  }
  std::vector<std::string> class_names = o.class_names;
  if (train.text_labels || test.text_labels) {
    std::vector<std::pair<std::string, CsvTable*>> files = {{o.train, &train}};
    if (!o.test.empty()) files.emplace_back(o.test, &test);
    class_names = assign_text_labels(o, files);
  }
  if (o.test.empty()) {
    RT_CHECK(o.test_fraction > 0 && o.test_fraction < 1,
             "--test-fraction {} must be in (0, 1) without --test", o.test_fraction);
    // Shuffle with the seed, then hold out the tail, so sorted files split fairly.
    const std::size_t n = train.rows;
    const std::size_t n_test = static_cast<std::size_t>(static_cast<double>(n) * o.test_fraction);
    RT_CHECK(n_test >= 1 && n_test < n, "{}: {} rows are too few for --test-fraction {}", o.train,
             n, o.test_fraction);
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    data_random::Xoshiro256 rng(o.seed, 7);
    for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    CsvTable a, b;
    a.features = b.features = train.features;
    a.labelled = b.labelled = train.labelled;
    for (std::size_t k = 0; k < n; ++k) {
      CsvTable& dst = k < n - n_test ? a : b;
      const std::size_t i = order[k];
      ++dst.rows;
      if (train.labelled) dst.y.push_back(train.y[i]);
      dst.x.insert(dst.x.end(), train.x.begin() + static_cast<std::ptrdiff_t>(i * train.features),
                   train.x.begin() + static_cast<std::ptrdiff_t>((i + 1) * train.features));
    }
    train = std::move(a);
    test = std::move(b);
  }
  std::int32_t max_label = 0;
  for (const auto* t : {&train, &test})
    for (std::int32_t l : t->y) max_label = std::max(max_label, l);
  // Unlabelled data has no labels to count classes from: the model that will
  // predict it says how many.
  RT_CHECK(train.labelled || o.num_classes > 0 || !class_names.empty(),
           "--label-column none: give --classes N (or --class-names), the classes of the model "
           "that will predict this data");
  const int classes = o.num_classes > 0      ? o.num_classes
                      : !class_names.empty() ? static_cast<int>(class_names.size())
                                             : max_label + 1;
  RT_CHECK(max_label < classes, "label {} is outside [0, {}) (--classes)", max_label, classes);

  DatasetWriter writer(o.output);
  ConvertSummary summary;
  for (const auto& [name, t] :
       {std::pair<const char*, const CsvTable*>{"train", &train}, {"test", &test}}) {
    SplitSpec spec;
    spec.name = name;
    spec.n = t->rows;
    spec.labelled = t->labelled;
    spec.sample_shape = {t->features};
    spec.dtype = SampleDType::f32;
    spec.num_classes = classes;
    spec.class_names = class_names;
    writer.begin_split(spec);
    ConvertProgress progress(name, spec.n, t->x.size() * sizeof(float) >= kProgressBytes);
    const std::size_t slab = 8192;
    for (std::size_t b = 0; b < spec.n; b += slab) {
      const std::size_t count = std::min(slab, spec.n - b);
      writer.append(t->x.data() + b * t->features, t->labelled ? t->y.data() + b : nullptr, count);
      progress.update(b + count);
    }
    writer.end_split();
    summary.text += fmt::format("/{}: {} samples of {} float32 features, {} classes{}\n", name,
                                spec.n, t->features, classes, t->labelled ? "" : ", no labels");
  }
  writer.commit();
  return summary;
}

}  // namespace ringtrain
