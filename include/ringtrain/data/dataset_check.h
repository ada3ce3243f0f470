// `ringtrain data check FILE`: every split of a dataset read end to end, so a
// NaN, a label out of range or a shape that differs is found before a job
// trains on it (and fails much later, naming no sample).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringtrain {

struct SplitReport {
  std::string split;
  std::size_t n = 0;
  std::vector<std::size_t> shape;
  std::string dtype;
  int num_classes = 0;
  bool labelled = true;                     // false: the split has no y (data for predict)
  std::vector<std::uint64_t> label_counts;  // per class
  std::uint64_t nonfinite = 0;              // stored values that are NaN or Inf
  std::uint64_t first_nonfinite_sample = 0, first_nonfinite_element = 0;
  std::vector<std::string> problems;  // empty: the split is sound
};

struct DatasetReport {
  std::string path;
  std::vector<SplitReport> splits;
  std::vector<std::string> problems;  // across splits (shapes or classes that differ)
  std::size_t problem_count() const;
};

// Reads every split of `path`. Throws Error only when the file itself cannot
// be read; what is wrong inside a split goes into its problems.
DatasetReport check_dataset(const std::string& path);

// One line per split, then the problems, one per line.
std::string format_dataset_report(const DatasetReport& report);

}  // namespace ringtrain
