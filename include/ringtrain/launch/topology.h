// Where this process sits in the job: world rank and size, its node, its rank
// on that node, and the device it drives. Built once, after MpiSession, from
// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) (never from hostname hashing).
#pragma once

#include <string>
#include <vector>

#include "ringtrain/launch/device_choice.h"

namespace ringtrain {

// Owns MPI_Init_thread(MPI_THREAD_MULTIPLE) / MPI_Finalize. Throws Error if the
// MPI library cannot grant MPI_THREAD_MULTIPLE (the communication thread needs it).
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

struct RankPlacement {
  int rank = 0;
  std::string host;
  int node = 0;
  int local_rank = 0;
  int local_size = 1;
  std::string device;  // "cpu", "cuda:0 (GPU 3, GPU-<uuid>)", "... shared by local ranks 0,2)"
};

struct TopologyOptions {
  DeviceRequest device = DeviceRequest::automatic;
  bool allow_gpu_sharing = false;
};

class Topology {
 public:
  // Collective over MPI_COMM_WORLD. Chooses the device and makes it current.
  // Every rank learns every rank's placement (an all-gather), so errors can
  // name peers and rank 0 can print the table.
  static Topology discover(const TopologyOptions& options);

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  int node() const { return node_; }
  int node_count() const { return node_count_; }
  const std::string& host() const { return host_; }
  const DeviceChoice& device_choice() const { return device_; }
  Device device() const { return device_.device; }
  const std::vector<RankPlacement>& placements() const { return placements_; }

  // One row per rank: rank, host, node, local rank, device.
  std::string table() const;
  // The same placement with this rank's device set to the CPU: for a host
  // backend that stages a GPU rank's buffers.
  Topology on_host() const {
    Topology t = *this;
    t.device_ = DeviceChoice{};
    return t;
  }

 private:
  int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_size_ = 1, node_ = 0, node_count_ = 1;
  std::string host_;
  DeviceChoice device_;
  std::vector<RankPlacement> placements_;
};

}  // namespace ringtrain
