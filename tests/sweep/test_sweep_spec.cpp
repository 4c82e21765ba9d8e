// Sweep files: expansion of the grid and the listed points, per-point run directories and jobs,
// and every way a sweep file can be wrong giving one located SpecError before anything runs.
#include <doctest/doctest.h>

#include <algorithm>

#include "model/gpt2_config.h"
#include "cli/sweep_spec.h"
#include "sweep_test_util.h"
#include "temp_dir.h"

using namespace sg;
using sg::test::sweep_error;

namespace {

std::vector<std::string> overrides_of(const SweepPoint& p) {
  std::vector<std::string> out;
  for (const SweepOverride& o : p.overrides) out.push_back(o.text());
  return out;
}

}  // namespace

TEST_CASE("the grid's product (first key slowest) comes first, then the listed points") {
  const SweepSpec s = parse_sweep_spec(
      "name: lr\n"
      "grid: {optim.lr: [1e-3, 3e-3], train.micro_batch: [4, 8]}\n"
      "points: [{optim.lr: 1e-2}, {optim.lr: 3e-2, train.steps: 50}]\n"
      "set: {train.steps: 100}\n",
      "sweeps/lr.yaml");
  REQUIRE(s.points.size() == 6);
  using V = std::vector<std::string>;
  CHECK(overrides_of(s.points[0]) == V{"optim.lr=1e-3", "train.micro_batch=4"});
  CHECK(overrides_of(s.points[1]) == V{"optim.lr=1e-3", "train.micro_batch=8"});
  CHECK(overrides_of(s.points[2]) == V{"optim.lr=3e-3", "train.micro_batch=4"});
  CHECK(overrides_of(s.points[3]) == V{"optim.lr=3e-3", "train.micro_batch=8"});
  CHECK(overrides_of(s.points[4]) == V{"optim.lr=1e-2"});
  CHECK(overrides_of(s.points[5]) == V{"optim.lr=3e-2", "train.steps=50"});
  for (int i = 0; i < 6; ++i) CHECK(s.points[static_cast<size_t>(i)].index == i);

  // Each point's job: the quickstart, then set:, then the point's own (which win).
  CHECK(s.points[3].spec.optim.lr == doctest::Approx(3e-3));
  CHECK(s.points[3].spec.train.micro_batch == 8);
  CHECK(s.points[3].spec.train.steps == 100);
  CHECK(s.points[5].spec.train.steps == 50);
  CHECK(s.points[0].spec.model.as<GPT2Config>().n_embd == 128);  // from the embedded quickstart
  CHECK(s.base.empty());

  // Named and placed per point; resumed when re-run.
  CHECK(s.dir == "runs/lr");  // default: runs/<name>, relative to the current directory
  CHECK(s.points[0].run_dir == "runs/lr/0-lr=1e-3_micro_batch=4");
  CHECK(s.points[5].run_dir == "runs/lr/5-lr=3e-2_steps=50");
  CHECK(s.points[0].job_name == "lr-0");
  CHECK(s.points[0].spec.name == "lr-0");
  CHECK(s.points[0].spec.log.dir == "runs/lr/0-lr=1e-3_micro_batch=4");
  CHECK(s.points[0].spec.checkpoint.resume == "auto");
  CHECK(describe_overrides(s.points[5]) == "optim.lr=3e-2 train.steps=50");
}

TEST_CASE("train_arguments are what the point's job was validated with") {
  const SweepSpec s = parse_sweep_spec(
      "dir: out\npoints: [{optim.betas: [0.9, 0.99]}]\nset: {train.steps: 7}\n", "b.yaml");
  REQUIRE(s.points.size() == 1);
  CHECK(s.name == "b");  // the file's stem
  CHECK(s.points[0].run_dir == "out/0-betas=_0.9_0.99_");
  CHECK(s.points[0].spec.optim.betas[1] == doctest::Approx(0.99));
  const std::vector<std::string> want = {"--set", "train.steps=7",
                                         "--set", "optim.betas=[0.9,0.99]",
                                         "--set", "name=b-0",
                                         "--set", "log.dir=out/0-betas=_0.9_0.99_",
                                         "--set", "checkpoint.resume=auto"};
  CHECK(train_arguments(s, s.points[0]) == want);
}

TEST_CASE("the base job is relative to the sweep file") {
  sg::test::TempDir dir;
  std::filesystem::create_directories(dir / "sweeps");
  sg::test::write_text(dir / "job.yaml",
                       "name: base\nmodel: {n_layer: 1, n_head: 2, n_embd: 32, context: 16, "
                       "vocab: 64}\ntrain: {steps: 3, global_batch: 4, micro_batch: 2}\n");
  sg::test::write_text(dir / "sweeps/s.yaml", "base: ../job.yaml\ngrid: {optim.lr: [1, 2]}\n");
  const SweepSpec s = load_sweep_spec(dir / "sweeps/s.yaml");
  CHECK(s.base == dir / "job.yaml");
  REQUIRE(s.points.size() == 2);
  CHECK(s.points[1].spec.model.as<GPT2Config>().n_embd == 32);
  CHECK(s.points[1].spec.optim.lr == 2.0);
  CHECK(train_arguments(s, s.points[1]).front() == dir / "job.yaml");

  const std::string missing = sweep_error("base: nowhere.yaml\npoints: [{}]\n", dir / "s.yaml");
  CHECK(missing.find(":1:1: cannot open the base job 'nowhere.yaml' (looked for " + dir.path() +
                     "/nowhere.yaml; base is relative to the sweep file)") != std::string::npos);
}

TEST_CASE("run directory names: full keys where leaves collide, base for no overrides") {
  const SweepSpec s =
      parse_sweep_spec("grid: {train.steps: [10, 20]}\npoints: [{eval.steps: 2}, {}]\n", "s.yaml");
  REQUIRE(s.points.size() == 4);
  CHECK(s.points[0].run_dir == "runs/s/0-train.steps=10");
  CHECK(s.points[2].run_dir == "runs/s/2-eval.steps=2");
  CHECK(s.points[3].run_dir == "runs/s/3-base");
  CHECK(describe_overrides(s.points[3]) == "(base job)");
}

TEST_CASE("slurm options are kept in order, underscores as dashes") {
  const SweepSpec s = parse_sweep_spec(
      "points: [{}]\nslurm: {partition: gpu, time: \"04:00:00\", cpus_per_task: 8}\n", "s.yaml");
  using P = std::vector<std::pair<std::string, std::string>>;
  CHECK(s.slurm == P{{"partition", "gpu"}, {"time", "04:00:00"}, {"cpus-per-task", "8"}});
}

TEST_CASE("sweep file errors name the line and say what to do") {
  CHECK(sweep_error("gird: {optim.lr: [1]}\n") ==
        "sweep.yaml:1:1: unknown key 'gird' in the sweep file; did you mean 'grid'?");
  CHECK(sweep_error("optim: {lr: 1}\npoints: [{}]\n") ==
        "sweep.yaml:1:1: unknown key 'optim' in the sweep file; job settings go in the base job "
        "or under set:, e.g. set: {optim.lr: 1e-3}");
  CHECK(sweep_error("grid: {optim.lrr: [1, 2]}\n") ==
        "sweep.yaml:1:8: unknown job-spec key 'optim.lrr' in grid; did you mean 'optim.lr'?");
  CHECK(sweep_error("points: [{train.lr: 1}]\n") ==
        "sweep.yaml:1:11: unknown job-spec key 'train.lr' in points[0]; did you mean 'optim.lr'?");
  CHECK(sweep_error("set: {optim: 1}\npoints: [{}]\n") ==
        "sweep.yaml:1:7: 'optim' in set is a section; give one of its keys, e.g. optim.name");
  CHECK(sweep_error("grid: {log.dir: [a, b]}\n") ==
        "sweep.yaml:1:8: 'log.dir' in grid is set by the sweep; set dir: at the top of the sweep "
        "file (points run in <dir>/<index>-...)");
  CHECK(sweep_error("points: [{checkpoint.resume: never}]\n").find("is set by the sweep") !=
        std::string::npos);
  CHECK(sweep_error("grid: {optim.lr: 1e-3}\n") ==
        "sweep.yaml:1:18: expected a list of values for grid key 'optim.lr', e.g. optim.lr: "
        "[1e-3, ...]; a single value belongs in set:");
  CHECK(sweep_error("grid: {optim.lr: []}\n") ==
        "sweep.yaml:1:18: grid key 'optim.lr' has no values; give at least one or remove it");
  CHECK(sweep_error("points: {optim.lr: 1}\n")
            .rfind("sweep.yaml:1:1: expected a list of points", 0) == 0);
  CHECK(sweep_error("grid: {optim.lr: [1], optim.lr: [2]}\n") ==
        "sweep.yaml:1:23: duplicate key 'optim.lr' in grid; keep one");
  CHECK(sweep_error("name: a b\npoints: [{}]\n") ==
        "sweep.yaml:1:7: name 'a b' cannot name run directories and jobs; use letters, digits, "
        "., _ and -");
  CHECK(sweep_error("points: [{}]\n", "my sweep.yaml") ==
        "my sweep.yaml: the file name 'my sweep' cannot name the sweep; set name: (letters, "
        "digits, ., _, -)");
  CHECK(sweep_error("grid: {optim.lr: [1, 2\n").find("sweep.yaml:2:1: YAML syntax error") == 0);
  CHECK(sweep_error("- a\n").rfind("sweep.yaml:1:1: expected a map with grid:", 0) == 0);
  CHECK(sweep_error("points: [{}]\nslurm: {array: 0-3}\n") ==
        "sweep.yaml:2:9: slurm option 'array' is set by the sweep itself; use name: for the job "
        "name and --max-parallel for the array");
  CHECK(sweep_error("points: [{}]\nslurm: {\"--time\": 1}\n").find("is not an sbatch option") !=
        std::string::npos);
}

TEST_CASE("an empty sweep or a runaway grid is refused") {
  const std::string hint = "add grid: {optim.lr: [1e-3, 3e-3]} and/or points: [{optim.lr: 1e-2}]";
  CHECK(sweep_error("name: x\n") == "sweep.yaml: the sweep has no points; " + hint);
  CHECK(sweep_error("grid: {}\npoints: []\n") == "sweep.yaml: the sweep has no points; " + hint);
  CHECK(sweep_error("") ==
        "sweep.yaml: expected a map with grid: and/or points: (and base:, "
        "name:, dir:, set:, slurm:) at the top of the sweep file");
  std::string big = "grid:\n";
  for (const char* key : {"optim.lr", "optim.min_lr", "optim.eps", "optim.weight_decay"})
    big += std::string("  ") + key + ": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]\n";
  CHECK(sweep_error(big) == "sweep.yaml: the sweep has more than 10000 points; shrink the grid");
}

TEST_CASE("every point's job is validated up front, errors pointing at the sweep file") {
  // A bad value: the value's own line and column, the point and what was given.
  CHECK(sweep_error("grid: {optim.lr: [1e-3, fast]}\n") ==
        "sweep.yaml:1:25: point 1 (optim.lr=fast): expected a float for 'optim.lr', got 'fast'");
  CHECK(sweep_error("grid: {optim.lr: [1e-3]}\npoints:\n  - {train.steps: -5}\n") ==
        "sweep.yaml:3:19: point 1 (train.steps=-5): train.steps must be >= 1; got -5");
  // In set:, the error is the set's, not the first point's.
  CHECK(sweep_error("set: {train.steps: ten}\npoints: [{}]\n") ==
        "sweep.yaml:1:20: set train.steps=ten: expected an integer for 'train.steps', got 'ten'");
  // A value valid alone but not with the base job: the point, then the job's own message.
  const std::string batch = sweep_error("grid: {train.micro_batch: [16, 5]}\n");
  CHECK(batch.rfind("sweep.yaml: point 1 (train.micro_batch=5): ", 0) == 0);
  CHECK(batch.find("not divisible") != std::string::npos);
}

TEST_CASE("duplicate points are refused, however their values are spelt") {
  CHECK(sweep_error("grid: {optim.lr: [1e-3, 3e-3]}\npoints: [{optim.lr: 0.001}]\n") ==
        "sweep.yaml:2:21: points 0 (optim.lr=1e-3) and 2 (optim.lr=0.001) give the same job; "
        "remove one of them");
  // A listed point that only repeats a set: value is the base job again.
  CHECK(sweep_error("set: {train.steps: 9}\npoints: [{}, {train.steps: 9}]\n")
            .find("points 0 ((base job)) and 1 (train.steps=9) give the same job") !=
        std::string::npos);
}

TEST_CASE("the per-point keys are reserved") {
  for (const char* key : {"name", "log.dir", "checkpoint.resume"})
    CHECK(is_sweep_controlled_key(key));
  CHECK_FALSE(is_sweep_controlled_key("optim.lr"));
}
