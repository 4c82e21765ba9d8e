#pragma once
// The launcher's (mpirun's or srun's) standard error, passed on line by line minus the lines
// that are Open MPI's and not ours: when a rank dies, the shared-memory transport of a rank
// still reading from it prints "[host:pid] Read -1, expected 793088, errno = 3", which says
// nothing a user can act on and buries the one error line that does (docs/faults.md).
#include <string>
#include <thread>

namespace sg {

// Whether a line of the launcher's standard error is such a line (dropped).
bool is_launcher_noise(const std::string& line);

class LauncherOutput {
 public:
  // Opens the pipe; write_fd() becomes the launcher's standard error (dup2 in the child).
  LauncherOutput();
  ~LauncherOutput();
  LauncherOutput(const LauncherOutput&) = delete;
  LauncherOutput& operator=(const LauncherOutput&) = delete;

  int write_fd() const { return write_fd_; }
  // In the parent after fork: closes its copy of the write end and starts passing lines on.
  void start();
  // After the launcher has exited: passes on what is left (for at most a second: a process
  // that outlives the launcher may still hold the pipe) and stops.
  void finish();

 private:
  void pass_on();
  int read_fd_ = -1;
  int write_fd_ = -1;
  int stop_fds_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace sg
