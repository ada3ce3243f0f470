#include "optim/step_arguments.h"

#include <cmath>

#include "ringtrain/core/check.h"

namespace ringtrain {

void check_step_arguments(const char* optimizer, BufferView params, BufferView grads,
                          std::size_t param_count, Device device, float lr) {
  RT_CHECK(std::isfinite(lr) && lr >= 0.f,
           "{} step: learning rate must be finite and >= 0 (--lr), got {}", optimizer, lr);
  RT_CHECK(params.dtype == DType::f32 && grads.dtype == DType::f32,
           "{} step: params and grads must be f32, got {} and {}", optimizer,
           dtype_name(params.dtype), dtype_name(grads.dtype));
  RT_CHECK(params.count == param_count && grads.count == param_count,
           "{} step: the optimizer was built for {} parameters, got {} params and {} grads",
           optimizer, param_count, params.count, grads.count);
  RT_CHECK(params.device == device && grads.device == device,
           "{} step: the optimizer state is on {}, got params on {} and grads on {}", optimizer,
           device_name(device), device_name(params.device), device_name(grads.device));
  RT_CHECK(param_count == 0 || (params.ptr != nullptr && grads.ptr != nullptr),
           "{} step: null params or grads buffer for {} elements", optimizer, param_count);
  RT_CHECK(param_count == 0 || params.ptr != grads.ptr,
           "{} step: params and grads are the same buffer", optimizer);
}

void check_decay_mask(const char* optimizer, BufferView mask, std::size_t param_count,
                      Device device) {
  RT_CHECK(mask.dtype == DType::f32 && mask.count == param_count && mask.device == device &&
               (param_count == 0 || mask.ptr != nullptr),
           "{}: a decay mask of {} {} on {} for {} parameters on {}", optimizer, mask.count,
           dtype_name(mask.dtype), device_name(mask.device), param_count, device_name(device));
}

}  // namespace ringtrain
