// `singularity export SOURCE DIR --format hf|torchvision`: a checkpoint's weights (or a job's
// starting weights) in the layout other tools load (model/weight_formats.h):
//   hf           GPT-2 or Llama -> DIR/config.json + DIR/model.safetensors for
//                transformers' GPT2LMHeadModel or LlamaForCausalLM.from_pretrained(DIR); with
//                --tokenizer, GPT-2's
//                encoder.json and vocab.bpe as vocab.json and merges.txt, for GPT2TokenizerFast;
//   torchvision  ResNet -> a state dict (DIR/model.safetensors, or DIR itself when it ends in
//                .safetensors) for torchvision.models.resnetNN().load_state_dict(strict=True).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "cli/checkpoint_lookup.h"
#include "cli/commands.h"
#include "config/load_job_spec.h"
#include "model/model_family.h"
#include "train/initial_weights.h"
#include "util/error.h"

namespace sg {
namespace fs = std::filesystem;
namespace {

// The whole model's weights and where they came from.
struct ExportSource {
  std::string description;  // "checkpoint runs/x/checkpoints/step_00000100 (step 100)"
  std::unique_ptr<ModelFamily> family;
  std::vector<float> params, buffers;
  int64_t step = 0;
  std::vector<fs::path> read_from;  // what export must not write into (or over)
};

bool is_job_file(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  return fs::is_regular_file(path) && (ext == ".yaml" || ext == ".yml");
}

// A job file: its starting weights (model.init_from, else its seeded initialisation), step 0.
ExportSource read_job_weights(const std::string& path, const std::vector<std::string>& sets) {
  const JobSpec spec = load_job_spec(path, sets);
  ExportSource out;
  out.family = make_model_family(spec);
  const ParameterLayout layout(out.family->description());
  out.params.assign(layout.total(), 0.0f);
  out.buffers.assign(std::max<size_t>(1, layout.buffer_total()), 0.0f);
  out.family->initialize(out.params.data(), out.buffers.data(), layout, spec.seed);
  out.read_from.push_back(path);
  if (!spec.model.init_from.empty()) out.read_from.push_back(spec.model.init_from);
  if (spec.model.init_from.empty()) {
    out.description =
        "the initial weights of job " + path + " (seed " + std::to_string(spec.seed) + ")";
  } else {
    out.description = load_initial_weights(spec.model.init_from, *out.family, layout,
                                           out.params.data(), out.buffers.data());
  }
  return out;
}

ExportSource read_checkpoint_weights(const std::string& path,
                                     const std::vector<std::string>& sets) {
  CheckpointModel loaded = load_checkpoint_model("", sets, path);
  ExportSource out;
  out.description = fmt::format("checkpoint {} (step {})", loaded.path, loaded.state.step);
  out.family = std::move(loaded.family);
  out.params = std::move(loaded.params);
  out.buffers = std::move(loaded.buffers);
  out.step = loaded.state.step;
  // The checkpoint, and the run directory it sits in (<run>/checkpoints/step_N).
  const fs::path checkpoint = fs::absolute(loaded.path).lexically_normal();
  out.read_from.push_back(checkpoint);
  if (checkpoint.parent_path().filename() == "checkpoints")
    out.read_from.push_back(checkpoint.parent_path().parent_path());
  return out;
}

fs::path resolved(const fs::path& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
  if (ec) p = fs::absolute(path).lexically_normal();
  if (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  return p;
}

// Written over, a checkpoint's own model.safetensors is lost, and a resume falls back to an
// older checkpoint without a word: no output inside (or equal to) anything being read.
void refuse_writing_into_source(const std::string& output, const ExportSource& source) {
  const fs::path out = resolved(output);
  for (const fs::path& read : source.read_from) {
    const fs::path inside = resolved(read);
    const auto [end, unused] = std::mismatch(inside.begin(), inside.end(), out.begin(), out.end());
    if (end != inside.end()) continue;
    throw SpecError(output + ": inside " + inside.string() +
                    ", which this export reads; write the export to a directory outside it (e.g. "
                    "exports/" + fs::path(output).filename().string() + ")");
  }
}

// The families that export `format`, by title ("ResNet"), or "" when none does.
std::string families_exporting(const std::string& format) {
  std::string titles;
  for (const ModelFamilyEntry& entry : model_family_entries())
    if (entry.weight_format == format) titles += (titles.empty() ? "" : " and ") + std::string(entry.title);
  return titles;
}

}  // namespace

int run_export_command(const ExportArguments& args) {
  ExportSource source = is_job_file(args.source) ? read_job_weights(args.source, args.sets)
                                                 : read_checkpoint_weights(args.source, args.sets);
  const std::string arch = source.family->name();
  const ModelFamilyEntry* entry = find_model_family(arch);
  const std::string own_format = entry ? std::string(entry->weight_format) : std::string();
  if (args.format != own_format) {
    const std::string exporters = families_exporting(args.format);
    std::string formats;
    for (const ModelFamilyEntry& e : model_family_entries())
      if (!e.weight_format.empty()) formats += (formats.empty() ? "" : " or ") + std::string(e.weight_format);
    if (exporters.empty())
      throw SpecError("--format " + args.format + " is not an export format; use " + formats);
    throw SpecError("--format " + args.format + " exports " + exporters + " models, but " +
                    args.source + " holds model.arch " + arch +
                    (own_format.empty() ? std::string(", which has no export format")
                                        : "; use --format " + own_format));
  }
  refuse_writing_into_source(args.dir, source);
  ExportOptions options;
  options.step = source.step;
  options.tokenizer_dir = args.tokenizer_dir;
  const std::string written = source.family->export_weights(
      args.dir, source.params.data(), source.buffers.data(), options);
  fmt::print("exported {} to {}\n", source.description, written);
  return 0;
}

}  // namespace sg
