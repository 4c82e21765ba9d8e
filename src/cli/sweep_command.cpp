// `singularity sweep` (sweep_command.h). Each point runs as a child process
// `singularity train BASE --set ...` (this binary through /proc/self/exe), so a point with
// devices.processes > 1 launches its ranks exactly as `train` does, and a point that crashes
// only fails itself. Its output goes to <run_dir>/train.log; the sweep prints one line per point
// and the summary.
#include "cli/sweep_command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "cli/sweep_slurm.h"
#include "cli/sweep_spec.h"
#include "cli/sweep_summary.h"
#include "launch/process_world.h"
#include "launch/stop_signal.h"
#include "util/error.h"

namespace sg {
namespace {

namespace fs = std::filesystem;

// The signal that interrupted the sweep, and the running point's process (0: none).
std::atomic<int> g_signal{0};
std::atomic<pid_t> g_child{0};

// TERM and USR1 (what Slurm sends before a time limit or on preemption) are passed on to the
// running point so it can stop; the sweep then starts no further point. INT comes from the
// terminal to the whole process group, the point included, so it is only noted.
void pass_on(int signal_number) {
  const pid_t child = g_child.load();
  if (signal_number != SIGINT && child > 0) kill(child, signal_number);
}

// For the sweep's lifetime, stop signals are noted and passed on (on the signal thread:
// launch/stop_signal.h).
class SignalForwarding {
 public:
  SignalForwarding() {
    set_stop_action([](int signal_number) {
      g_signal.store(signal_number);
      pass_on(signal_number);
    });
  }
  ~SignalForwarding() { set_stop_action(nullptr); }
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;
};

std::string self_executable() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n > 0) return std::string(path, static_cast<size_t>(n));
  const auto& args = program_arguments();
  if (args.empty()) throw RunError("cannot find this program's path (/proc/self/exe)");
  return fs::absolute(args[0]).string();
}

struct Attempt {
  int exit_code = 0;  // 128 + N when killed by signal N
  double seconds = 0;
};

// Runs `exe train ARGS` with stdout and stderr appended to log_path and waits for it.
Attempt run_train_child(const std::string& exe, const std::vector<std::string>& train_args,
                        const std::string& log_path) {
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0)
    throw RunError(log_path + ": cannot open for writing (" + std::strerror(errno) +
                   "); check that the sweep's dir is writable");
  std::vector<std::string> command = {exe, "train"};
  command.insert(command.end(), train_args.begin(), train_args.end());
  std::vector<char*> argv;
  for (std::string& s : command) argv.push_back(s.data());
  argv.push_back(nullptr);

  std::fflush(stdout);
  std::fflush(stderr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = fork();
  if (child == 0) {
    unblock_stop_signals();
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    execv(exe.c_str(), argv.data());
    std::fprintf(stderr, "error: cannot run %s: %s\n", exe.c_str(), std::strerror(errno));
    _exit(127);
  }
  if (child < 0) {
    close(log_fd);
    throw RunError(std::string("fork failed (") + std::strerror(errno) +
                   "): cannot start the point; free some memory or processes and re-run");
  }
  g_child.store(child);
  if (g_signal.load() != 0) pass_on(g_signal.load());  // arrived between fork and here
  close(log_fd);
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) break;
  }
  g_child.store(0);
  Attempt attempt;
  attempt.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  attempt.exit_code = WIFEXITED(status)     ? WEXITSTATUS(status)
                      : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                            : kExitRuntime;
  return attempt;
}

// The line of the log after `offset` that says what went wrong: the last "error:" line, else
// the last line.
std::string failure_line(const std::string& log_path, std::streamoff offset) {
  std::ifstream in(log_path);
  in.seekg(offset);
  std::string line, last, last_error;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    last = line;
    if (line.find("error:") != std::string::npos) last_error = line;
  }
  return last_error.empty() ? last : last_error;
}

std::string metrics_text(const PointMetrics& m) {
  std::string text;
  if (m.train_loss) text += fmt::format("train loss {:.4f}", *m.train_loss);
  if (m.val_loss) text += fmt::format(", val loss {:.4f}", *m.val_loss);
  for (const auto& [name, value] : m.val_metrics) text += fmt::format(", {} {:.4f}", name, value);
  return text;
}

std::string timestamp() {
  const std::time_t now = std::time(nullptr);
  char text[64];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  return text;
}

// One attempt at a point; returns where it stands afterwards.
PointState run_point(const SweepSpec& sweep, const SweepPoint& point, const std::string& tag) {
  std::error_code error;
  fs::create_directories(point.run_dir, error);
  if (error)
    throw RunError(point.run_dir + ": cannot create the point's run directory: " + error.message() +
                   "; check dir: in " + sweep.path);
  const std::string log_path = point.run_dir + "/train.log";
  const std::string exe = self_executable();
  const std::vector<std::string> args = train_arguments(sweep, point);
  std::streamoff offset = 0;
  {
    std::ofstream log(log_path, std::ios::app);
    std::string command = exe + " train";
    for (const std::string& a : args) command += " " + a;
    log << fmt::format("=== singularity sweep {}: point {}, {} ===\n$ {}\n", sweep.path,
                       point.index, timestamp(), command);
    log.flush();
    offset = log.tellp();
  }
  const std::optional<PointRecord> before = read_point_record(point.run_dir);
  PointRecord record;
  record.state = "running";
  record.wall_s = before ? before->wall_s : 0.0;
  write_point_record(point.run_dir, record);
  fmt::print("{}point {} ({}): running; log: {}\n", tag, point.index, describe_overrides(point),
             log_path);
  std::fflush(stdout);

  const Attempt attempt = run_train_child(exe, args, log_path);
  const PointSummary after = summarize_point(point);
  record.exit_code = attempt.exit_code;
  record.wall_s += attempt.seconds;
  PointState state = PointState::pending;
  if (after.state == PointState::done) {
    record.state = "done";
    state = PointState::done;
    fmt::print("{}point {}: done in {:.1f} s: {}\n", tag, point.index, attempt.seconds,
               metrics_text(after.metrics));
  } else if (g_signal != 0 || attempt.exit_code == kExitInterrupted) {
    // Stopped by a signal or train.time_limit: `train` checkpointed, a re-run resumes.
    record.state = "interrupted";
    fmt::print("{}point {}: interrupted ({}) at checkpoint step {} of {}; re-run to resume it\n",
               tag, point.index,
               g_signal != 0 ? fmt::format("signal {}", static_cast<int>(g_signal))
                             : fmt::format("exit {}", attempt.exit_code),
               after.checkpoint_step, point.spec.train.steps);
  } else if (attempt.exit_code != 0) {
    record.state = "failed";
    state = PointState::failed;
    fmt::print("{}point {}: failed (exit {}) after {:.1f} s: {}; log: {}\n", tag, point.index,
               attempt.exit_code, attempt.seconds, failure_line(log_path, offset), log_path);
  } else {
    record.state = "interrupted";
    fmt::print(
        "{}point {}: stopped at checkpoint step {} of {} without an error; re-run to "
        "resume it\n",
        tag, point.index, after.checkpoint_step, point.spec.train.steps);
  }
  write_point_record(point.run_dir, record);
  std::fflush(stdout);
  return state;
}

std::string summary_path(const SweepSpec& sweep) { return sweep.dir + "/summary.csv"; }

std::vector<PointSummary> write_summary(const SweepSpec& sweep) {
  std::vector<PointSummary> rows = summarize_sweep(sweep);
  std::error_code error;
  fs::create_directories(sweep.dir, error);
  if (error)
    throw RunError(sweep.dir + ": cannot create the sweep directory: " + error.message() +
                   "; check dir: in " + sweep.path);
  write_file_atomically(summary_path(sweep), summary_csv(sweep, rows));
  return rows;
}

void print_summary(const SweepSpec& sweep, const std::vector<PointSummary>& rows) {
  fmt::print("\nsweep {}: {} ({})\n{}", sweep.name, summary_counts(rows), summary_path(sweep),
             summary_table(sweep, rows));
  std::fflush(stdout);
}

int run_dry(const SweepSpec& sweep) {
  fmt::print("sweep {}: {} point{} of {}, run directories under {}\n", sweep.name,
             sweep.points.size(), sweep.points.size() == 1 ? "" : "s",
             sweep.base.empty() ? std::string("the embedded quickstart job") : sweep.base,
             sweep.dir);
  if (!sweep.common.empty()) {
    std::string common;
    for (const SweepOverride& o : sweep.common) common += " " + o.text();
    fmt::print("every point:{}\n", common);
  }
  size_t width = 0;
  for (const SweepPoint& p : sweep.points) width = std::max(width, p.run_dir.size());
  for (const SweepPoint& point : sweep.points) {
    const PointSummary s = summarize_point(point);
    fmt::print("{:>4}  {:<8}  {:<{}}  {}\n", point.index,
               s.state == PointState::done ? "done" : "to run", point.run_dir, width,
               describe_overrides(point));
  }
  return 0;
}

int run_points(const SweepSpec& sweep, const std::vector<const SweepPoint*>& points) {
  SignalForwarding forwarding;
  g_signal.store(0);
  const size_t total = points.size();
  for (size_t k = 0; k < total && g_signal == 0; ++k) {
    const SweepPoint& point = *points[k];
    const std::string tag = total == 1 ? "" : fmt::format("[{}/{}] ", k + 1, total);
    const PointSummary s = summarize_point(point);
    if (s.state == PointState::done) {
      fmt::print("{}point {}: done (step {} of {}); skipped\n", tag, point.index, s.checkpoint_step,
                 point.spec.train.steps);
    } else if (s.state == PointState::running && total > 1) {
      fmt::print(
          "{}point {}: running in another process (pid {} on {}); skipped. If it is "
          "not, delete {}/sweep_status.json\n",
          tag, point.index, s.record->pid, s.record->host, point.run_dir);
    } else {
      run_point(sweep, point, tag);
    }
  }
  const std::vector<PointSummary> rows = write_summary(sweep);
  if (total > 1) print_summary(sweep, rows);
  std::string failed;
  int failures = 0, unfinished = 0;
  for (const SweepPoint* point : points) {
    const PointSummary& row = rows[static_cast<size_t>(point->index)];
    if (row.state == PointState::pending) ++unfinished;
    if (row.state != PointState::failed) continue;
    failed += fmt::format("{}{} (exit {})", failures ? ", " : "", point->index, row.exit_code);
    ++failures;
  }
  if (g_signal != 0 || (failures == 0 && unfinished > 0)) {
    // Slurm array tasks requeue on this code (sweep_slurm.cpp); by hand, run the sweep again.
    fmt::print(stderr, "sweep {}: {} point{} unfinished{}; run the sweep again to resume\n",
               sweep.name, unfinished, unfinished == 1 ? "" : "s",
               g_signal != 0
                   ? fmt::format(" (interrupted by signal {})", static_cast<int>(g_signal))
                   : std::string());
    return kExitInterrupted;
  }
  if (failures > 0) {
    throw RunError(fmt::format(
        "{} of {} point{} failed: {}; see each point's train.log, fix the cause and re-run the "
        "sweep (finished points are skipped)",
        failures, total, total == 1 ? "" : "s", failed));
  }
  return 0;
}

int write_slurm_script(const SweepSpec& sweep, const SweepArguments& args) {
  SlurmScriptOptions options;
  options.max_parallel = args.max_parallel;
  options.sbatch_args = args.sbatch_args;
  options.executable = self_executable();
  options.working_dir = fs::current_path().string();
  options.sweep_file = fs::absolute(sweep.path).lexically_normal().string();
  const std::string script = sbatch_script(sweep, options);
  const std::string path = sbatch_script_path(sweep, options);
  std::error_code error;
  fs::create_directories(slurm_log_dir(sweep, options), error);
  if (error)
    throw RunError(slurm_log_dir(sweep, options) + ": cannot create: " + error.message() +
                   "; check dir: in " + sweep.path);
  write_file_atomically(path, script);
  chmod(path.c_str(), 0755);
  fmt::print("wrote {} ({} array task{}, at most {} at a time)\n", path, sweep.points.size(),
             sweep.points.size() == 1 ? "" : "s", args.max_parallel);
  if (args.no_submit) {
    fmt::print("submit it with: sbatch {}\n", path);
    return 0;
  }
  const auto sbatch = find_on_path("sbatch");
  if (!sbatch) {
    fmt::print("sbatch is not on PATH; on the cluster, submit it with: sbatch {}\n", path);
    return 0;
  }
  const std::string job = submit_sbatch(*sbatch, path);
  fmt::print("submitted array job {}\nprogress: {} sweep {} --summary\n", job, self_executable(),
             sweep.path);
  return 0;
}

}  // namespace

int run_sweep_command(const SweepArguments& args) {
  const SweepSpec sweep = load_sweep_spec(args.file);  // every point validated before anything
  if (args.dry_run) return run_dry(sweep);
  if (args.summary) {
    const std::vector<PointSummary> rows =
        fs::is_directory(sweep.dir) ? write_summary(sweep) : summarize_sweep(sweep);
    print_summary(sweep, rows);
    return 0;
  }
  if (args.slurm) return write_slurm_script(sweep, args);
  std::vector<const SweepPoint*> points;
  if (args.index >= 0) {
    if (static_cast<size_t>(args.index) >= sweep.points.size())
      throw SpecError(
          fmt::format("--index {}: the sweep {} has {} point{} (0 to {}); see "
                      "singularity sweep {} --dry-run",
                      args.index, sweep.path, sweep.points.size(),
                      sweep.points.size() == 1 ? "" : "s", sweep.points.size() - 1, sweep.path));
    points.push_back(&sweep.points[static_cast<size_t>(args.index)]);
  } else {
    for (const SweepPoint& point : sweep.points) points.push_back(&point);
  }
  return run_points(sweep, points);
}

}  // namespace sg
