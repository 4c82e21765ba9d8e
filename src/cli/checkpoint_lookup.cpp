#include "cli/checkpoint_lookup.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "checkpoint/checkpoint.h"
#include "config/load_job_spec.h"
#include "util/error.h"

namespace sg {

std::string resolve_checkpoint(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::exists(fs::path(path) / "manifest.json")) return path;
  std::vector<std::string> warnings;
  for (const std::string& dir : {path, path + "/checkpoints"}) {
    if (!fs::is_directory(dir)) continue;
    if (auto found = find_resume_checkpoint(dir, "auto", &warnings)) {
      for (const auto& w : warnings) fmt::print(stderr, "warning: {}\n", w);
      return *found;
    }
  }
  std::string why;
  for (const auto& w : warnings) why += "; " + w;
  // Not "delete": the path may be no checkpoint at all (/etc). Skipped ones say why after it.
  throw RunError(path + ": no intact checkpoint found: it is neither a checkpoint (a step_* "
                 "directory holding manifest.json) nor a run directory with an intact one in "
                 "checkpoints/; give one of those" + why);
}


CheckpointModel load_checkpoint_model(const std::string& job_path,
                                      const std::vector<std::string>& sets,
                                      const std::string& checkpoint) {
  CheckpointModel out;
  out.path = resolve_checkpoint(checkpoint);
  const LoadedCheckpoint loaded = load_checkpoint(out.path);  // read and checksummed once
  // Without a job file, the model is the one the checkpoint was written for.
  out.spec = job_path.empty()
                 ? parse_job_spec(loaded.job_yaml, out.path + "/manifest.json", sets)
                 : load_job_spec(job_path, sets);
  // One process runs the model: all cores, whatever devices.processes the job trains with.
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  out.family = make_model_family(out.spec);
  out.layout = std::make_unique<ParameterLayout>(out.family->description());
  out.params.assign(out.layout->total(), 0.0f);
  out.buffers.assign(std::max<size_t>(1, out.layout->buffer_total()), 0.0f);
  LoadTargets weights;  // no optimizer state: eval and sample need the weights only
  weights.params = out.params.data();
  weights.buffers = out.buffers.data();
  out.state = load_training_checkpoint(loaded, *out.family, *out.layout, weights);
  return out;
}

}  // namespace sg
