#include "ringtrain/tensor/layout.h"

#include "ringtrain/core/check.h"

namespace ringtrain {

LayoutChoice parse_layout_choice(std::string_view text) {
  if (text == "auto") return LayoutChoice::automatic;
  if (text == "nchw") return LayoutChoice::nchw;
  if (text == "nhwc") return LayoutChoice::nhwc;
  RT_CHECK(false, "--layout: unknown value '{}' (expected auto, nchw or nhwc)", text);
  __builtin_unreachable();
}

const char* layout_name(Layout layout) {
  return layout == Layout::nhwc ? "nhwc" : "nchw";
}

}  // namespace ringtrain
