#include "config/validate_job_spec.h"

#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <vector>

#include "config/duration.h"
#include "config/job_spec_keys.h"
#include "config/load_job_spec.h"
#include "config/spec_checks.h"
#include "util/error.h"

namespace sg {
namespace {

// The documented upper bounds of a job's sizes (docs/faults.md).
constexpr int64_t kMaxVocab = 1 << 24;
constexpr int64_t kMaxSyntheticTokens = int64_t{1} << 32;

class SpecChecker : private SpecChecks {
 public:
  SpecChecker(const JobSpec& spec, const KeyLocator& locate) : SpecChecks(locate), s_(spec) {}

  void check_all() {
    check_name();
    check_model();
    check_data();
    check_optim();
    check_train();
    check_eval_checkpoint_log();
    check_mesh();
    s_.model.config().validate_split(s_, *this);
    check_fold();
  }

 private:
  void check_name() {
    const std::string& name = s_.name;
    if (name.empty()) fail({"name"}, "name is empty; give the job a name (it names runs/<name>)");
    bool usable = name.size() <= 200 && name[0] != '.' && name[0] != '-';
    for (char c : name) {
      bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '.' || c == '_' || c == '-';
      usable = usable && allowed;
    }
    if (!usable)
      fail({"name"}, fmt::format("name '{}' is not usable as a directory name; use letters, digits, "
                                 "'.', '_' and '-', not starting with '.' or '-'",
                                 name));
  }

  // model.arch names a registered family; the family checks its own keys and how they meet
  // the other sections (model_config.h).
  void check_model() {
    if (!find_model_family(s_.model.arch)) {
      std::vector<std::string_view> names;
      for (const ModelFamilyEntry& entry : model_family_entries()) names.push_back(entry.arch);
      one_of("model.arch", s_.model.arch, names);
    }
    s_.model.config().validate(s_, *this);
  }

  void check_data() {
    const DataSpec& d = s_.data;
    at_least("data.workers", d.workers, 0);
    const ModelData model = s_.model.config().data();
    if (model.input == ModelInput::Images) {
      if (d.dataset != DatasetKind::ImageNet && d.dataset != DatasetKind::Synthetic)
        fail({"data.dataset", "model.arch"},
             fmt::format("data.dataset {} holds tokens but model.arch {} reads images; use "
                         "imagenet or synthetic",
                         d.dataset, s_.model.arch));
      if (d.dataset == DatasetKind::ImageNet && d.root.empty())
        fail({"data.root", "data.dataset"},
             "data.dataset imagenet needs data.root: an ILSVRC-2012 tree (train/, val/) or the "
             "directory `singularity prepare imagenet` wrote");
      at_least("data.synthetic_images", d.synthetic_images, 1);
      at_most("data.synthetic_images", d.synthetic_images, INT32_MAX, "a documented limit");
      return;
    }
    if (d.dataset == DatasetKind::ImageNet)
      fail({"data.dataset", "model.arch"},
           fmt::format("data.dataset imagenet holds images but model.arch {} reads tokens; use a "
                       "model of images ({}), or a token dataset",
                       s_.model.arch, image_model_list()));
    if (is_shard_dataset(d.dataset)) {
      if (model.vocab > 65536)
        fail({"model.vocab", "data.dataset"},
             fmt::format("model.vocab {} exceeds 65536, but {} shards store uint16 tokens; use a "
                         "vocabulary of at most 65536",
                         model.vocab, d.dataset));
      if (d.train.empty())
        fail({"data.train", "data.dataset"},
             fmt::format("data.dataset {} needs data.train, a glob of token shards "
                         "(e.g. data/{}/train_*.bin)",
                         d.dataset, d.dataset));
      if (d.val.empty())
        fail({"data.val", "data.dataset"},
             fmt::format("data.dataset {} needs data.val, a glob of token shards "
                         "(e.g. data/{}/val_*.bin)",
                         d.dataset, d.dataset));
      return;
    }
    at_least("data.synthetic_order", d.synthetic_order, 1);
    at_most("data.synthetic_order", d.synthetic_order, 64,
            "each token's law hashes the tokens before it");
    at_least("data.synthetic_branching", d.synthetic_branching, 1);
    at_most("model.vocab", model.vocab, 65536, "synthetic tokens are stored in 16 bits");
    at_most("data.synthetic_train_tokens", d.synthetic_train_tokens, kMaxSyntheticTokens,
            "synthetic tokens are generated into memory, 2 bytes each");
    at_most("data.synthetic_val_tokens", d.synthetic_val_tokens, kMaxSyntheticTokens,
            "synthetic tokens are generated into memory, 2 bytes each");
    if (d.synthetic_branching > model.vocab)
      fail({"data.synthetic_branching", "model.vocab"},
           fmt::format("data.synthetic_branching {} exceeds model.vocab {}; a state cannot have "
                       "more successors than there are tokens",
                       d.synthetic_branching, model.vocab));
    // One sequence needs seq_len inputs plus the next token as the last target.
    int64_t one_sequence = int64_t{s_.seq_len()} + 1;
    if (d.synthetic_train_tokens < one_sequence)
      fail({"data.synthetic_train_tokens"},
           fmt::format("data.synthetic_train_tokens {} is less than one sequence (seq_len {} + 1)",
                       d.synthetic_train_tokens, s_.seq_len()));
    if (d.synthetic_val_tokens < one_sequence)
      fail({"data.synthetic_val_tokens"},
           fmt::format("data.synthetic_val_tokens {} is less than one sequence (seq_len {} + 1)",
                       d.synthetic_val_tokens, s_.seq_len()));
  }

  void check_optim() {
    const OptimSpec& o = s_.optim;
    float_at_least("optim.lr", o.lr, 0, false);
    float_at_least("optim.min_lr", o.min_lr, 0, true);
    if (o.min_lr > o.lr)
      fail({"optim.min_lr", "optim.lr"},
           fmt::format("optim.min_lr {} exceeds optim.lr {}; need 0 <= min_lr <= lr", o.min_lr, o.lr));
    at_least("optim.warmup_steps", o.warmup_steps, 0);
    if (o.decay == LrDecay::Step && o.decay_every < 1)
      fail({"optim.decay_every", "optim.decay"},
           fmt::format("optim.decay step needs optim.decay_every >= 1 (steps between decays); "
                       "got {}",
                       o.decay_every));
    at_least("optim.decay_every", o.decay_every, 0);
    float_at_least("optim.decay_gamma", o.decay_gamma, 0, false);
    if (!(o.momentum >= 0 && o.momentum < 1))
      fail({"optim.momentum"}, fmt::format("optim.momentum must lie in [0, 1); got {}", o.momentum));
    for (double beta : o.betas)
      if (!(beta >= 0 && beta < 1))
        fail({"optim.betas"},
             fmt::format("optim.betas must lie in [0, 1); got [{}, {}]", o.betas[0], o.betas[1]));
    float_at_least("optim.eps", o.eps, 0, false);
    float_at_least("optim.weight_decay", o.weight_decay, 0, true);
    float_at_least("optim.grad_clip", o.grad_clip, 0, true);
    float_at_least("optim.muon_lr", o.muon_lr, 0, false);
    if (!(o.muon_momentum >= 0 && o.muon_momentum < 1))
      fail({"optim.muon_momentum"},
           fmt::format("optim.muon_momentum must lie in [0, 1); got {}", o.muon_momentum));
    at_least("optim.muon_ns_steps", o.muon_ns_steps, 1);
    at_most("optim.muon_ns_steps", o.muon_ns_steps, 99, "torch.optim.Muon's limit");
    // Muon's Newton-Schulz iteration runs on the host (optim/muon.h).
    if (o.name == OptimizerKind::Muon && s_.devices.backend != BackendKind::Cpu)
      fail({"optim.name", "devices.backend"},
           "optim.name muon runs on the CPU backend for now (its Newton-Schulz iteration is not "
           "on the GPU yet); use devices.backend: cpu, or optim.name: adamw");
  }

  void check_train() {
    const TrainSpec& t = s_.train;
    at_least("train.steps", t.steps, 1);
    at_least("train.global_batch", t.global_batch, 1);
    at_least("train.micro_batch", t.micro_batch, 1);
    at_least("train.seq_len", t.seq_len, 0);
    const ModelData model = s_.model.config().data();
    if (model.input == ModelInput::Tokens)
      at_most("train.micro_batch", t.micro_batch, INT32_MAX / s_.seq_len(),
              fmt::format("micro_batch x seq_len ({}) rows must fit a 32-bit kernel dimension",
                          s_.seq_len()));
    if (model.input == ModelInput::Tokens && t.seq_len > model.context)
      fail({"train.seq_len", "model.context"},
           fmt::format("train.seq_len {} exceeds model.context {}; use at most {} (or 0 for the "
                       "context length)",
                       t.seq_len, model.context, model.context));
    if (t.precision == Precision::FP16 && s_.devices.backend != BackendKind::Cuda)
      fail({"train.precision", "devices.backend"},
           "train.precision fp16 needs devices.backend cuda; the CPU backend computes in fp32 "
           "or bf16");
    if (t.loss_scale != 0) {
      int exponent = 0;
      const double mantissa = std::frexp(t.loss_scale, &exponent);
      if (t.precision != Precision::FP16)
        fail({"train.loss_scale", "train.precision"},
             "train.loss_scale is the fp16 loss scale; remove it, or set train.precision: fp16");
      else if (!(t.loss_scale >= 1) || mantissa != 0.5 || t.loss_scale > 0x1p100)
        fail({"train.loss_scale"},
             fmt::format("train.loss_scale {} must be a power of two from 1 to 2^100 (scaling "
                         "by one is exact), e.g. 65536",
                         t.loss_scale));
    }
    if (!t.time_limit.empty() && !parse_duration_seconds(t.time_limit))
      fail({"train.time_limit"},
           fmt::format("train.time_limit '{}' is not a duration; write seconds (3600), a unit "
                       "(90m, 2h, 1d) or Slurm's form (HH:MM:SS, D-HH:MM:SS)",
                       t.time_limit));
    at_least("train.max_skipped_steps", t.max_skipped_steps, 1);
    at_least("parallel.data", s_.parallel.data, 1);
    int64_t unit = int64_t{s_.parallel.data} * t.micro_batch;
    if (t.global_batch % unit != 0)
      fail({"train.global_batch", "train.micro_batch", "parallel.data"},
           fmt::format("train.global_batch {} is not divisible by parallel.data ({}) x "
                       "train.micro_batch ({}) = {}; use {}",
                       t.global_batch, s_.parallel.data, t.micro_batch, unit,
                       nearest_multiple(t.global_batch, unit)));
  }

  void check_eval_checkpoint_log() {
    at_least("eval.every", s_.eval.every, 0);
    at_least("eval.steps", s_.eval.steps, 1);
    at_least("checkpoint.every", s_.checkpoint.every, 0);
    at_least("checkpoint.keep", s_.checkpoint.keep, 0);
    if (s_.checkpoint.resume.empty())
      fail({"checkpoint.resume"},
           "checkpoint.resume is empty; use auto, never, or the path of a checkpoint directory");
    if (s_.log.dir.empty())
      fail({"log.dir"}, "log.dir is empty; set it, or leave it out for runs/<name>");
    at_least("log.every", s_.log.every, 1);
  }

  // The virtual mesh data x tensor x pipeline placed on devices.processes
  // (docs/architecture.md, "The virtual mesh").
  void check_mesh() {
    const ParallelSpec& p = s_.parallel;
    const DevicesSpec& dev = s_.devices;
    at_least("parallel.tensor", p.tensor, 1);
    at_least("parallel.pipeline", p.pipeline, 1);
    if (p.zero < 0 || p.zero > 2)
      fail({"parallel.zero"}, fmt::format("parallel.zero must be 0, 1 or 2; got {}", p.zero));
    at_least("devices.processes", dev.processes, 1);
    at_least("devices.threads", dev.threads, 0);
    float_at_least("devices.peak_tflops", dev.peak_tflops, 0, true);
    if (dev.share_gpus && dev.backend != BackendKind::Cuda)
      fail({"devices.share_gpus", "devices.backend"},
           "devices.share_gpus shares GPUs between processes and needs devices.backend cuda; "
           "remove it for the CPU backend");
  }

  // The mesh folded onto devices.processes (after the model's split was checked).
  void check_fold() {
    const ParallelSpec& p = s_.parallel;
    const DevicesSpec& dev = s_.devices;
    // Each process owns one (tensor, pipeline) coordinate ...
    int64_t model_parallel = int64_t{p.tensor} * p.pipeline;
    if (dev.processes % model_parallel != 0)
      fail({"devices.processes", "parallel.tensor", "parallel.pipeline"},
           fmt::format("devices.processes {} is not divisible by parallel.tensor ({}) x "
                       "parallel.pipeline ({}) = {}; use {}",
                       dev.processes, p.tensor, p.pipeline, model_parallel,
                       nearest_multiple(dev.processes, model_parallel)));
    // ... and the data-parallel replicas fold evenly onto the remaining processes.
    int64_t data_processes = dev.processes / model_parallel;
    if (p.data % data_processes != 0)
      fail({"parallel.data", "devices.processes"},
           fmt::format("parallel.data {} is not divisible by the {} data-parallel processes "
                       "(devices.processes {} / {}); use parallel.data {}",
                       p.data, data_processes, dev.processes, model_parallel,
                       nearest_multiple(p.data, data_processes)));
    // Deterministic mode sums replicas in a fixed binary tree whose subtrees are the processes'
    // blocks of replicas (src/parallel/deterministic_reduce.h).
    const auto power_of_two = [](int64_t x) { return x > 0 && (x & (x - 1)) == 0; };
    if (s_.train.deterministic &&
        (!power_of_two(data_processes) || !power_of_two(p.data / data_processes)))
      fail({"train.deterministic", "parallel.data", "devices.processes"},
           fmt::format("train.deterministic needs a power-of-two number of data-parallel "
                       "processes ({}) and of replicas per process ({}); change parallel.data "
                       "or devices.processes",
                       data_processes, p.data / data_processes));
  }

  // "resnet": the families whose models read images, for messages.
  static std::string image_model_list() {
    std::string list;
    for (const ModelFamilyEntry& entry : model_family_entries())
      if (entry.make_config()->data().input == ModelInput::Images)
        list += (list.empty() ? "" : ", ") + std::string(entry.arch);
    return list;
  }

  const JobSpec& s_;
};

}  // namespace

void validate_job_spec(const JobSpec& spec, const KeyLocator& locate) {
  SpecChecker(spec, locate).check_all();
}

void validate_job_spec(const JobSpec& spec) {
  std::string source = spec.source.empty() ? "job spec" : spec.source;
  validate_job_spec(spec, [&](std::initializer_list<std::string_view>) { return source; });
}

void fill_job_spec_defaults(JobSpec& spec) {
  if (spec.log.dir.empty()) spec.log.dir = "runs/" + spec.name;
}

}  // namespace sg
