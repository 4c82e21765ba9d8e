#include "launch/process_world.h"

#include <mpi.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "comm/mpi_communicator.h"
#include "launch/launcher_output.h"
#include "launch/stop_signal.h"
#include "util/error.h"

namespace sg {
namespace {

std::vector<std::string> g_arguments;

std::optional<int> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  try {
    return std::stoi(v);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void finalize_mpi() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

}  // namespace

std::optional<LauncherInfo> detect_launcher() {
  if (auto size = env_int("OMPI_COMM_WORLD_SIZE")) return LauncherInfo{"mpirun", *size, true};
  if (std::getenv("SLURM_STEP_ID") != nullptr) {
    // A task of a job step. SLURM_STEP_NUM_TASKS is the step's size (SLURM_NTASKS the
    // allocation's); PMIX_RANK / PMI_RANK say srun gave MPI a way to find the other tasks.
    const int size = env_int("SLURM_STEP_NUM_TASKS").value_or(env_int("SLURM_NTASKS").value_or(1));
    const bool pmi = std::getenv("PMIX_RANK") != nullptr || std::getenv("PMI_RANK") != nullptr;
    return LauncherInfo{"srun", size, pmi};
  }
  if (auto size = env_int("PMIX_SIZE")) return LauncherInfo{"pmix", *size, true};
  if (auto size = env_int("PMI_SIZE")) return LauncherInfo{"pmi", *size, true};
  return std::nullopt;
}

bool inside_slurm_allocation() {
  return std::getenv("SLURM_JOB_ID") != nullptr && std::getenv("SLURM_STEP_ID") == nullptr;
}

std::unique_ptr<Communicator> open_world(const std::optional<LauncherInfo>& launcher) {
  if (!launcher) return make_single_process_communicator();
  if (!launcher->has_pmi) {
    // An srun step without PMI: MPI cannot find the other tasks (Open MPI aborts in MPI_Init),
    // so each would train alone. Refused before MPI starts; only the first task says so.
    if (launcher->world_size > 1) {
      if (env_int("SLURM_PROCID").value_or(0) == 0) {
        std::fprintf(stderr,
                     "error: srun started %d tasks without PMI, so MPI cannot join them into "
                     "one job; run srun --mpi=pmix singularity ... (or set MpiDefault=pmix in "
                     "slurm.conf)\n",
                     launcher->world_size);
      }
      std::fflush(stderr);
      std::exit(kExitUsage);
    }
    return make_single_process_communicator();  // one task: no MPI needed
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
      throw RunError("MPI_Init_thread failed under " + launcher->name +
                     "; check that the launcher and this binary use the same MPI");
    }
    std::atexit(finalize_mpi);
  }
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
}

NodeShare node_share(int fallback_size) {
  int initialized = 0, finalized = 0, size = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size <= 1) return NodeShare{0, std::max(1, fallback_size)};
  static const NodeShare shared = [] {
    // The processes that can share memory with this one are the ones on its node, whatever
    // the launcher told (or did not tell) the environment.
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    NodeShare n;
    MPI_Comm_rank(node, &n.local_rank);
    MPI_Comm_size(node, &n.local_size);
    MPI_Comm_free(&node);
    return n;
  }();
  return shared;
}

namespace {

// The launcher's process and what the parent has passed on to it (guarded by g_forward_mutex).
std::mutex g_forward_mutex;
pid_t g_launcher_pid = 0;
bool g_forwarded = false;       // the first stop signal, as SIGUSR1 (sent once the pid is known)
bool g_ended_by_us = false;     // a second one, as SIGTERM

// The first stop signal becomes SIGUSR1 for the ranks (mpirun and srun both pass it on), which
// checkpoint and stop; a later one (past the debounce) SIGTERM, which ends them at once.
void forward_signal(int signal) {
  std::lock_guard<std::mutex> lock(g_forward_mutex);
  switch (note_stop_signal(signal)) {
    case StopArrival::kFirst:
      g_forwarded = true;
      if (g_launcher_pid > 0) kill(g_launcher_pid, SIGUSR1);
      break;
    case StopArrival::kSecond:
      g_ended_by_us = true;
      if (g_launcher_pid > 0) kill(g_launcher_pid, SIGTERM);
      break;
    case StopArrival::kRepeat:
      break;
  }
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string dirs = path;
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, end - start);
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

std::vector<std::string> launcher_command(int processes) {
  if (inside_slurm_allocation()) {
    if (on_path("srun")) {
      // --kill-on-bad-exit: a rank that dies takes the step down instead of leaving the others
      // waiting in a collective.
      return {"srun", "--mpi=pmix", "--ntasks=" + std::to_string(processes),
              "--kill-on-bad-exit=1"};
    }
  }
  // --quiet: no Open MPI banner when a rank aborts; the rank has printed its own error line.
  // --oversubscribe always: Open MPI counts slots as physical cores within the cpuset, which
  // can be fewer than hardware_concurrency() reports (hyper-threads, containers); we size
  // threads ourselves.
  std::vector<std::string> command = {"mpirun", "--quiet", "-np", std::to_string(processes),
                                      "--oversubscribe"};
  if (geteuid() == 0) command.push_back("--allow-run-as-root");
  return command;
}

}  // namespace

int relaunch_job(int processes, const std::vector<std::string>& args) {
  std::vector<std::string> command = launcher_command(processes);
  const std::string launcher = command.front();
  // Rank output goes straight to our stdout/stderr (the launcher forwards it); ranks other than
  // 0 keep quiet, so this is rank 0's output and any rank's error line.
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  command.push_back(n > 0 ? std::string(self, static_cast<size_t>(n)) : "/proc/self/exe");
  for (size_t i = 1; i < args.size(); ++i) command.push_back(args[i]);

  std::vector<char*> argv;
  for (auto& s : command) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = getpid();
  LauncherOutput output;
  {
    // A signal from here on is passed on once the child exists; one before, too.
    std::lock_guard<std::mutex> lock(g_forward_mutex);
    g_forwarded = stop_signal_received() != 0;
  }
  set_stop_action(forward_signal);
  const pid_t child = fork();
  if (child < 0) throw RunError("fork failed: cannot start " + launcher);
  if (child == 0) {
    // A process group of its own: a terminal's Ctrl-C reaches only us, and we pass it on once.
    // Dies with us, so a killed parent never leaves a launcher and its ranks behind.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(kExitRuntime);
    unblock_stop_signals();
    if (output.write_fd() >= 0) dup2(output.write_fd(), STDERR_FILENO);
    execvp(command.front().c_str(), argv.data());
    std::fprintf(stderr,
                 "error: cannot run %s (%s); install OpenMPI (scripts/setup) or start the job "
                 "under your launcher: mpirun -np %d singularity train ...\n",
                 launcher.c_str(), std::strerror(errno), processes);
    _exit(kExitRuntime);
  }
  output.start();
  {
    std::lock_guard<std::mutex> lock(g_forward_mutex);
    g_launcher_pid = child;
    if (g_forwarded) kill(child, SIGUSR1);  // arrived between fork and here
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) throw RunError("waitpid on " + launcher + " failed");
  }
  {
    std::lock_guard<std::mutex> lock(g_forward_mutex);
    g_launcher_pid = 0;
  }
  output.finish();
  const int code = WIFEXITED(status)     ? WEXITSTATUS(status)
                   : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                         : kExitRuntime;
  bool ended_by_us = false;
  {
    std::lock_guard<std::mutex> lock(g_forward_mutex);
    ended_by_us = g_ended_by_us;
  }
  if (code > 128 && code < 128 + 32 && !(ended_by_us && code == 128 + SIGTERM)) {
    // A rank died from a signal it did not handle (also while stopping on the first signal,
    // which the ranks handle): it could print nothing itself.
    const int signal = code - 128;
    std::fprintf(stderr,
                 "error: a process of the job was killed by %s (signal %d%s); the job stopped. "
                 "Its checkpoints are kept: run the job again with checkpoint.resume: auto to "
                 "continue\n",
                 strsignal(signal), signal,
                 signal == SIGKILL ? ": out of memory, or killed by someone" : "");
  }
  return code;
}

void remember_arguments(int argc, char** argv) { g_arguments.assign(argv, argv + argc); }
const std::vector<std::string>& program_arguments() { return g_arguments; }

std::string rank_prefix() {
  int initialized = 0, finalized = 0, size = 1, rank = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return "";
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return size > 1 ? "rank " + std::to_string(rank) + ": " : "";
}

void abort_job(int exit_code) {
  int initialized = 0, finalized = 0, size = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
}

}  // namespace sg
