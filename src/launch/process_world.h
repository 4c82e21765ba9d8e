#pragma once
// Where this process sits among the job's processes, and how it got there: started by the user
// alone, by mpirun (OpenMPI sets OMPI_COMM_WORLD_*), by srun (SLURM_* / PMIX_* / PMI_*), or by
// our own self-launch (which is mpirun too).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace sg {

struct LauncherInfo {
  std::string name;   // "mpirun", "srun", ...
  int world_size = 1;
  int local_rank = 0;
  int local_size = 1;  // processes on this node
};

// The launcher this process runs under, from its environment, or nullopt when started alone.
std::optional<LauncherInfo> detect_launcher();

// Initialises MPI when running under a launcher (MPI_THREAD_FUNNELED) and returns the world;
// a single-process communicator otherwise. Finalises MPI at exit.
std::unique_ptr<Communicator> open_world(const std::optional<LauncherInfo>& launcher);

// Re-executes this program under `mpirun -np processes` with the same arguments (adding
// --oversubscribe when processes exceed the cores and --allow-run-as-root as root), streams the
// ranks' output, and returns the job's exit code.
int relaunch_under_mpirun(int processes, const std::vector<std::string>& args);

// Command-line arguments of this process, as given (set by main()).
void remember_arguments(int argc, char** argv);
const std::vector<std::string>& program_arguments();

// "rank R: " when this process is one of several MPI ranks, else "". Prefixes error lines.
std::string rank_prefix();

// Ends the whole job from any rank: prints nothing itself; MPI_Abort where MPI is running with
// more than one process, else returns so the caller can exit normally.
void abort_job(int exit_code);

}  // namespace sg
