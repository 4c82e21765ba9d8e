// libFuzzer target: reading a run's metrics.jsonl back (docs/faults.md "Fuzzing"): `report` and
// the sweep summary (src/cli/sweep_summary.cpp read_metrics_lines, read_point_metrics), and a
// resumed run trimming the lines past its checkpoint (src/train/metrics_log.cpp MetricsLog).
// Input: the file's bytes. Contract: torn or odd lines are skipped, never a crash; what the
// resume keeps is the file's well-formed lines up to the resumed step, each of them a line.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cli/sweep_summary.h"
#include "fuzz_files.h"
#include "train/metrics_log.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      sg::fuzz::write_scratch_file("run/metrics.jsonl", sg::fuzz::as_text(data, size));
  const std::string run_dir = sg::fuzz::scratch_dir() + "/run";
  const auto lines = sg::read_metrics_lines(run_dir);
  for (const auto& line : lines) (void)line.is_eval();
  const sg::PointMetrics metrics = sg::read_point_metrics(run_dir);
  sg::fuzz::note(std::to_string(lines.size()) + " lines read, last step " +
                 std::to_string(metrics.last_step));
  try {
    const int64_t resume_step = 10;  // the seeds' steps run on both sides of it
    sg::MetricsLog log(run_dir, resume_step, 20);
  } catch (const sg::RunError& e) {
    sg::fuzz::contract_broken(std::string("resuming metrics.jsonl failed: ") + e.what());
  }
  for (const auto& line : sg::read_metrics_lines(run_dir))
    if (line.step > 10) sg::fuzz::contract_broken("a line past the resumed step was kept");
  return 0;
}
