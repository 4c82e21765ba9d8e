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
  throw RunError(path + ": no intact checkpoint found (expected a step_* directory with a "
                 "manifest.json, or a run directory holding checkpoints/)" + why);
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
  const ModelSpec& m = out.spec.model;
  out.layout = std::make_unique<ParameterLayout>(
      GPT2Shape{m.n_layer, m.n_head, m.n_embd, m.context, m.vocab, out.spec.padded_vocab()});
  const size_t n = out.layout->total();
  out.params.assign(n, 0.0f);
  std::vector<float> moment_m(n), moment_v(n);  // read and checked, not needed
  out.state = load_training_checkpoint(loaded, *out.layout, out.params.data(), moment_m.data(),
                                       moment_v.data());
  return out;
}

}  // namespace sg
