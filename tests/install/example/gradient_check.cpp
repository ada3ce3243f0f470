// Checks the layer's backward against finite differences (ringtrain's public
// helper), for two shapes; exits non-zero on any mismatch.
#include <cstdio>

#include "layernorm.h"
#include "ringtrain/model/gradient_check.h"

int main() {
  int failures = 0;
  for (const ringtrain::Shape& shape : {ringtrain::Shape{7}, ringtrain::Shape{2, 3, 3}}) {
    example::LayerNorm layer("layernorm1", shape, 1e-5f);
    ringtrain::GradientCheckOptions options;
    options.batch = 3;
    options.eps = 1e-3f;
    const auto result = ringtrain::check_layer_gradients(layer, options);
    std::printf("layernorm on %s: %zu elements checked, largest error %.3g: %s\n",
                shape.to_string().c_str(), result.checked, result.max_abs_error,
                result.ok ? "ok" : "MISMATCH");
    if (!result.ok) std::fputs(result.report.c_str(), stdout);
    failures += !result.ok;
  }
  return failures == 0 ? 0 : 1;
}
