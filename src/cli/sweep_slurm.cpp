#include "cli/sweep_slurm.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "launch/stop_signal.h"
#include "util/error.h"

namespace sg {
namespace {

namespace fs = std::filesystem;

// 'text' for bash, whatever it holds.
std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string absolute_dir(const SweepSpec& sweep, const SlurmScriptOptions& options) {
  const fs::path dir(sweep.dir);
  return (dir.is_absolute() ? dir : fs::path(options.working_dir) / dir)
      .lexically_normal()
      .string();
}

// The task's body: run the point in the background so the shell can take Slurm's signals
// (USR1 before the time limit, TERM on preemption), pass them on, wait until the point has
// stopped, and requeue the task when it stopped before finishing (the sweep's exit code 3,
// kExitInterrupted), so the requeued task resumes it.
constexpr const char* kTaskBody = R"(
interrupted=0
forward() {
  interrupted=1
  kill -"$1" "$child" 2>/dev/null
}
trap 'forward USR1' USR1
trap 'forward TERM' TERM
@COMMAND@ &
child=$!
# wait returns early when a trapped signal arrives: wait again until the point has stopped.
wait "$child"
while kill -0 "$child" 2>/dev/null; do wait "$child"; done
wait "$child"
status=$?
# Exit 3: the point stopped early with a checkpoint (a signal, or its train.time_limit).
# Requeued only while the task is still RUNNING (USR1 before the time limit, or a signal sent
# with scancel --signal): when Slurm is ending it (scancel, preemption) a requeue would bring a
# cancelled task back.
if [[ $status -eq 3 || ( $interrupted -eq 1 && $status -ne 0 ) ]]; then
  state=$(scontrol show job "${SLURM_JOB_ID:-}" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | head -n 1)
  if [[ $state == JobState=RUNNING ]]; then
    echo "point $SLURM_ARRAY_TASK_ID unfinished (exit $status); requeueing the task to resume it"
    scontrol requeue "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
  else
    echo "point $SLURM_ARRAY_TASK_ID unfinished (exit $status); Slurm is ending the task" \
         "(${state:-state unknown}): not requeueing; run the sweep again to resume it"
  fi
fi
exit "$status"
)";

}  // namespace

std::string sbatch_script_path(const SweepSpec& sweep, const SlurmScriptOptions& options) {
  return absolute_dir(sweep, options) + "/sweep.sbatch";
}

std::string slurm_log_dir(const SweepSpec& sweep, const SlurmScriptOptions& options) {
  return absolute_dir(sweep, options) + "/logs";
}

std::string sbatch_script(const SweepSpec& sweep, const SlurmScriptOptions& options) {
  for (const std::string& arg : options.sbatch_args) {
    if (arg.size() < 2 || arg[0] != '-' || arg.find('\n') != std::string::npos)
      throw SpecError("--sbatch-arg '" + arg +
                      "': give one sbatch option, e.g. --sbatch-arg=--partition=gpu");
  }
  const int last = static_cast<int>(sweep.points.size()) - 1;
  std::string out = "#!/bin/bash\n";
  out += fmt::format(
      "# Written by `singularity sweep {} --slurm`: one array task per point of sweep '{}'\n"
      "# ({} point{}). Each task runs its point; a finished point is skipped and an unfinished\n"
      "# one resumes from its newest checkpoint. Progress: singularity sweep {} --summary\n",
      options.sweep_file, sweep.name, sweep.points.size(), sweep.points.size() == 1 ? "" : "s",
      options.sweep_file);
  out += fmt::format("#SBATCH --job-name={}\n", sweep.name);
  out += fmt::format("#SBATCH --array=0-{}%{}\n", last, options.max_parallel);
  out += fmt::format("#SBATCH --output={}/%A_%a.out\n", slurm_log_dir(sweep, options));
  out += fmt::format("#SBATCH --chdir={}\n", options.working_dir);
  // A requeued task appends to its log instead of starting it again.
  out += "#SBATCH --requeue\n#SBATCH --open-mode=append\n#SBATCH --signal=B:USR1@120\n";
  for (const auto& [option, value] : sweep.slurm)
    out += fmt::format("#SBATCH --{}={}\n", option, value);
  for (const std::string& arg : options.sbatch_args) out += "#SBATCH " + arg + "\n";
  const std::string command =
      fmt::format("{} sweep {} --index \"$SLURM_ARRAY_TASK_ID\"", shell_quote(options.executable),
                  shell_quote(options.sweep_file));
  std::string body = kTaskBody;
  body.replace(body.find("@COMMAND@"), 9, command);
  out += body;
  return out;
}

std::optional<std::string> find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  std::string dirs = path;
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    const std::string candidate = dir + "/" + program;
    std::error_code error;
    if (fs::is_regular_file(candidate, error) && access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return std::nullopt;
}

std::string submit_sbatch(const std::string& sbatch, const std::string& script) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) throw RunError("cannot create a pipe to run sbatch");
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = fork();
  if (child < 0) throw RunError("fork failed: cannot run sbatch; submit with: sbatch " + script);
  if (child == 0) {
    unblock_stop_signals();
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    execl(sbatch.c_str(), "sbatch", "--parsable", script.c_str(), static_cast<char*>(nullptr));
    std::fprintf(stderr, "cannot run %s: %s", sbatch.c_str(), std::strerror(errno));
    _exit(127);
  }
  close(pipe_fds[1]);
  std::string output;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer));
    if (n > 0) {
      output.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  // --parsable prints "JOBID" or "JOBID;CLUSTER" as its last line.
  const std::string last_line =
      output.substr(output.rfind('\n') == std::string::npos ? 0 : output.rfind('\n') + 1);
  const std::string job_id = last_line.substr(0, last_line.find(';'));
  const bool numeric =
      !job_id.empty() && job_id.find_first_not_of("0123456789") == std::string::npos;
  if (!ok || !numeric) {
    throw RunError(fmt::format(
        "sbatch failed ({}): {}; fix the options (slurm: in the sweep file "
        "or --sbatch-arg) and submit with: sbatch {}",
        WIFEXITED(status) ? fmt::format("exit {}", WEXITSTATUS(status)) : std::string("killed"),
        output.empty() ? "no output" : output, script));
  }
  return job_id;
}

}  // namespace sg
