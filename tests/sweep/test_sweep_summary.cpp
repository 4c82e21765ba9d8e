// A sweep's summary from run directories written by hand: where each point stands, the metrics
// read from metrics.jsonl, the CSV, and the sbatch array script.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/sweep_slurm.h"
#include "cli/sweep_summary.h"
#include "error_of.h"
#include "sweep_test_util.h"
#include "temp_dir.h"

using namespace sg;
using sg::test::write_text;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A complete checkpoint as list_checkpoints sees one: step_%08d holding a manifest.json.
void fake_checkpoint(const std::string& run_dir, int step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step_%08d", step);
  const std::string dir = run_dir + "/checkpoints/" + name;
  std::filesystem::create_directories(dir);
  write_text(dir + "/manifest.json", "{}");
}

const char* kMetrics =
    "{\"step\": 0, \"val_loss\": 6.5}\n"
    "{\"step\": 1, \"loss\": 6.25, \"lr\": 0.001, \"grad_norm\": 1, \"step_ms\": 100, "
    "\"tokens_per_s\": 900, \"mfu\": 0.1, \"peak_mem_bytes\": 1}\n"
    "{\"step\": 2, \"loss\": 5.5, \"lr\": 0.001, \"grad_norm\": 1, \"step_ms\": 250, "
    "\"tokens_per_s\": 1200, \"mfu\": 0.1, \"peak_mem_bytes\": 1}\n"
    "{\"step\": 3, \"loss\": 4.123456789, \"lr\": 0.001, \"grad_norm\": 1, \"step_ms\": 150, "
    "\"tokens_per_s\": 1000, \"mfu\": 0.1, \"peak_mem_bytes\": 1}\n"
    "{\"step\": 3, \"val_loss\": 4.75, \"val_top1\": 0.125}\n"
    "{\"step\": 4, \"loss\": 4.0, \"lr\"";  // a torn last line, as a killed run leaves

}  // namespace

TEST_CASE("metrics: the last loss and evaluation, the median throughput, the time in steps") {
  sg::test::TempDir dir;
  write_text(dir / "metrics.jsonl", kMetrics);
  const PointMetrics m = read_point_metrics(dir.path());
  CHECK(m.last_step == 3);
  REQUIRE(m.train_loss);
  CHECK(*m.train_loss == 4.123456789);
  REQUIRE(m.val_loss);
  CHECK(*m.val_loss == 4.75);
  REQUIRE(m.val_metrics.size() == 1);
  CHECK(m.val_metrics[0].first == "val_top1");
  CHECK(m.val_metrics[0].second == 0.125);
  REQUIRE(m.throughput.size() == 1);
  CHECK(m.throughput[0].first == "tokens_per_s");
  CHECK(m.throughput[0].second == 1000);
  CHECK(m.train_s == doctest::Approx(0.5));

  const PointMetrics none = read_point_metrics(dir / "missing");
  CHECK(none.last_step == 0);
  CHECK_FALSE(none.train_loss);
}

TEST_CASE("point states: done from the checkpoint, failed and running from the status file") {
  sg::test::TempDir dir;
  SweepSpec sweep = parse_sweep_spec("dir: " + dir.path() +
                                         "\ngrid: {optim.lr: [1, 2, 3, 4]}\n"
                                         "set: {train.steps: 20}\n",
                                     "s.yaml");
  REQUIRE(sweep.points.size() == 4);
  const auto& p = sweep.points;
  // 0: finished. 1: failed. 2: checkpointed half way, then killed. 3: never started.
  fake_checkpoint(p[0].run_dir, 10);
  fake_checkpoint(p[0].run_dir, 20);
  write_text(p[0].run_dir + "/metrics.jsonl", kMetrics);
  write_point_record(p[0].run_dir, {"done", 0, 12.5, "", 0});
  std::filesystem::create_directories(p[1].run_dir);
  write_point_record(p[1].run_dir, {"failed", 7, 1.0, "", 0});
  fake_checkpoint(p[2].run_dir, 10);
  // A sweep process on this host that no longer exists: not running, only pending.
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  write_point_record(p[2].run_dir, {"running", 0, 3.0, host, 999999999});

  std::vector<PointSummary> rows = summarize_sweep(sweep);
  CHECK(rows[0].state == PointState::done);
  CHECK(rows[0].checkpoint_step == 20);
  CHECK(rows[1].state == PointState::failed);
  CHECK(rows[1].exit_code == 7);
  CHECK(rows[2].state == PointState::pending);
  CHECK(rows[2].checkpoint_step == 10);
  CHECK(rows[3].state == PointState::pending);
  CHECK(summary_counts(rows) == "4 points: 1 done, 1 failed, 0 running, 2 pending");

  // The same record from a live process (this one) means running.
  write_point_record(p[2].run_dir, {"running", 0, 3.0, host, static_cast<long>(getpid())});
  CHECK(summarize_point(p[2]).state == PointState::running);

  rows = summarize_sweep(sweep);
  const std::string csv = summary_csv(sweep, rows);
  std::istringstream lines(csv);
  std::string header, row0, row1;
  std::getline(lines, header);
  std::getline(lines, row0);
  std::getline(lines, row1);
  CHECK(header ==
        "index,status,exit_code,step,steps,train_loss,val_loss,val_top1,tokens_per_s,train_s,"
        "wall_s,run_dir,overrides");
  CHECK(row0 ==
        "0,done,,3,20,4.123456789,4.75,0.125,1000,0.500,12.500," + p[0].run_dir + ",optim.lr=1");
  CHECK(row1 == "1,failed,7,0,20,,,,,0.000,1.000," + p[1].run_dir + ",optim.lr=2");

  const std::string table = summary_table(sweep, rows);
  CHECK(table.find("failed (7)") != std::string::npos);
  CHECK(table.find("4.1235") != std::string::npos);
  CHECK(table.find("running") != std::string::npos);
}

TEST_CASE("a wrong sweep_status.json names the file and the field, for sweep, summary, report") {
  sg::test::TempDir dir;
  const SweepSpec sweep = parse_sweep_spec(
      "dir: " + dir.path() + "\ngrid: {optim.lr: [1]}\nset: {train.steps: 20}\n", "s.yaml");
  const SweepPoint& point = sweep.points.at(0);
  std::filesystem::create_directories(point.run_dir);
  const std::string status = point.run_dir + "/sweep_status.json";
  const std::string advice =
      "; delete it if no sweep is running this point (the sweep writes it again)";
  const auto error_for = [&](const std::string& text) {
    write_text(status, text);
    const std::string e = sg::test::error_of([&] { read_point_record(point.run_dir); });
    INFO(e);
    CHECK(e.rfind(status + ": ", 0) == 0);
    CHECK(e.size() > advice.size());
    CHECK(e.compare(e.size() - advice.size(), advice.size(), advice) == 0);
    CHECK(e.find('\n') == std::string::npos);
    CHECK(e.size() < 400);
    // The summary (sweep, --dry-run, --summary) reads it the same way.
    CHECK(sg::test::error_of([&] { summarize_point(point); }) == e);
    return e;
  };
  CHECK(error_for(R"({"state": "failed", "exit_code": "7"})")
            .find("field exit_code is \"7\" but must be an integer from 0 to 255") !=
        std::string::npos);
  CHECK(error_for(R"({"state": "failed", "exit_code": 300})").find("field exit_code is 300") !=
        std::string::npos);
  CHECK(error_for(R"({"state": 1})").find("field state is 1 but must be a string") !=
        std::string::npos);
  CHECK(error_for(R"({"state": "sleeping"})")
            .find("field state is \"sleeping\" but must be running, done, failed or "
                  "interrupted") != std::string::npos);
  CHECK(error_for(R"({"wall_s": "x"})").find("field wall_s is \"x\" but must be a number") !=
        std::string::npos);
  CHECK(error_for(R"({"wall_s": -1})").find("field wall_s is -1") != std::string::npos);
  CHECK(error_for(R"({"pid": 1e300})").find("field pid is 1e+300 but must be an integer") !=
        std::string::npos);
  CHECK(error_for(R"({"host": 5})").find("field host is 5 but must be a string") !=
        std::string::npos);
  CHECK(error_for(R"([1, 2])").find("the top level is [1,2] but must be a JSON object") !=
        std::string::npos);
  CHECK(error_for("{\"host\": " + std::string(100000, '[') + std::string(100000, ']') + "}")
            .find("nested deeper than 64 levels (at byte 72)") != std::string::npos);
  CHECK(error_for(R"({"state": ")" + std::string(5000, 's') + "\"}")
            .find("sss\xE2\x80\xA6 but must be running") != std::string::npos);

  write_text(status, R"({"state": "runn)");  // a torn write: as if there were none
  CHECK_FALSE(read_point_record(point.run_dir).has_value());
  write_point_record(point.run_dir, {"failed", 7, 1.5, "", 0});  // what the sweep writes: read
  const auto record = read_point_record(point.run_dir);
  REQUIRE(record.has_value());
  CHECK(record->exit_code == 7);
  CHECK(record->wall_s == 1.5);
  CHECK(summarize_point(point).state == PointState::failed);
}

TEST_CASE("CSV fields holding commas or quotes are quoted") {
  sg::test::TempDir dir;
  const SweepSpec sweep = parse_sweep_spec(
      "dir: " + dir.path() + "\npoints: [{optim.betas: [0.9, 0.99], optim.lr: 1}]\n", "s.yaml");
  const std::string csv = summary_csv(sweep, summarize_sweep(sweep));
  CHECK(csv.find(",\"optim.betas=[0.9,0.99] optim.lr=1\"\n") != std::string::npos);
}

TEST_CASE("files are replaced whole") {
  sg::test::TempDir dir;
  write_file_atomically(dir / "a.csv", "one\n");
  write_file_atomically(dir / "a.csv", "two\n");
  CHECK(read_text(dir / "a.csv") == "two\n");
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()),
                      std::filesystem::directory_iterator()) == 1);
  CHECK_THROWS_AS(write_file_atomically(dir / "no/such/dir.csv", "x"), RunError);
}

TEST_CASE("the sbatch script: one array task per point, signals passed on, requeued") {
  const SweepSpec sweep = parse_sweep_spec(
      "name: lr\ndir: out\ngrid: {optim.lr: [1, 2, 3]}\nslurm: {partition: gpu, ntasks: 2}\n",
      "s.yaml");
  SlurmScriptOptions options;
  options.max_parallel = 2;
  options.sbatch_args = {"--gres=gpu:2"};
  options.executable = "/opt/sg/singularity";
  options.sweep_file = "/home/me/it's.yaml";
  options.working_dir = "/home/me";
  const std::string script = sbatch_script(sweep, options);
  CHECK(script.rfind("#!/bin/bash\n", 0) == 0);
  for (const char* line :
       {"#SBATCH --job-name=lr\n", "#SBATCH --array=0-2%2\n",
        "#SBATCH --output=/home/me/out/logs/%A_%a.out\n", "#SBATCH --chdir=/home/me\n",
        "#SBATCH --requeue\n", "#SBATCH --open-mode=append\n", "#SBATCH --signal=B:USR1@120\n",
        "#SBATCH --partition=gpu\n", "#SBATCH --ntasks=2\n", "#SBATCH --gres=gpu:2\n",
        "'/opt/sg/singularity' sweep '/home/me/it'\\''s.yaml' --index \"$SLURM_ARRAY_TASK_ID\" &\n",
        "trap 'forward USR1' USR1\n", "trap 'forward TERM' TERM\n",
        "scontrol requeue \"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}\"\n"}) {
    CHECK_MESSAGE(script.find(line) != std::string::npos, line);
  }
  CHECK(sbatch_script_path(sweep, options) == "/home/me/out/sweep.sbatch");
  options.sbatch_args = {"partition=gpu"};
  CHECK_THROWS_AS(sbatch_script(sweep, options), SpecError);
}
