#pragma once
// Graceful stops (preemption, Ctrl-C, a job's time limit). SIGTERM, SIGINT and SIGUSR1 set a
// flag; the trainer reads it at each step boundary, the ranks agree on it (one all-reduce), write
// a checkpoint and exit with kExitInterrupted. A second signal, more than kSignalDebounce after
// the first, ends the process at once (exit 128 + signal). Signals closer together count as one:
// under Slurm the same notice can reach a task twice (directly and forwarded by srun or a batch
// script's trap), and a terminal's Ctrl-C reaches every process of the foreground group.
#include <chrono>

namespace sg {

// The code a run stopped by a signal or train.time_limit exits with, after its checkpoint:
// `checkpoint.resume: auto` continues it. Slurm batch scripts requeue on it.
constexpr int kExitInterrupted = 3;
constexpr std::chrono::milliseconds kSignalDebounce{1000};

// Records a stop signal arriving now; async-signal-safe, for signal handlers. kFirst: the
// first (stop_signal_received() returns it from now on); kRepeat: a copy within
// kSignalDebounce of the first; kSecond: a later one.
enum class StopArrival { kFirst, kRepeat, kSecond };
StopArrival note_stop_signal(int signal);

// Installs the handlers for SIGTERM, SIGINT and SIGUSR1 (idempotent).
void install_stop_handlers();

// After the run has stopped and checkpointed: a later stop signal (a launcher ending the other
// ranks once one has exited) ends the process at once with `exit_code`, silently.
void settle_stop_handlers(int exit_code);

// The first stop signal received (0 = none).
int stop_signal_received();

// "SIGTERM", "SIGUSR1", ...
const char* signal_name(int signal);

// Seconds since this process started (train.time_limit counts from there).
double process_seconds();

// Test hooks: behave as if `signal` had arrived; forget it.
void raise_stop_flag(int signal);
void clear_stop_flag();

}  // namespace sg
