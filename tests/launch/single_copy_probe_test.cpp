// The single-copy probe, including in a process whose seccomp policy forbids
// process_vm_readv, as some container runtimes do.
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "launch/single_copy_probe.h"

using namespace ringtrain;

namespace {
const char* kVar = "OMPI_MCA_btl_vader_single_copy_mechanism";

// In a child: optionally forbid process_vm_readv (EPERM), run the choice, and
// report through the exit code what the environment then says:
// 0 unset, 1 "none", 2 something else, 3 setup failed.
int choice_in_child(bool forbid, const char* preset) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (preset)
      setenv(kVar, preset, 1);
    else
      unsetenv(kVar);
    if (forbid) {
      sock_filter filter[] = {
          BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
          BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      };
      sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(3);
      if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) _exit(3);
    }
    choose_single_copy_mechanism();
    const char* v = std::getenv(kVar);
    _exit(v == nullptr ? 0 : std::strcmp(v, "none") == 0 ? 1 : 2);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 4;
}
}  // namespace

TEST_CASE("single copy is allowed on this machine's kernel without a filter") {
  // CI machines run without a seccomp filter on process_vm_readv.
  CHECK(single_copy_allowed());
  CHECK(choice_in_child(false, nullptr) == 0);  // Open MPI keeps its default
}

TEST_CASE("a seccomp policy that forbids process_vm_readv selects copy-in/copy-out") {
  CHECK(choice_in_child(true, nullptr) == 1);
}

TEST_CASE("the user's own choice is never overridden") {
  CHECK(choice_in_child(true, "cma") == 2);
  CHECK(choice_in_child(false, "none") == 1);
}
