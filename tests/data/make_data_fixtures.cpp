// Writes the data layer's CLI test fixtures into argv[1].
#include <cstdio>
#include <exception>

#include "tests/data/data_test_files.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_data_fixtures DIR\n");
    return 2;
  }
  try {
    ringtrain::test::write_all_fixtures(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_data_fixtures: %s\n", e.what());
    return 1;
  }
  return 0;
}
