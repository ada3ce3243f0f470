#include "train/training_faults.h"

#include <chrono>
#include <limits>
#include <thread>

#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/model/model.h"

namespace ringtrain {

namespace {

class PlannedTrainingFaults final : public TrainingFaults {
 public:
  PlannedTrainingFaults(const FaultPlan& plan, int rank, Model& model, BufferView grads)
      : plan_(plan), rank_(rank), model_(model), grads_(grads) {}

  void at_phase(std::string_view phase, std::uint64_t step) override {
    plan_.stall_at(phase, rank_, step);
  }

  void after_forward(std::uint64_t step) override {
    if (!plan_.nonfinite || !plan_.nonfinite->in_loss || !plan_.nonfinite->at(rank_, step)) return;
    // The step's loss, once its last forward has added it to the totals.
    double nan = std::numeric_limits<double>::quiet_NaN();
    copy_view(model_.loss_totals_view().slice(0, 1),
              BufferView{&nan, 1, DType::f64, Device::cpu()});
  }

  void after_backward_layer(std::size_t layer, std::uint64_t step) override {
    if (!plan_.nonfinite || plan_.nonfinite->in_loss || !plan_.nonfinite->at(rank_, step) ||
        model_.param_info().empty())
      return;
    // The first parameter tensor's gradient, once backward has written it.
    const ParamInfo& first = model_.param_info().front();
    if (layer != first.layer) return;
    float nan = std::numeric_limits<float>::quiet_NaN();
    copy_view(grads_.slice(first.offset, 1), view_of(&nan, 1));
  }

  void after_step(std::uint64_t step) override {
    if (plan_.step_delay_ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(plan_.step_delay_ms));
    if (plan_.diverge_rank != rank_ || step != 1) return;
    // For the replica check's own test: nudge one weight.
    const BufferView params = model_.params();
    float nudge = 0;
    copy_view(view_of(&nudge, 1), params.slice(0, 1));
    nudge += 1e-3f;
    copy_view(params.slice(0, 1), view_of(&nudge, 1));
  }

 private:
  const FaultPlan& plan_;
  int rank_;
  Model& model_;
  BufferView grads_;
};

}  // namespace

std::unique_ptr<TrainingFaults> make_training_faults(const FaultPlan* plan, int rank, Model& model,
                                                     BufferView grads) {
  if (plan == nullptr) return nullptr;
  const bool mine = (plan->nonfinite && plan->nonfinite->rank == rank) ||
                    plan->diverge_rank == rank || plan->step_delay_ms > 0 ||
                    (plan->stall && plan->stall->rank == rank && plan->stall->phase != "open");
  if (!mine) return nullptr;
  return std::make_unique<PlannedTrainingFaults>(*plan, rank, model, grads);
}

}  // namespace ringtrain
