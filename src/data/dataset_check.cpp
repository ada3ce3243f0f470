#include "ringtrain/data/dataset_check.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ringtrain/core/error.h"
#include "ringtrain/data/dataset.h"

namespace ringtrain {

namespace {

// Float samples are scanned in slabs of about 4 MiB, so any file fits.
void scan_values(Dataset& ds, SplitReport& r) {
  const std::size_t elems = ds.sample_elements();
  if (ds.stored_dtype() != SampleDType::f32) {
    // Bytes are always finite; their scale and offset may not be.
    if (!std::isfinite(ds.scale()) || !std::isfinite(ds.offset()))
      r.problems.push_back(
          fmt::format("scale {} or offset {} is not finite", ds.scale(), ds.offset()));
    return;
  }
  const std::size_t slab =
      std::max<std::size_t>(1, (std::size_t{4} << 20) / 4 / std::max<std::size_t>(elems, 1));
  std::vector<float> x;
  for (std::size_t b = 0; b < r.n; b += slab) {
    const std::size_t e = std::min(r.n, b + slab);
    x.resize((e - b) * elems);
    ds.read_stored(b, e, x.data());
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (std::isfinite(x[i])) continue;
      if (r.nonfinite++ == 0) {
        r.first_nonfinite_sample = b + i / elems;
        r.first_nonfinite_element = i % elems;
      }
    }
  }
  if (r.nonfinite > 0)
    r.problems.push_back(
        fmt::format("{} value(s) are NaN or Inf; the first is element {} of sample {}", r.nonfinite,
                    r.first_nonfinite_element, r.first_nonfinite_sample));
}

// Every label outside [0, num_classes), counted, the first ones named by
// sample index and value: a user fixes them all in one go.
void report_out_of_range_labels(const Dataset& ds, SplitReport& r) {
  const Dataset::OutOfRangeLabels& bad = ds.out_of_range_labels();
  if (bad.count == 0) return;
  std::vector<std::string> listed;
  for (const auto& [index, value] : bad.first)
    listed.push_back(fmt::format("sample {} has {}", index, value));
  r.problems.push_back(fmt::format(
      "{} label(s) in y are outside [0, {}) (num_classes = {}): {}{}", bad.count, ds.num_classes(),
      ds.num_classes(), fmt::join(listed, ", "),
      bad.count > listed.size() ? fmt::format(" (the first {} shown)", listed.size()) : ""));
}

std::string shape_text(const std::vector<std::size_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ","));
}

}  // namespace

std::size_t DatasetReport::problem_count() const {
  std::size_t n = problems.size();
  for (const auto& s : splits) n += s.problems.size();
  return n;
}

DatasetReport check_dataset(const std::string& path) {
  DatasetReport report;
  report.path = path;
  for (const std::string& name : Dataset::splits(path)) {
    SplitReport r;
    r.split = name;
    try {
      // Opening checks the layout, the dtypes and every label's range.
      Dataset ds = Dataset::open(path, name, Dataset::Labels::inspect);
      if (ds.is_tokens()) {
        // A token split: n counts tokens, each of which must lie in the vocabulary.
        r.labelled = false;
        r.n = static_cast<std::size_t>(ds.token_count());
        r.shape = {1};
        r.dtype = "tokens";
        r.num_classes = ds.num_classes();
        const std::uint64_t slab = 1u << 20;
        for (std::uint64_t b = 0; b < ds.token_count(); b += slab)
          ds.read_tokens(b, std::min<std::uint64_t>(ds.token_count(), b + slab));
        if (r.n == 0) r.problems.push_back("the split is empty");
        report.splits.push_back(std::move(r));
        continue;
      }
      r.labelled = ds.has_labels();
      r.n = ds.size();
      r.shape = ds.sample_shape();
      r.dtype = sample_dtype_name(ds.stored_dtype());
      r.num_classes = ds.num_classes();
      r.label_counts.assign(static_cast<std::size_t>(std::max(r.num_classes, 0)), 0);
      if (r.labelled)
        for (std::int32_t label : ds.labels()) ++r.label_counts[static_cast<std::size_t>(label)];
      if (r.n == 0) r.problems.push_back("the split is empty");
      report_out_of_range_labels(ds, r);
      scan_values(ds, r);
    } catch (const Error& e) {
      r.problems.push_back(e.what());
    }
    report.splits.push_back(std::move(r));
  }
  if (report.splits.empty()) report.problems.push_back("the file holds no split");
  const SplitReport* first = nullptr;
  for (const auto& s : report.splits) {
    if (s.shape.empty()) continue;  // unreadable: already a problem of its own
    if (!first) {
      first = &s;
      continue;
    }
    if (s.shape != first->shape)
      report.problems.push_back(fmt::format("/{} has samples of shape {}, but /{} of {}", s.split,
                                            shape_text(s.shape), first->split,
                                            shape_text(first->shape)));
    if (s.num_classes != first->num_classes)
      report.problems.push_back(fmt::format("/{} has {} classes, but /{} has {}", s.split,
                                            s.num_classes, first->split, first->num_classes));
  }
  return report;
}

std::string format_dataset_report(const DatasetReport& report) {
  std::string out;
  for (const auto& s : report.splits) {
    if (s.shape.empty()) {
      out += fmt::format("/{}: cannot be read (the problem below)\n", s.split);
    } else {
      std::uint64_t fewest = 0;
      int rarest = -1;
      for (std::size_t k = 0; k < s.label_counts.size(); ++k)
        if (rarest < 0 || s.label_counts[k] < fewest) {
          fewest = s.label_counts[k];
          rarest = static_cast<int>(k);
        }
      const std::string labels =
          s.labelled ? fmt::format("rarest: class {} with {}", rarest, fewest) : "no labels";
      out += fmt::format("/{}: {} samples of {} {}, {} classes ({}), {}\n", s.split, s.n,
                         shape_text(s.shape), s.dtype, s.num_classes, labels,
                         s.nonfinite == 0 ? "no NaN or Inf" : "NaN or Inf found");
    }
    for (const auto& p : s.problems) out += fmt::format("  problem in /{}: {}\n", s.split, p);
  }
  for (const auto& p : report.problems) out += fmt::format("problem: {}\n", p);
  return out;
}

}  // namespace ringtrain
