// kernels/pitched_copy.cuh on the CPU: the unit a copy's alignment allows,
// and the kernel's index mapping (each unit's source and destination from
// its flat index), run unit by unit against row-by-row memcpy, gaps between
// the destination's rows untouched.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/pitched_copy.cuh"

using namespace ringtrain;

TEST_CASE("pitched copy: the largest unit every address, pitch and the width allow",
          "[pitched_copy]") {
  CHECK(kernels::pitched_copy_unit(0x1000, 0x2000, 256, 1536, 128) == 16);
  CHECK(kernels::pitched_copy_unit(0x1000, 0x2008, 256, 1536, 128) == 8);
  CHECK(kernels::pitched_copy_unit(0x1000, 0x2000, 256, 1536, 12) == 4);
  CHECK(kernels::pitched_copy_unit(0x1000, 0x2000, 6, 1536, 4) == 2);
  CHECK(kernels::pitched_copy_unit(0x1001, 0x2000, 256, 1536, 128) == 1);
  CHECK(kernels::pitched_copy_unit(0x1000, 0x2000, 32, 48, 16) == 16);
}

TEST_CASE("pitched copy: unit by unit as the kernel's threads, the rows memcpy copies",
          "[pitched_copy]") {
  struct Case {
    std::size_t width, dst_pitch, src_pitch, rows, dst_at, src_at;
  };
  // A concat's slices (16-byte units), forward and backward; 8-, 4-, 2- and
  // 1-byte units from odd offsets, pitches and widths; one-unit rows.
  for (const Case k :
       {Case{128, 512, 128, 37, 0, 0}, Case{192, 512, 192, 11, 128, 0},
        Case{128, 128, 512, 9, 0, 384}, Case{24, 40, 24, 13, 8, 0}, Case{12, 20, 16, 7, 4, 4},
        Case{6, 10, 6, 5, 2, 0}, Case{5, 9, 7, 6, 1, 3}, Case{16, 48, 16, 25, 16, 0}}) {
    CAPTURE(k.width, k.dst_pitch, k.src_pitch, k.rows, k.dst_at, k.src_at);
    // 16-byte aligned bases, so the offsets alone set the alignment.
    std::vector<std::uint64_t> src_words((k.src_at + k.rows * k.src_pitch) / 8 + 2);
    std::vector<std::uint64_t> got_words((k.dst_at + k.rows * k.dst_pitch) / 8 + 2);
    auto* src = reinterpret_cast<unsigned char*>(src_words.data()) + k.src_at;
    for (std::size_t i = 0; i < k.rows * k.src_pitch; ++i)
      src[i] = static_cast<unsigned char>(i * 37 + 11);
    std::memset(got_words.data(), 0xAB, got_words.size() * 8);
    std::vector<std::uint64_t> want_words = got_words;
    auto* got = reinterpret_cast<unsigned char*>(got_words.data()) + k.dst_at;
    auto* want = reinterpret_cast<unsigned char*>(want_words.data()) + k.dst_at;
    for (std::size_t r = 0; r < k.rows; ++r)
      std::memcpy(want + r * k.dst_pitch, src + r * k.src_pitch, k.width);

    const unsigned unit = kernels::pitched_copy_unit(reinterpret_cast<std::uintptr_t>(got),
                                                     reinterpret_cast<std::uintptr_t>(src),
                                                     k.dst_pitch, k.src_pitch, k.width);
    REQUIRE(k.width % unit == 0);
    const kernels::PitchedUnits units{
        kernels::FastDivide(static_cast<std::uint32_t>(k.width / unit)), k.dst_pitch, k.src_pitch,
        unit};
    const auto total = static_cast<std::uint32_t>(k.width / unit * k.rows);
    for (std::uint32_t i = 0; i < total; ++i)
      std::memcpy(got + units.dst_offset(i), src + units.src_offset(i), unit);
    CHECK(got_words == want_words);
  }
}
