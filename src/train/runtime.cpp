// Runtime: MpiSession, Topology::discover and the communicators in one object
// (runtime.h).
#include "ringtrain/train/runtime.h"

#include <exception>

#include "ringtrain/comm/control_channel.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/fatal.h"
#include "ringtrain/model/layer_registry.h"

namespace ringtrain {

struct Runtime::Mpi {
  MpiSession session;
  Mpi(int* argc, char*** argv) : session(argc, argv) {}
};

Runtime::Runtime(int* argc, char*** argv, const RuntimeOptions& options)
    : mpi_(std::make_unique<Mpi>(argc, argv)) {
  topology_ = std::make_unique<Topology>(Topology::discover(options.topology));
  control_ = make_control_communicator(*topology_, options.comm);
  comm_ = make_communicator(options.backend, *topology_, options.comm);
}

Runtime::~Runtime() {
  if (std::uncaught_exceptions() > 0) {
    // Unwinding towards run_guarded, which aborts the job: tearing down
    // collective state here could wait on ranks that will never arrive.
    (void)comm_.release();
    (void)control_.release();
    (void)mpi_.release();
  }
}

void Runtime::agree(std::vector<SignatureField> fields) {
  fields.push_back({"layer plugins", LayerRegistry::global().signature()});
  agree_on_signature(*control_, fields);
}

int run_guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    fatal(e.what());
  } catch (const std::exception& e) {
    fatal(std::string("unexpected exception: ") + e.what());
  }
}

}  // namespace ringtrain
