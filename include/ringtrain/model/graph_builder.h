// Builds a model graph from code: the same ModelSpec the text language gives,
// so a graph built here prints as text (ModelSpec::to_string) and back. The
// presets (resnet50, vgg16, ...) are written with it.
//
//   GraphBuilder g;
//   std::string x = g.conv2d(64, 3, 1, 1, false, "stem");
//   x = g.batch_norm(x);
//   std::string y = g.add({x, "input"}, "sum");
//   ModelSpec spec = g.spec();
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ringtrain/model/model_spec.h"

namespace ringtrain {

class GraphBuilder {
 public:
  // Adds a node reading `inputs` (empty: the last node added, or the model's
  // input for the first); returns its name (`name`, or an automatic one that
  // later nodes can read too).
  std::string node(LayerSpec layer, std::vector<std::string> inputs = {}, std::string name = {});

  std::string conv2d(std::size_t out, std::size_t kernel, std::size_t stride, std::size_t padding,
                     bool bias, std::string name = {}, std::vector<std::string> inputs = {});
  std::string batch_norm(std::string name = {}, bool zero_init = false,
                         std::vector<std::string> inputs = {});
  std::string relu(std::string name = {}, std::vector<std::string> inputs = {});
  std::string max_pool2d(std::size_t kernel, std::size_t stride, std::size_t padding = 0,
                         std::string name = {});
  std::string avg_pool2d(std::size_t kernel, std::size_t stride, std::size_t padding = 0,
                         std::string name = {}, std::vector<std::string> inputs = {});
  std::string global_avg_pool(std::string name = {});
  std::string flatten(std::string name = {});
  std::string dropout(double p, std::string name = {});
  std::string linear(std::size_t out, std::string name = {});
  std::string add(std::vector<std::string> inputs, std::string name = {});
  std::string concat(std::vector<std::string> inputs, std::string name = {});

  const std::string& last() const { return last_; }
  ModelSpec spec() const { return spec_; }

 private:
  ModelSpec spec_;
  std::string last_ = "input";
  std::size_t auto_names_ = 0;
};

}  // namespace ringtrain
