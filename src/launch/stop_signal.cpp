#include "launch/stop_signal.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace sg {
namespace {

volatile sig_atomic_t g_signal = 0;
const std::chrono::steady_clock::time_point g_process_start = std::chrono::steady_clock::now();
std::atomic<long long> g_first_ns{0};

long long monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

void write_line(const char* a, const char* b) {
  // Only write(2) here: printf is not async-signal-safe.
  ssize_t ignored = write(STDERR_FILENO, a, strlen(a));
  ignored = write(STDERR_FILENO, b, strlen(b));
  (void)ignored;
}

volatile sig_atomic_t g_settled_exit = -1;

void on_stop_signal(int signal) {
  if (g_settled_exit >= 0) _exit(g_settled_exit);
  if (note_stop_signal(signal) != StopArrival::kSecond) return;
  write_line(signal_name(signal), ": second stop signal, ending now without a checkpoint\n");
  _exit(128 + signal);
}

}  // namespace

const char* signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGHUP: return "SIGHUP";
    case SIGKILL: return "SIGKILL";
    default: return "a signal";
  }
}

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking reads and MPI calls go on; the loop checks the flag
  for (const int s : {SIGTERM, SIGINT, SIGUSR1}) sigaction(s, &action, nullptr);
}

StopArrival note_stop_signal(int signal) {
  const long long now = monotonic_ns();
  if (g_signal == 0) {
    g_first_ns.store(now);
    g_signal = signal;
    return StopArrival::kFirst;
  }
  const long long debounce_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(kSignalDebounce).count();
  return now - g_first_ns.load() < debounce_ns ? StopArrival::kRepeat : StopArrival::kSecond;
}

void settle_stop_handlers(int exit_code) { g_settled_exit = exit_code; }

int stop_signal_received() { return g_signal; }

double process_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - g_process_start).count();
}

void raise_stop_flag(int signal) {
  g_first_ns.store(monotonic_ns());
  g_signal = signal;
}

void clear_stop_flag() { g_signal = 0; }

}  // namespace sg
