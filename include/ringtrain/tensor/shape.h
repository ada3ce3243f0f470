// The extent of a tensor: up to kMaxRank dimensions held inline, so that making
// or reshaping a view in the hot loop never touches the heap.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

namespace ringtrain {

class Shape {
 public:
  static constexpr std::size_t kMaxRank = 6;

  Shape() = default;
  Shape(std::initializer_list<std::size_t> dims);
  explicit Shape(const std::vector<std::size_t>& dims);

  std::size_t rank() const { return rank_; }
  std::size_t operator[](std::size_t i) const { return dims_[i]; }
  std::size_t& operator[](std::size_t i) { return dims_[i]; }
  // Product of the dimensions; 1 for rank 0 (a scalar).
  std::size_t numel() const;
  // This shape with `batch` prepended: the per-sample shape of a layer becomes
  // the shape of its batched activation.
  Shape with_batch(std::size_t batch) const;
  std::vector<std::size_t> to_vector() const;
  std::string to_string() const;  // "[64, 1, 28, 28]"
  bool operator==(const Shape& other) const;

 private:
  std::array<std::size_t, kMaxRank> dims_{};
  std::size_t rank_ = 0;
};

}  // namespace ringtrain
