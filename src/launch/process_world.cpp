#include "launch/process_world.h"

#include <mpi.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "comm/mpi_communicator.h"
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
  if (auto size = env_int("OMPI_COMM_WORLD_SIZE")) {
    return LauncherInfo{"mpirun", *size, env_int("OMPI_COMM_WORLD_LOCAL_RANK").value_or(0),
                        env_int("OMPI_COMM_WORLD_LOCAL_SIZE").value_or(1)};
  }
  if (auto size = env_int("PMIX_SIZE")) {
    return LauncherInfo{"pmix", *size, env_int("SLURM_LOCALID").value_or(0),
                        env_int("SLURM_NTASKS_PER_NODE").value_or(1)};
  }
  if (auto size = env_int("SLURM_NTASKS"); size && env_int("SLURM_PROCID")) {
    return LauncherInfo{"srun", *size, env_int("SLURM_LOCALID").value_or(0),
                        env_int("SLURM_NTASKS_PER_NODE").value_or(1)};
  }
  if (auto size = env_int("PMI_SIZE")) {
    return LauncherInfo{"pmi", *size, env_int("MPI_LOCALRANKID").value_or(0),
                        env_int("MPI_LOCALNRANKS").value_or(1)};
  }
  return std::nullopt;
}

std::unique_ptr<Communicator> open_world(const std::optional<LauncherInfo>& launcher) {
  if (!launcher) return make_single_process_communicator();
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

int relaunch_under_mpirun(int processes, const std::vector<std::string>& args) {
  // --quiet: no Open MPI banner when a rank aborts; the rank has printed its own error line.
  std::vector<std::string> command = {"mpirun", "--quiet", "-np", std::to_string(processes)};
  // Always: Open MPI counts slots as physical cores within the cpuset, which can be fewer than
  // hardware_concurrency() reports (hyper-threads, containers); we size threads ourselves.
  command.push_back("--oversubscribe");
  if (geteuid() == 0) command.push_back("--allow-run-as-root");
  // Rank output goes straight to our stdout/stderr (mpirun forwards it); ranks other than 0
  // keep quiet, so this is rank 0's output and any rank's error line.
  command.push_back("/proc/self/exe");
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) command.back() = std::string(self, static_cast<size_t>(n));
  for (size_t i = 1; i < args.size(); ++i) command.push_back(args[i]);

  std::vector<char*> argv;
  for (auto& s : command) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = fork();
  if (child < 0) throw RunError("fork failed: cannot start mpirun");
  if (child == 0) {
    execvp("mpirun", argv.data());
    std::fprintf(stderr,
                 "error: cannot run mpirun (%s); install OpenMPI (scripts/setup) or start the "
                 "job under your launcher: mpirun -np %d singularity train ...\n",
                 std::strerror(errno), processes);
    _exit(kExitRuntime);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) throw RunError("waitpid on mpirun failed");
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return kExitRuntime;
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
