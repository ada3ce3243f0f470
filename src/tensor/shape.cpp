#include "ringtrain/tensor/shape.h"

#include <fmt/format.h>

#include "ringtrain/core/check.h"

namespace ringtrain {

Shape::Shape(std::initializer_list<std::size_t> dims) {
  RT_CHECK(dims.size() <= kMaxRank, "shape of rank {} exceeds the maximum rank {}", dims.size(),
           kMaxRank);
  for (std::size_t d : dims) dims_[rank_++] = d;
}

Shape::Shape(const std::vector<std::size_t>& dims) {
  RT_CHECK(dims.size() <= kMaxRank, "shape of rank {} exceeds the maximum rank {}", dims.size(),
           kMaxRank);
  for (std::size_t d : dims) dims_[rank_++] = d;
}

std::size_t Shape::numel() const {
  std::size_t n = 1;
  for (std::size_t i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

Shape Shape::with_batch(std::size_t batch) const {
  RT_CHECK(rank_ < kMaxRank, "cannot add a batch dimension to a shape of rank {}", rank_);
  Shape s;
  s.dims_[0] = batch;
  for (std::size_t i = 0; i < rank_; ++i) s.dims_[i + 1] = dims_[i];
  s.rank_ = rank_ + 1;
  return s;
}

std::vector<std::size_t> Shape::to_vector() const {
  return std::vector<std::size_t>(dims_.begin(),
                                  dims_.begin() + static_cast<std::ptrdiff_t>(rank_));
}

std::string Shape::to_string() const {
  return fmt::format("[{}]", fmt::join(to_vector(), ", "));
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (std::size_t i = 0; i < rank_; ++i)
    if (dims_[i] != other.dims_[i]) return false;
  return true;
}

}  // namespace ringtrain
