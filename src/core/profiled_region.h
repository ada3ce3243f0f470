// The part of a run that a CUDA profiler started with --profile-from-start off
// (Nsight Compute, Nsight Systems) records: bench step marks its steady steps,
// so that a kernel table holds those and not start-up, planning or warm-up.
// Without a profiler attached, or without CUDA, it does nothing.
#pragma once

namespace ringtrain {

class ProfiledRegion {
 public:
  // cudaProfilerStart on a run that uses a GPU (a CPU run of a CUDA build
  // would otherwise create a CUDA context for nothing), then Stop at the end.
  explicit ProfiledRegion(bool on_gpu);
  ~ProfiledRegion();
  ProfiledRegion(const ProfiledRegion&) = delete;
  ProfiledRegion& operator=(const ProfiledRegion&) = delete;

 private:
  bool on_gpu_;
};

}  // namespace ringtrain
