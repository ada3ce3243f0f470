// The trainer's fault-injection seam: hooks at the points of a step where a
// test plants a fault (core/fault_plan.h). The trainer holds a null pointer
// unless a fault is planned for its rank, so a normal step pays one pointer
// test per hook and the step loop holds no fault code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "core/fault_plan.h"
#include "ringtrain/core/buffer_view.h"

namespace ringtrain {

class Model;

class TrainingFaults {
 public:
  virtual ~TrainingFaults() = default;
  // Step `step` (counted from 1) enters a phase the flight recorder names.
  virtual void at_phase(std::string_view phase, std::uint64_t step) = 0;
  // The step's last forward has added its loss to the model's totals.
  virtual void after_forward(std::uint64_t step) = 0;
  // Backward has written layer's parameter gradients, not yet all-reduced.
  virtual void after_backward_layer(std::size_t layer, std::uint64_t step) = 0;
  // After step `step` has updated, logged and evaluated; before the replica check.
  virtual void after_step(std::uint64_t step) = 0;
};

// Null when plan (FaultPlan::planned()) plans nothing that this rank's steps
// would do. grads: the model's gradient buffer.
std::unique_ptr<TrainingFaults> make_training_faults(const FaultPlan* plan, int rank, Model& model,
                                                     BufferView grads);

}  // namespace ringtrain
