// Ten lines against the installed ringtrain, built with
//   c++ pkgconfig_hello.cpp $(pkg-config --cflags --libs ringtrain)
#include <cstdio>

#include "ringtrain/config.h"
#include "ringtrain/model/model_spec.h"

int main() {
  const auto spec = ringtrain::ModelSpec::parse("mlp:784-32-10");
  std::printf("%s: %zu layers, hash %llx\n", RINGTRAIN_VERSION_STRING, spec.layers.size(),
              static_cast<unsigned long long>(spec.hash()));
}
