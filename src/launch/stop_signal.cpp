#include "launch/stop_signal.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <cstdio>
#include <mutex>
#include <thread>

namespace sg {
namespace {

constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGUSR1};

std::atomic<int> g_signal{0};
const std::chrono::steady_clock::time_point g_process_start = std::chrono::steady_clock::now();
std::atomic<long long> g_first_ns{0};

std::mutex g_action_mutex;
std::function<void(int)> g_action;  // guarded by g_action_mutex

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  for (const int s : kStopSignals) sigaddset(&set, s);
  return set;
}

long long monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// The signal's default action (the process ends with it), as if it had never been blocked:
// only this thread unblocks it, and every other one keeps it blocked.
[[noreturn]] void end_by_default(int signal) {
  std::fflush(stdout);
  std::fflush(stderr);
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(signal, &action, nullptr);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signal);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise(signal);
  _exit(128 + signal);  // not reached: the default action of the three ends the process
}

pthread_t g_signal_thread;

// Only for a thread that did not inherit the block (the program could not re-execute itself,
// e.g. without /proc): the signal goes on to the signal thread, where sigwait takes it.
void pass_to_signal_thread(int signal) { pthread_kill(g_signal_thread, signal); }

void take_signals() {
  const sigset_t set = stop_set();
  for (;;) {
    int signal = 0;
    if (sigwait(&set, &signal) != 0) continue;
    std::function<void(int)> action;
    {
      std::lock_guard<std::mutex> lock(g_action_mutex);
      action = g_action;
    }
    if (!action) end_by_default(signal);
    action(signal);
  }
}

constexpr int kCrashSignals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};
char g_crash_prefix[64] = "";

void write_all(const char* text) {
  size_t left = strlen(text);
  while (left > 0) {
    const ssize_t n = write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

// Async-signal-safe: write(2) only, then the default action (a core dump where enabled).
void on_crash(int signal) {
  write_all(g_crash_prefix);
  write_all("error: this process crashed (");
  write_all(signal_name(signal));
  write_all("); its checkpoints are kept (checkpoint.resume: auto continues the run). This is a "
            "bug: please report it with the job spec and the lines above\n");
  ::signal(signal, SIG_DFL);
  raise(signal);
}

}  // namespace

void report_crashes(const std::string& prefix) {
  snprintf(g_crash_prefix, sizeof(g_crash_prefix), "%s", prefix.c_str());
  struct sigaction action {};
  action.sa_handler = on_crash;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND | SA_NODEFER;
  for (const int s : kCrashSignals) sigaction(s, &action, nullptr);
}

bool block_stop_signals() {
  const sigset_t set = stop_set();
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &set, &previous);
  for (const int s : kStopSignals) {
    if (sigismember(&previous, s) != 1) return false;
  }
  return true;
}

void start_signal_thread() {
  static std::once_flag started;
  std::call_once(started, [] {
    std::thread thread(take_signals);
    g_signal_thread = thread.native_handle();
    thread.detach();
    struct sigaction action {};
    action.sa_handler = pass_to_signal_thread;
    sigfillset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (const int s : kStopSignals) sigaction(s, &action, nullptr);
  });
}

void set_stop_action(std::function<void(int)> action) {
  std::lock_guard<std::mutex> lock(g_action_mutex);
  g_action = std::move(action);
}

void unblock_stop_signals() {
  for (const int s : kStopSignals) signal(s, SIG_DFL);
  const sigset_t set = stop_set();
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
}

const char* signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGHUP: return "SIGHUP";
    case SIGKILL: return "SIGKILL";
    case SIGABRT: return "SIGABRT";
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    default: return "a signal";
  }
}

void install_stop_handlers() {
  set_stop_action([](int signal) {
    if (note_stop_signal(signal) != StopArrival::kSecond) return;
    std::fprintf(stderr, "%s: second stop signal, ending now without a checkpoint\n",
                 signal_name(signal));
    std::fflush(stderr);
    _exit(128 + signal);
  });
}

StopArrival note_stop_signal(int signal) {
  const long long now = monotonic_ns();
  int none = 0;
  if (g_signal.compare_exchange_strong(none, signal)) {
    g_first_ns.store(now);
    return StopArrival::kFirst;
  }
  const long long debounce_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(kSignalDebounce).count();
  return now - g_first_ns.load() < debounce_ns ? StopArrival::kRepeat : StopArrival::kSecond;
}

void settle_stop_handlers(int exit_code) {
  set_stop_action([exit_code](int) { _exit(exit_code); });
}

int stop_signal_received() { return g_signal.load(); }

double process_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - g_process_start).count();
}

void raise_stop_flag(int signal) {
  g_first_ns.store(monotonic_ns());
  g_signal.store(signal);
}

void clear_stop_flag() { g_signal.store(0); }

}  // namespace sg
