#pragma once
// Graceful stops (preemption, Ctrl-C, a job's time limit). SIGTERM, SIGINT and SIGUSR1 set a
// flag; the trainer reads it at each step boundary, the ranks agree on it (one all-reduce), write
// a checkpoint and exit with kExitInterrupted. A second signal, more than kSignalDebounce after
// the first, ends the process at once (exit 128 + signal). Signals closer together count as one:
// under Slurm the same notice can reach a task twice (directly and forwarded by srun or a batch
// script's trap), and a terminal's Ctrl-C reaches every process of the foreground group.
//
// No stop signal is ever handled on a thread that computes: the three are blocked in every
// thread from the start of main() and taken by one thread with sigwait (docs/faults.md). A
// handler frame pushed onto a thread inside oneDNN's or OpenBLAS's kernels corrupted the heap
// ("double free or corruption", exit 134) in up to 10 of 16 stops.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

namespace sg {

// The code a run stopped by a signal or train.time_limit exits with, after its checkpoint:
// `checkpoint.resume: auto` continues it. Slurm batch scripts requeue on it.
constexpr int kExitInterrupted = 3;
constexpr std::chrono::milliseconds kSignalDebounce{1000};

// Call first in main(), before any thread starts: blocks SIGTERM, SIGINT and SIGUSR1 in this
// thread, so every thread started from now on inherits the block. Returns false when they were
// not blocked yet when the program started: threads that libraries start before main() (OpenBLAS's
// pool) could then still take them, so the caller re-executes the program once (the block
// survives exec) before start_signal_thread().
bool block_stop_signals();

// Starts the one thread that takes the stop signals (idempotent). Until an action is set, a stop
// signal ends the process as its default action would.
void start_signal_thread();

// What the signal thread does with each stop signal from now on; runs on that thread (not in a
// signal handler), so it may lock and print. An empty action restores the default.
void set_stop_action(std::function<void(int)> action);

// For a child about to exec another program (between fork and exec; async-signal-safe): the
// stop signals unblocked again, as the program would have them when started from a shell.
void unblock_stop_signals();

// Records a stop signal arriving now. kFirst: the first (stop_signal_received() returns it from
// now on); kRepeat: a copy within kSignalDebounce of the first; kSecond: a later one.
enum class StopArrival { kFirst, kRepeat, kSecond };
StopArrival note_stop_signal(int signal);

// A training rank's action: the flag, and a second signal ends the process without a checkpoint.
void install_stop_handlers();

// After the run has stopped and checkpointed: a later stop signal (a launcher ending the other
// ranks once one has exited) ends the process at once with `exit_code`, silently.
void settle_stop_handlers(int exit_code);

// A crash (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL) prints one line naming this process
// (`prefix`, e.g. "rank 1: ") before the signal's default action ends it, so a launcher's
// parent can tell which rank failed. Call once the process knows its rank.
void report_crashes(const std::string& prefix);

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
