#pragma once
// The job spec (docs/architecture.md, "The job spec") as typed structs with their defaults. Parsed
// and validated once by load_job_spec(); everything downstream trusts these values.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/model_config.h"
#include "config/spec_enums.h"

namespace sg {

// model.arch picks the family; its own keys (model.n_layer, model.depth, ...) live in that
// family's config struct (src/model/<family>_config.h), reached through config() or as<Config>().
// A spec holds one config per registered family, each with its defaults until set, so switching
// model.arch (an override, a sweep) starts from that family's defaults.
struct ModelSpec {
  std::string arch = "gpt2";
  // Weights to start from when there is no checkpoint to resume (fresh optimizer, step 0): a
  // Hugging Face directory, a torchvision .safetensors state dict, or one of our checkpoints.
  // Empty: the family's initialisation.
  std::string init_from;

  ModelSpec();
  ModelSpec(const ModelSpec& other);
  ModelSpec& operator=(const ModelSpec& other);
  ModelSpec(ModelSpec&&) noexcept;
  ModelSpec& operator=(ModelSpec&&) noexcept;
  ~ModelSpec();

  // The section of model.arch's family; SpecError naming the known families for another arch.
  const ModelConfig& config() const;
  // A family's own section, whatever model.arch says (its keys' accessors use this).
  template <typename Config>
  Config& as() {
    return static_cast<Config&>(config_of(Config::kArch));
  }
  template <typename Config>
  const Config& as() const {
    return static_cast<const Config&>(config_of(Config::kArch));
  }

 private:
  ModelConfig& config_of(std::string_view arch) const;
  std::vector<std::unique_ptr<ModelConfig>> configs_;  // one per registered family, in its order
};

struct DataSpec {
  DatasetKind dataset = DatasetKind::Synthetic;
  std::string train;                  // glob of llm.c token shards (not for synthetic)
  std::string val;                    // glob of validation shards (not for synthetic)
  // imagenet: a tree (train/<wnid>/*.JPEG, val/) or the index.json `prepare imagenet` wrote
  std::string root;
  int workers = 0;                    // image decoding threads; 0 = auto
  int64_t synthetic_images = 10000;   // synthetic images per epoch (resnet)
  // synthetic: a random Markov chain over the model's vocabulary, generated from the seed.
  int synthetic_order = 1;            // tokens of context the next-token law depends on
  int synthetic_branching = 4;        // successors with non-negligible probability per state
  int64_t synthetic_train_tokens = 1 << 20;
  int64_t synthetic_val_tokens = 1 << 16;
};

struct OptimSpec {
  OptimizerKind name = OptimizerKind::AdamW;
  double lr = 6.0e-4;
  double min_lr = 6.0e-5;
  int warmup_steps = 700;
  LrDecay decay = LrDecay::Cosine;
  int decay_every = 0;             // step decay: multiply by decay_gamma every this many steps
  double decay_gamma = 0.1;
  std::array<double, 2> betas{0.9, 0.95};  // adamw
  double eps = 1e-8;                       // adamw
  double momentum = 0.9;                   // sgd
  bool nesterov = false;                   // sgd
  // muon: the hidden layers' 2-D weights take Muon (orthogonalised momentum), everything else
  // AdamW with lr, betas and eps above (optim/muon.h).
  double muon_lr = 0.02;        // the matrices' peak learning rate, scheduled as lr
  double muon_momentum = 0.95;
  bool muon_nesterov = true;
  int muon_ns_steps = 5;        // Newton-Schulz iterations
  double weight_decay = 0.1;       // on the tensors the model marks (weights, not norms or biases)
  double grad_clip = 1.0;          // 0 disables clipping
};

struct TrainSpec {
  int steps = 10000;
  int global_batch = 512;          // sequences per optimizer step
  int micro_batch = 8;             // sequences per replica per micro-step
  int seq_len = 0;                 // 0 = the model's context
  Precision precision = Precision::FP32;  // fp16 on CUDA only
  double loss_scale = 0;           // fp16: the first dynamic loss scale (0 = 65536)
  Recompute recompute = Recompute::None;
  bool deterministic = false;
  // Wall-clock limit of one run ("" = none; "3600", "45m", "2h", "HH:MM:SS", "D-HH:MM:SS"):
  // the run checkpoints and exits 3 before a step would cross it; a resume goes on.
  std::string time_limit;
  // Steps in a row whose loss or gradients were not finite (each skipped, weights untouched)
  // before the run stops with an error naming the last good checkpoint.
  int max_skipped_steps = 5;
};

struct EvalSpec {
  int every = 250;   // steps between evaluations; 0 = only at the end
  int steps = 20;    // validation batches per evaluation
};

struct ParallelSpec {
  int data = 1;
  int tensor = 1;
  int pipeline = 1;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  int zero = 0;                   // 0 | 1 | 2
};

struct DevicesSpec {
  BackendKind backend = BackendKind::Cpu;
  int processes = 1;
  int threads = 0;              // 0 = auto (cores / processes on the node)
  double peak_tflops = 0;       // per device, for MFU; 0 = measured/assumed by the backend
  bool share_gpus = false;      // cuda: several processes per GPU, talking MPI through the host
};

struct CheckpointSpec {
  int every = 1000;             // 0 = only at the end
  int keep = 3;                 // newest checkpoints kept; 0 = keep all
  std::string resume = "auto";  // auto | never | PATH
};

struct LogSpec {
  std::string dir;  // default runs/<name>
  int every = 1;    // steps between log lines
  bool tensorboard = false;  // rank 0 also writes TensorBoard event files to <dir>/tb/
};

struct JobSpec {
  std::string name = "job";
  uint64_t seed = 1337;
  ModelSpec model;
  DataSpec data;
  OptimSpec optim;
  TrainSpec train;
  EvalSpec eval;
  ParallelSpec parallel;
  DevicesSpec devices;
  CheckpointSpec checkpoint;
  LogSpec log;

  std::string source;  // file the spec came from ("<embedded>" for built-in jobs)

  // Tokens per sequence: train.seq_len, or the model's context (0 for a model of images).
  int seq_len() const { return train.seq_len > 0 ? train.seq_len : model.config().data().context; }
  // Micro-steps each replica runs per optimizer step.
  int grad_accum_steps() const { return global_batch_per_replica() / train.micro_batch; }
  int global_batch_per_replica() const { return train.global_batch / parallel.data; }
  // Vocabulary padded to a multiple of 128 so GEMMs stay aligned and tensor parallelism divides.
  int padded_vocab() const { return (model.config().data().vocab + 127) / 128 * 128; }
};

}  // namespace sg
