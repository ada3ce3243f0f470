// The nccl backend on the GPUs that are there: every dtype and op, in and out
// of place, uneven sizes; broadcast, all-gather, reduce-scatter, barrier and
// several outstanding requests. Runs as one rank (MPI singleton) or under
// mpirun. Exits 77 (ctest: skipped, never passed) without CUDA or a device, and
// fails where NVIDIA device nodes exist but CUDA reports an error.
#include <cstdio>
#include <vector>

#include "comm/collective_reference.h"
#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/fatal.h"
#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/launch/topology.h"
#include "tests/support/gpu_test.h"

int main(int argc, char** argv) {
  using namespace ringtrain;
  if (!test::cuda_device_available()) return test::kSkippedExitCode;
  MpiSession mpi(&argc, &argv);
  std::size_t wrong = 0, checks = 0;
  try {
    // One rank per GPU: run it with more ranks as nodes of launch/netns-cluster
    // (NCCL refuses two ranks of one host on one GPU); tests/comm/CMakeLists.txt does.
    Topology topo = Topology::discover({DeviceRequest::cuda, false});
    auto comm = make_communicator("nccl", topo, {});
    const int n = comm->size();
    const std::size_t un = static_cast<std::size_t>(n), r = static_cast<std::size_t>(comm->rank());
    for (std::size_t count :
         {std::size_t{0}, std::size_t{1}, un + 1, std::size_t{4099}, std::size_t{1000003}})
      for (DType dt : kAllDTypes)
        for (ReduceOp op : kAllReduceOps)
          for (bool in_place : {false, true}) {
            const std::size_t es = dtype_size(dt);
            std::vector<char> host(count * es + 1);
            collective_reference::fill_input(dt, host.data(), count, count + 7, comm->rank());
            BufferView hin{host.data(), count, dt, Device::cpu()};
            BufferView din = comm->allocate(count, dt),
                       dout = in_place ? din : comm->allocate(count, dt);
            copy_view(din, hin);
            comm->allreduce(din, dout, op);
            copy_view(hin, dout);
            // NCCL rounds at every hop (communicator.h): tolerance for n + 1 roundings.
            for (std::size_t i = 0; i < count; ++i) {
              const bool ok = collective_reference::matches_reduction(dt, op, n, count + 7, i,
                                                                      host.data(), i, n + 1);
              if (!ok && ++wrong <= 10)
                std::printf("wrong: %s %s count %zu %s, element %zu = %g\n",
                            std::string(dtype_name(dt)).c_str(),
                            std::string(reduce_op_name(op)).c_str(), count,
                            in_place ? "in place" : "out of place", i,
                            collective_reference::load(dt, host.data(), i));
            }
            ++checks;
          }
    // broadcast, allgather, reduce_scatter (avg) on f32 and bf16, async and in flight together
    for (DType dt : {DType::f32, DType::bf16}) {
      const std::size_t block = 1031, es = dtype_size(dt);
      std::vector<char> a(block * un * es), b(block * es);
      BufferView d_all = comm->allocate(block * un, dt), d_one = comm->allocate(block, dt);
      collective_reference::fill_input(dt, a.data(), block * un, 99, comm->rank());
      copy_view(d_all, {a.data(), block * un, dt, Device::cpu()});
      auto req1 = comm->reduce_scatter_async(d_all, d_one, ReduceOp::avg);
      auto req2 = comm->barrier_async();
      req2.wait();
      req1.wait();
      copy_view({b.data(), block, dt, Device::cpu()}, d_one);
      for (std::size_t i = 0; i < block; ++i)
        wrong += !collective_reference::matches_reduction(dt, ReduceOp::avg, n, 99, r * block + i,
                                                          b.data(), i, n + 1);
      collective_reference::fill_input(dt, b.data(), block, 5, comm->rank());
      copy_view(d_one, {b.data(), block, dt, Device::cpu()});
      comm->allgather(d_one, d_all);
      copy_view({a.data(), block * un, dt, Device::cpu()}, d_all);
      for (std::size_t q = 0; q < un; ++q)
        for (std::size_t i = 0; i < block; ++i)
          wrong += !collective_reference::matches_input(dt, static_cast<int>(q), 5, i, a.data(),
                                                        q * block + i);
      comm->broadcast(d_one, d_one, n - 1);
      copy_view({b.data(), block, dt, Device::cpu()}, d_one);
      for (std::size_t i = 0; i < block; ++i)
        wrong += !collective_reference::matches_input(dt, n - 1, 5, i, b.data(), i);
      checks += 3;
    }
  } catch (const Error& e) {
    fatal(e.what());
  }
  std::printf("nccl: %zu checks, %zu wrong elements\n", checks, wrong);
  return wrong == 0 ? 0 : 1;
}
