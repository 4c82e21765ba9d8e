#pragma once
// A sweep file (`singularity sweep SWEEP.yaml`): a base job plus a grid and/or a list of
// points, each point a set of job-spec overrides keyed exactly as `--set` takes them. Parsing
// expands the points and loads and validates every point's JobSpec, so a bad sweep fails with
// one SpecError before anything runs. Nothing here runs a job or touches a run directory.
//
//   base: job.yaml        # relative to the sweep file; omitted: the embedded quickstart job
//   name: lr-sweep        # default: the sweep file's stem
//   dir: runs/lr-sweep    # relative to the current directory; default runs/<name>
//   grid: {optim.lr: [1e-3, 3e-3], train.micro_batch: [4, 8]}
//   points: [{optim.lr: 1e-2}, {optim.lr: 3e-2, train.steps: 50}]
//   set: {train.steps: 100}             # applied to every point, before its own overrides
//   slurm: {partition: gpu, time: 4:00:00}  # extra #SBATCH --key=value lines for --slurm
#include <string>
#include <utility>
#include <vector>

#include "config/job_spec.h"

namespace sg {

struct SweepOverride {
  std::string key;       // "optim.lr"
  std::string value;     // as `--set KEY=VALUE` takes it: "1e-3", "[0.9,0.99]"
  std::string location;  // "sweep.yaml:4:12": where the value is written, for errors

  std::string text() const { return key + "=" + value; }
};

struct SweepPoint {
  int index = 0;
  std::vector<SweepOverride> overrides;  // the point's own: grid values, then a listed point's
  std::string run_dir;                   // <dir>/<index>-<slug of the overrides>
  std::string job_name;                  // <sweep name>-<index>
  JobSpec spec;  // base + set + overrides + name, log.dir, checkpoint.resume=auto; validated
};

struct SweepSpec {
  std::string path;  // the sweep file as given
  std::string base;  // the base job's path as the current directory sees it; "" = quickstart
  std::string name;
  std::string dir;                                         // where the point run directories go
  std::vector<SweepOverride> common;                       // set:
  std::vector<std::pair<std::string, std::string>> slurm;  // sbatch option name -> value
  std::vector<SweepPoint> points;  // the grid's product (first key slowest), then points:
};

// Reads the sweep file at `path`, then as parse_sweep_spec.
SweepSpec load_sweep_spec(const std::string& path);

// Parses a sweep file's text (`path` names it in errors and locates a relative base), expands
// the points and validates each point's job. Throws SpecError: "FILE:LINE:COL: message" for
// what is written in the file, "FILE: message" for the sweep as a whole.
SweepSpec parse_sweep_spec(const std::string& yaml_text, const std::string& path);

// The keys the sweep sets on every point itself; a sweep file may not set them.
bool is_sweep_controlled_key(const std::string& key);

// What follows `singularity train` to run `point`: the base job (when not the quickstart),
// then --set for each common override, each of the point's, and name, log.dir and
// checkpoint.resume=auto.
std::vector<std::string> train_arguments(const SweepSpec& sweep, const SweepPoint& point);

// "optim.lr=1e-3 train.micro_batch=4", or "(base job)" for a point without overrides.
std::string describe_overrides(const SweepPoint& point);

}  // namespace sg
