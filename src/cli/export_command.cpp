// `singularity export SOURCE DIR --format hf|torchvision`: a checkpoint's weights (or a job's
// starting weights) in the layout other tools load (model/weight_formats.h):
//   hf           GPT-2 -> DIR/config.json + DIR/model.safetensors for
//                transformers.GPT2LMHeadModel.from_pretrained(DIR); with --tokenizer, GPT-2's
//                encoder.json and vocab.bpe as vocab.json and merges.txt, for GPT2TokenizerFast;
//   torchvision  ResNet -> a state dict (DIR/model.safetensors, or DIR itself when it ends in
//                .safetensors) for torchvision.models.resnetNN().load_state_dict(strict=True).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "cli/checkpoint_lookup.h"
#include "cli/commands.h"
#include "config/load_job_spec.h"
#include "data/file_io.h"
#include "model/gpt2_family.h"
#include "model/resnet_family.h"
#include "model/weight_formats.h"
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

void write_text(const std::string& path, const std::string& text) {
  AtomicFileWriter out(path);
  out.write(text.data(), text.size());
  out.commit();
}

void write_tensors(const std::string& path, const std::vector<ForeignTensor>& tensors) {
  std::vector<TensorRef> refs;
  for (const ForeignTensor& t : tensors) refs.push_back(t.ref());
  // transformers refuses a safetensors file whose metadata lacks format "pt".
  write_safetensors(path, refs, {{"format", "pt"}});
}

void make_directory(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw RunError(dir + ": cannot create the export directory: " + ec.message());
}

// GPT-2's tokenizer files under the names transformers' GPT2Tokenizer(Fast) reads.
void copy_tokenizer(const std::string& tokenizer_dir, const std::string& dir, int context) {
  const std::pair<const char*, const char*> files[] = {{"encoder.json", "vocab.json"},
                                                       {"vocab.bpe", "merges.txt"}};
  for (const auto& [ours, theirs] : files) {
    const fs::path from = fs::path(tokenizer_dir) / ours;
    if (!fs::is_regular_file(from))
      throw RunError(from.string() +
                     ": missing; --tokenizer needs GPT-2's encoder.json and "
                     "vocab.bpe");
    std::error_code ec;
    fs::copy_file(from, fs::path(dir) / theirs, fs::copy_options::overwrite_existing, ec);
    if (ec) throw RunError(from.string() + ": cannot copy to " + dir + ": " + ec.message());
  }
  const nlohmann::json config = {
      {"tokenizer_class", "GPT2Tokenizer"}, {"model_max_length", context},
      {"bos_token", "<|endoftext|>"},       {"eos_token", "<|endoftext|>"},
      {"unk_token", "<|endoftext|>"},       {"add_prefix_space", false}};
  write_text((fs::path(dir) / "tokenizer_config.json").string(), config.dump(2) + "\n");
}

}  // namespace

int run_export_command(const ExportArguments& args) {
  ExportSource source = is_job_file(args.source) ? read_job_weights(args.source, args.sets)
                                                 : read_checkpoint_weights(args.source, args.sets);
  const auto* gpt2 = dynamic_cast<const GPT2Family*>(source.family.get());
  const auto* resnet = dynamic_cast<const ResNetFamily*>(source.family.get());
  if (args.format == "hf") {
    if (gpt2 == nullptr)
      throw SpecError("--format hf exports GPT-2 models, but " + args.source +
                      " holds model.arch " + source.family->name() + "; use --format torchvision");
    refuse_writing_into_source(args.dir, source);
    make_directory(args.dir);
    const GPT2Shape& shape = gpt2->shape();
    write_text((fs::path(args.dir) / "config.json").string(), hf_gpt2_config(shape).dump(2) + "\n");
    write_tensors((fs::path(args.dir) / "model.safetensors").string(),
                  gpt2_to_hf_tensors(shape, source.params.data()));
    std::string extra;
    if (!args.tokenizer_dir.empty()) {
      copy_tokenizer(args.tokenizer_dir, args.dir, shape.context);
      extra = ", vocab.json, merges.txt, tokenizer_config.json";
    }
    fmt::print("exported {} to {} (Hugging Face GPT-2: config.json, model.safetensors{})\n",
               source.description, args.dir, extra);
    return 0;
  }
  if (args.format == "torchvision") {
    if (resnet == nullptr)
      throw SpecError("--format torchvision exports ResNet models, but " + args.source +
                      " holds model.arch " + source.family->name() + "; use --format hf");
    if (!args.tokenizer_dir.empty())
      throw SpecError("--tokenizer goes with --format hf (GPT-2) only");
    std::string path = args.dir;
    refuse_writing_into_source(path, source);
    if (fs::path(path).extension() != ".safetensors") {
      make_directory(path);
      path = (fs::path(path) / "model.safetensors").string();
    } else if (fs::path(path).has_parent_path()) {
      make_directory(fs::path(path).parent_path().string());
    }
    write_tensors(path, resnet_to_torchvision(source.family->description(), source.params.data(),
                                              source.buffers.data(), source.step));
    fmt::print("exported {} to {} (torchvision ResNet-{} state dict)\n", source.description, path,
               resnet->shape().depth);
    return 0;
  }
  throw SpecError("--format " + args.format + " is not an export format; use hf or torchvision");
}

}  // namespace sg
