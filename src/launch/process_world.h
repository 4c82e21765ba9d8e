#pragma once
// Where this process sits among the job's processes, and how it got there: started by the user
// alone (at a prompt, or in a Slurm batch script outside any job step), by mpirun (OpenMPI sets
// OMPI_COMM_WORLD_*), by srun as a task of a job step (SLURM_STEP_ID; PMIX_RANK under
// --mpi=pmix), or by our own self-launch (mpirun, or srun inside a Slurm allocation).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace sg {

struct LauncherInfo {
  std::string name;    // "mpirun", "srun", "pmix", "pmi"
  int world_size = 1;  // tasks the launcher started
  bool has_pmi = true;  // srun: started with a PMI plugin (--mpi=pmix/pmi2), so MPI sees them all
};

// The launcher this process runs under, from its environment, or nullopt when started alone.
// A Slurm batch script sets SLURM_NTASKS and SLURM_PROCID too, but not SLURM_STEP_ID: there the
// program is not yet launched and launches its ranks itself.
std::optional<LauncherInfo> detect_launcher();

// Inside a Slurm allocation (a batch script or salloc) but outside any job step: the self-launch
// uses srun there.
bool inside_slurm_allocation();

// Initialises MPI when running under a launcher (MPI_THREAD_FUNNELED) and returns the world;
// a single-process communicator otherwise. Finalises MPI at exit. Where srun started several
// tasks without PMI (each would train alone) it says to use --mpi=pmix and exits 2.
std::unique_ptr<Communicator> open_world(const std::optional<LauncherInfo>& launcher);

// This process's rank among the job's processes on its node, and their number: from MPI's
// shared-memory split where MPI runs, else `fallback_size` processes with this one first.
struct NodeShare {
  int local_rank = 0;
  int local_size = 1;
};
NodeShare node_share(int fallback_size);

// Re-executes this program under the launcher with `processes` ranks and the same arguments:
// `srun --mpi=pmix` inside a Slurm allocation, else `mpirun -np` (with --oversubscribe, and
// --allow-run-as-root as root). The launcher runs in a process group of its own and dies with
// this process; SIGTERM, SIGINT and SIGUSR1 here reach the ranks as SIGUSR1 (a graceful stop,
// stop_signal.h), a second one as SIGTERM. Streams the ranks' output and returns the job's exit
// code.
int relaunch_job(int processes, const std::vector<std::string>& args);

// Command-line arguments of this process, as given (set by main()).
void remember_arguments(int argc, char** argv);
const std::vector<std::string>& program_arguments();

// "rank R: " when this process is one of several MPI ranks, else "". Prefixes error lines.
std::string rank_prefix();

// Ends the whole job from any rank: prints nothing itself; MPI_Abort where MPI is running with
// more than one process, else returns so the caller can exit normally.
void abort_job(int exit_code);

}  // namespace sg
