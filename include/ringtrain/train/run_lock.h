// One training run per output directory. Two jobs started on one --logdir or
// --ckpt-dir both ran and exited 0: metrics.jsonl got interleaved, invalid
// lines, and one run's ckpt-<step>.h5 overwrote the other's. Rank 0 (the rank
// that writes there) takes a lock on each directory before anything is
// written, and holds it until the run ends.
//
// The lock is a POSIX record lock (fcntl F_SETLK) on DIR/.ringtrain.lock,
// whose text names the holder (host, pid, start time) for the refusal. The
// kernel, or the NFS lock manager, releases a record lock when its process
// dies, however it dies (SIGKILL, a lost node), so a lock file left by a dead
// job is stale by construction: the next run takes it over and says whose it
// was. No pid guessing across hosts.
#pragma once

#include <string>
#include <vector>

namespace ringtrain {

class RunLock {
 public:
  // Locks each directory in `dirs` (existing, writable; duplicates and empty
  // entries are skipped); `flags` names each one's flag for the messages
  // ("--logdir"). Throws Error naming the flag, the directory and the
  // holder's host and pid when another live process holds one (the locks
  // taken so far are released). A holder on another host is waited for up to
  // `wait_for_other_host_s` first: a lost node's lock on a shared file system
  // lasts until the file server's lease for it runs out.
  RunLock(const std::vector<std::string>& flags, const std::vector<std::string>& dirs,
          double wait_for_other_host_s = 0);
  // Removes the lock files and releases the locks.
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  static constexpr const char* kFileName = ".ringtrain.lock";

 private:
  void lock_directory(const std::string& flag, const std::string& dir,
                      double wait_for_other_host_s);
  void release();

  struct Held {
    std::string path;
    int fd = -1;
  };
  std::vector<Held> held_;
};

}  // namespace ringtrain
