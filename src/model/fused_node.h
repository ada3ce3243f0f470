// A fused node of the model's plan (Model::build's rewrite for fusion, under
// --fuse on): it runs on the chain's last node in place of the chain, reads
// and writes the storage dtype itself, and names what it fused for bench step
// --layers. The nodes whose work it runs stay in the plan, folded.
#pragma once

#include "model/layer.h"

namespace ringtrain {

class FusedNode : public StoresActivations, public DescribesKernels {
 public:
  virtual ~FusedNode() = default;
};

}  // namespace ringtrain
