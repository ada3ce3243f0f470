// The trainer's fault hooks (train/training_faults.h): null unless a fault
// is planned for the rank, and each planted where and when the plan says.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "core/fault_plan.h"
#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "train/training_faults.h"

using namespace ringtrain;

namespace {

std::unique_ptr<Model> small_model() {
  ModelOptions o;
  o.max_batch = 2;
  return Model::build(ModelSpec::parse("mlp:4-3-2"), {1, 2, 2}, 2, o);
}

double loss_sum(const Model& model) {
  double sum = 0;
  copy_view(BufferView{&sum, 1, DType::f64, Device::cpu()}, model.loss_totals_view().slice(0, 1));
  return sum;
}

}  // namespace

TEST_CASE("the hooks are null unless a fault is planned for this rank") {
  auto model = small_model();
  std::vector<float> grads(model->param_count());
  const BufferView g = view_of(grads.data(), grads.size());
  CHECK(make_training_faults(nullptr, 0, *model, g) == nullptr);
  const FaultPlan nan = FaultPlan::parse({{"RINGTRAIN_FAULT_NAN_RANK", "1"}});
  CHECK(make_training_faults(&nan, 0, *model, g) == nullptr);
  CHECK(make_training_faults(&nan, 1, *model, g) != nullptr);
  const FaultPlan diverge = FaultPlan::parse({{"RINGTRAIN_FAULT_DIVERGE_RANK", "2"}});
  CHECK(make_training_faults(&diverge, 0, *model, g) == nullptr);
  CHECK(make_training_faults(&diverge, 2, *model, g) != nullptr);
  // The data set's own stall point is no business of the step loop.
  const FaultPlan open = FaultPlan::parse(
      {{"RINGTRAIN_FAULT_STALL_RANK", "0"}, {"RINGTRAIN_FAULT_STALL_PHASE", "open"}});
  CHECK(make_training_faults(&open, 0, *model, g) == nullptr);
  const FaultPlan data = FaultPlan::parse(
      {{"RINGTRAIN_FAULT_STALL_RANK", "0"}, {"RINGTRAIN_FAULT_STALL_PHASE", "data"}});
  CHECK(make_training_faults(&data, 0, *model, g) != nullptr);
  CHECK(make_training_faults(&data, 1, *model, g) == nullptr);
  // Every rank's steps are slowed.
  const FaultPlan delay = FaultPlan::parse({{"RINGTRAIN_FAULT_STEP_DELAY_MS", "1"}});
  CHECK(make_training_faults(&delay, 3, *model, g) != nullptr);
  const FaultPlan late = FaultPlan::parse({{"RINGTRAIN_FAULT_NCCL_LATE_RANK", "0"}});
  CHECK(make_training_faults(&late, 0, *model, g) == nullptr);
}

TEST_CASE("a NaN lands in the first parameter gradient of the planned steps only") {
  auto model = small_model();
  std::vector<float> grads(model->param_count(), 0.5f);
  const FaultPlan plan = FaultPlan::parse({{"RINGTRAIN_FAULT_NAN_RANK", "1"},
                                           {"RINGTRAIN_FAULT_NAN_STEP", "3"},
                                           {"RINGTRAIN_FAULT_NAN_COUNT", "2"}});
  auto faults = make_training_faults(&plan, 1, *model, view_of(grads.data(), grads.size()));
  REQUIRE(faults != nullptr);
  const ParamInfo& first = model->param_info().front();
  const auto nan_count = [&] {
    std::size_t n = 0;
    for (float v : grads) n += std::isnan(v) ? 1 : 0;
    return n;
  };
  for (std::size_t layer = 0; layer < model->layer_count(); ++layer) {
    faults->after_backward_layer(layer, 2);
    faults->after_backward_layer(layer, 5);
  }
  CHECK(nan_count() == 0);
  for (std::size_t layer = 0; layer < model->layer_count(); ++layer)
    if (layer != first.layer) faults->after_backward_layer(layer, 3);
  CHECK(nan_count() == 0);
  faults->after_backward_layer(first.layer, 3);
  CHECK(std::isnan(grads[first.offset]));
  CHECK(nan_count() == 1);
  // The gradient fault leaves the loss alone.
  faults->after_forward(3);
  CHECK(std::isfinite(loss_sum(*model)));
}

TEST_CASE("RINGTRAIN_FAULT_NAN_WHAT=loss puts the NaN into the loss, not the gradients") {
  auto model = small_model();
  std::vector<float> grads(model->param_count(), 0.5f);
  const FaultPlan plan = FaultPlan::parse({{"RINGTRAIN_FAULT_NAN_RANK", "0"},
                                           {"RINGTRAIN_FAULT_NAN_STEP", "2"},
                                           {"RINGTRAIN_FAULT_NAN_WHAT", "loss"}});
  auto faults = make_training_faults(&plan, 0, *model, view_of(grads.data(), grads.size()));
  REQUIRE(faults != nullptr);
  faults->after_forward(1);
  CHECK(std::isfinite(loss_sum(*model)));
  for (std::size_t layer = 0; layer < model->layer_count(); ++layer)
    faults->after_backward_layer(layer, 2);
  for (float v : grads) CHECK(v == 0.5f);
  faults->after_forward(2);
  CHECK(std::isnan(loss_sum(*model)));
}

TEST_CASE("the divergence fault nudges the first weight after step 1 only") {
  auto model = small_model();
  std::vector<float> grads(model->param_count());
  const FaultPlan plan = FaultPlan::parse({{"RINGTRAIN_FAULT_DIVERGE_RANK", "0"}});
  auto faults = make_training_faults(&plan, 0, *model, view_of(grads.data(), grads.size()));
  REQUIRE(faults != nullptr);
  const float* params = static_cast<const float*>(model->params().ptr);
  const std::vector<float> before(params, params + model->param_count());
  faults->after_step(1);
  CHECK(params[0] == Approx(before[0] + 1e-3f));
  faults->after_step(2);
  CHECK(params[0] == Approx(before[0] + 1e-3f));
  // Every other weight is untouched: the replica check's test sees this one.
  for (std::size_t i = 1; i < before.size(); ++i) CHECK(params[i] == before[i]);
}
