// Stopping and guarding a run: a stop signal checkpoints at the step boundary and a resume goes
// on bitwise; a second signal ends the process; train.time_limit's durations; a step whose
// gradients are not finite is skipped, and a streak of them ends the run naming the last good
// checkpoint; a checkpoint with a non-finite value is never written.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "checkpoint/checkpoint.h"
#include "config/duration.h"
#include "launch/stop_signal.h"
#include "model/model_family.h"
#include "train/train_checkpoint.h"
#include "train_test_support.h"
#include "util/error.h"

using namespace sg::testing;

namespace {

std::string checkpoint_tensors(const std::string& dir, int step) {
  const std::string at = fmt::format("{}/checkpoints/step_{:08d}/", dir, step);
  return read_file(at + "model.safetensors") + read_file(at + "optimizer.safetensors");
}

// Runs `body` in a child process and returns its wait status.
template <class F>
int in_child(F body) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

struct ScopedEnv {
  const char* name;
  ScopedEnv(const char* n, const std::string& value) : name(n) { setenv(n, value.c_str(), 1); }
  ~ScopedEnv() { unsetenv(name); }
};

}  // namespace

TEST_CASE("train.time_limit durations: seconds, units and Slurm's clock forms") {
  CHECK(sg::parse_duration_seconds("3600") == 3600.0);
  CHECK(sg::parse_duration_seconds("90s") == 90.0);
  CHECK(sg::parse_duration_seconds("45m") == 2700.0);
  CHECK(sg::parse_duration_seconds("1.5h") == 5400.0);
  CHECK(sg::parse_duration_seconds("2d") == 172800.0);
  CHECK(sg::parse_duration_seconds("05:30") == 330.0);           // MM:SS
  CHECK(sg::parse_duration_seconds("01:02:03") == 3723.0);       // HH:MM:SS
  CHECK(sg::parse_duration_seconds("1-02") == 93600.0);          // D-HH
  CHECK(sg::parse_duration_seconds("0-01:30") == 5400.0);        // D-HH:MM
  CHECK(sg::parse_duration_seconds("2-00:00:10") == 172810.0);   // D-HH:MM:SS
  for (const char* bad : {"", "h", "-5", "1:2:3:4", "12x", "1h30", "a:b", "5-", " 5"}) {
    INFO(bad);
    CHECK_FALSE(sg::parse_duration_seconds(bad).has_value());
  }
}

TEST_CASE("a stop signal checkpoints at the step boundary; the resumed run is bitwise equal") {
  sg::test::TempDir whole, stopped;
  sg::run_training(tiny_job(whole.path(), {"train.deterministic=true"}), quiet_options());
  sg::raise_stop_flag(SIGUSR1);
  const sg::TrainResult first =
      sg::run_training(tiny_job(stopped.path(), {"train.deterministic=true"}), quiet_options());
  sg::clear_stop_flag();
  CHECK(first.stopped_by == "SIGUSR1");
  CHECK(first.last_step == 1);  // the flag was up before the first step ended
  const auto listed = sg::list_checkpoints(stopped.path() + "/checkpoints");
  REQUIRE(listed.size() == 1);
  CHECK(listed.back().first == 1);  // no step lost
  const sg::TrainResult rest =
      sg::run_training(tiny_job(stopped.path(), {"train.deterministic=true"}), quiet_options());
  CHECK(rest.stopped_by.empty());
  CHECK(rest.first_step == 1);
  CHECK(rest.last_step == 20);
  CHECK(step_lines(stopped.path()) == step_lines(whole.path()));
  CHECK(checkpoint_tensors(stopped.path(), 20) == checkpoint_tensors(whole.path(), 20));
}

TEST_CASE("train.time_limit stops the run with a checkpoint before the limit") {
  sg::test::TempDir dir;
  // The limit has passed by the end of the first step.
  const sg::TrainResult r = sg::run_training(tiny_job(dir.path(), {"train.time_limit=0.001s"}), quiet_options());
  CHECK(r.stopped_by == "train.time_limit");
  CHECK(r.last_step < 20);
  REQUIRE_FALSE(sg::list_checkpoints(dir.path() + "/checkpoints").empty());
  CHECK(sg::list_checkpoints(dir.path() + "/checkpoints").back().first == r.last_step);
}

// As main() does it: the stop signals blocked, one thread taking them (launch/stop_signal.h).
// Signals are sent to the process (kill), as a launcher or Slurm sends them, not to a thread.
static void take_stop_signals_like_main() {
  sg::block_stop_signals();
  sg::start_signal_thread();
}

static void send_and_settle(int signal) {
  kill(getpid(), signal);
  usleep(100000);  // the signal thread acts
}

TEST_CASE("a second stop signal ends the process at once; one delivered twice counts once") {
  const int twice_apart = in_child([] {
    take_stop_signals_like_main();
    sg::install_stop_handlers();
    send_and_settle(SIGUSR1);
    usleep(static_cast<useconds_t>(sg::kSignalDebounce.count() * 1000 + 200000));
    send_and_settle(SIGTERM);
    _exit(0);  // not reached
  });
  REQUIRE(WIFEXITED(twice_apart));
  CHECK(WEXITSTATUS(twice_apart) == 128 + SIGTERM);
  const int twice_together = in_child([] {
    take_stop_signals_like_main();
    sg::install_stop_handlers();
    kill(getpid(), SIGUSR1);
    send_and_settle(SIGTERM);
    _exit(sg::stop_signal_received() == SIGUSR1 ? 0 : 1);
  });
  REQUIRE(WIFEXITED(twice_together));
  CHECK(WEXITSTATUS(twice_together) == 0);
  const int settled = in_child([] {
    take_stop_signals_like_main();
    sg::install_stop_handlers();
    send_and_settle(SIGUSR1);
    sg::settle_stop_handlers(sg::kExitInterrupted);
    send_and_settle(SIGTERM);
    _exit(0);
  });
  REQUIRE(WIFEXITED(settled));
  CHECK(WEXITSTATUS(settled) == sg::kExitInterrupted);
}

TEST_CASE("stop signals are taken on one thread only, never on a computing one") {
  // Every thread started after block_stop_signals inherits the block; the action runs on the
  // signal thread while the others compute (no handler frame on their stacks).
  const int status = in_child([] {
    take_stop_signals_like_main();
    static std::atomic<long> action_thread{0};
    sg::set_stop_action([](int) { action_thread.store(static_cast<long>(gettid())); });
    std::atomic<bool> run{true};
    std::vector<std::thread> workers;
    std::atomic<int> unblocked{0};
    for (int i = 0; i < 3; ++i) {
      workers.emplace_back([&] {
        sigset_t mask;
        pthread_sigmask(SIG_BLOCK, nullptr, &mask);
        for (const int s : {SIGTERM, SIGINT, SIGUSR1}) unblocked += sigismember(&mask, s) != 1;
        volatile double x = 0;
        while (run.load()) x = x + 1;
      });
    }
    for (int i = 0; i < 20; ++i) send_and_settle(SIGUSR1);
    run = false;
    for (auto& w : workers) w.join();
    const long taken = action_thread.load();
    _exit(unblocked == 0 && taken != 0 && taken != static_cast<long>(gettid()) ? 0 : 1);
  });
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("without an action a stop signal ends the process as its default would") {
  const int status = in_child([] {
    take_stop_signals_like_main();
    send_and_settle(SIGTERM);
    _exit(0);  // not reached
  });
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
}

TEST_CASE("a crash names the process in one line before the signal's default action") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const int status = in_child([&] {
    dup2(fds[1], STDERR_FILENO);
    sg::report_crashes("rank 3: ");
    abort();
  });
  close(fds[1]);
  char buffer[1024] = {};
  const ssize_t n = read(fds[0], buffer, sizeof(buffer) - 1);
  close(fds[0]);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
  const std::string line(buffer, n > 0 ? static_cast<size_t>(n) : 0);
  CHECK(line.rfind("rank 3: error: this process crashed (SIGABRT)", 0) == 0);
  CHECK(std::count(line.begin(), line.end(), '\n') == 1);
}

TEST_CASE("a non-finite gradient is skipped and counted; a streak ends the run") {
  sg::test::TempDir dir, streak;
  {
    ScopedEnv inject("SINGULARITY_TEST_NONFINITE", "3");
    sg::run_training(tiny_job(dir.path(), {"train.steps=6", "checkpoint.every=1", "eval.every=0"}),
                     quiet_options());
  }
  std::istringstream lines(read_file(dir.path() + "/metrics.jsonl"));
  std::string line;
  int skipped = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("loss") || !j.value("skipped", false)) continue;
    ++skipped;
    CHECK(j["step"] == 3);
    CHECK(j["grad_norm"].is_null());  // NaN
    CHECK(j["skipped_steps"] == 1);
  }
  CHECK(skipped == 1);
  // The skipped step left weights and optimizer state alone; later steps train on.
  CHECK(checkpoint_tensors(dir.path(), 3) == checkpoint_tensors(dir.path(), 2));
  CHECK(checkpoint_tensors(dir.path(), 4) != checkpoint_tensors(dir.path(), 3));

  ScopedEnv inject("SINGULARITY_TEST_NONFINITE", "3,4");
  CHECK_THROWS_WITH_AS(
      sg::run_training(tiny_job(streak.path(), {"train.steps=6", "checkpoint.every=2",
                                                "eval.every=0", "train.max_skipped_steps=2"}),
                       quiet_options()),
      doctest::Contains("2 steps in a row up to step 4"), sg::RunError);
  CHECK_THROWS_WITH_AS(
      sg::run_training(tiny_job(streak.path(), {"train.steps=6", "checkpoint.every=2",
                                                "eval.every=0", "train.max_skipped_steps=2",
                                                "checkpoint.resume=never"}),
                       quiet_options()),
      doctest::Contains("checkpoints/step_00000002"), sg::RunError);
}

TEST_CASE("a checkpoint holding a value that is not finite is never written") {
  sg::test::TempDir dir;
  const sg::JobSpec spec = tiny_job(dir.path());
  const auto family = sg::make_model_family(spec);
  const sg::ParameterLayout layout(family->description());
  std::vector<float> params(layout.total(), 0.5f), m(layout.total(), 0.0f), v(layout.total(), 0.0f);
  sg::WholeTensors whole;
  whole.params = params.data();
  whole.optimizer = "adamw";
  whole.state_names = {"m", "v"};
  whole.state = {m.data(), v.data()};
  sg::TrainerState state;
  state.step = 1;
  const std::string checkpoints = dir.path() + "/checkpoints";
  sg::save_training_checkpoint(checkpoints, spec, *family, whole, state);
  v[7] = std::numeric_limits<float>::infinity();
  state.step = 2;
  CHECK_THROWS_WITH_AS(sg::save_training_checkpoint(checkpoints, spec, *family, whole, state),
                       doctest::Contains("the optimizer state v holds inf at element 7"),
                       sg::RunError);
  v[7] = 0;
  params[3] = std::numeric_limits<float>::quiet_NaN();
  const std::string last_good = "last good one is " + checkpoints + "/step_00000001";
  CHECK_THROWS_WITH_AS(sg::save_training_checkpoint(checkpoints, spec, *family, whole, state),
                       doctest::Contains(last_good.c_str()), sg::RunError);
  const auto listed = sg::list_checkpoints(checkpoints);
  REQUIRE(listed.size() == 1);
  CHECK(listed.front().first == 1);
}
