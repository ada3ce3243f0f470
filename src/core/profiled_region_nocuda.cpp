#include "core/profiled_region.h"

namespace ringtrain {

ProfiledRegion::ProfiledRegion(bool on_gpu) : on_gpu_(on_gpu) {}
ProfiledRegion::~ProfiledRegion() = default;

}  // namespace ringtrain
