#include "comm/mpi_ring_transport.h"

#include <climits>

#include "core/check_mpi.h"
#include "ringtrain/core/check.h"

namespace ringtrain::comm_detail {

void RingTransport::wait(RingTransfer& t, int peer, const Deadline& deadline) {
  if (!spin_until([&] { return t.test(); }, deadline, kProgressBackoff))
    throw CommTimeout("no message from rank " + std::to_string(peer), peer);
}

namespace {

class MpiTransfer final : public RingTransfer {
 public:
  MpiTransfer(bool is_recv, int peer, std::size_t bytes)
      : is_recv_(is_recv), peer_(peer), bytes_(bytes) {}
  ~MpiTransfer() override {
    // Only reached with a pending request when the job is being torn down
    // after an error; the request must not outlive its buffer silently.
    if (!done_ && req_ != MPI_REQUEST_NULL && !unwinding()) {
      MPI_Cancel(&req_);
      MPI_Request_free(&req_);
    }
  }
  bool test() override {
    if (done_) return true;
    int flag = 0;
    MPI_Status status{};
    // A longer message than posted fails the receive (MPI_ERR_TRUNCATE).
    const int rc = MPI_Test(&req_, &flag, &status);
    if (rc != MPI_SUCCESS) mismatch(rc);
    if (!flag) return false;
    if (is_recv_) {
      int got = 0;
      MPI_Get_count(&status, MPI_BYTE, &got);
      if (static_cast<std::size_t>(got) != bytes_) mismatch(MPI_SUCCESS, got);
    }
    done_ = true;
    return true;
  }
  MPI_Request req_ = MPI_REQUEST_NULL;

 private:
  [[noreturn]] void mismatch(int rc, int got = -1) {
    done_ = true;
    throw Error(fmt::format(
        "ring: rank {} sent a message of {} where {} bytes were expected{}: the ranks called the "
        "collective with different counts, dtypes or roots",
        peer_, got >= 0 ? std::to_string(got) + " bytes" : std::string("another size"), bytes_,
        rc != MPI_SUCCESS ? " (" + detail::mpi_error_string(rc) + ")" : std::string()));
  }
  bool is_recv_;
  int peer_;
  std::size_t bytes_;
  bool done_ = false;
};

int to_int(std::size_t bytes) {
  RT_CHECK(bytes <= static_cast<std::size_t>(INT_MAX),
           "ring: chunk of {} bytes exceeds MPI's int count", bytes);
  return static_cast<int>(bytes);
}

}  // namespace

MpiRingTransport::MpiRingTransport(MPI_Comm comm) {
  RT_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  RT_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  RT_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

MpiRingTransport::~MpiRingTransport() {
  if (comm_ != MPI_COMM_NULL && !unwinding()) MPI_Comm_free(&comm_);
}

std::unique_ptr<RingTransfer> MpiRingTransport::isend(int peer, const void* data,
                                                      std::size_t bytes) {
  auto t = std::make_unique<MpiTransfer>(false, peer, bytes);
  RT_MPI_CHECK(MPI_Isend(data, to_int(bytes), MPI_BYTE, peer, 0, comm_, &t->req_));
  return t;
}

std::unique_ptr<RingTransfer> MpiRingTransport::irecv(int peer, void* data, std::size_t bytes) {
  auto t = std::make_unique<MpiTransfer>(true, peer, bytes);
  RT_MPI_CHECK(MPI_Irecv(data, to_int(bytes), MPI_BYTE, peer, 0, comm_, &t->req_));
  return t;
}

}  // namespace ringtrain::comm_detail
