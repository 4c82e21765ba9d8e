#pragma once
// A model family (docs/architecture.md, "Tensors, models and optimizers"): everything the trainer,
// the pipeline runner, the optimizer, ZeRO, checkpoints, `plan` and `eval` need to know about a
// model, behind one interface, so none of them names a model. GPT-2 (gpt2_family.h), Llama
// (llama_family.h) and ResNet (resnet_family.h) implement it; make_model_family (model_registry.cpp) picks one by model.arch.
//
// A family describes the whole model as a plain value (tensors, blocks, costs; see
// parameter_layout.h), initialises any shard of it, builds the module of one pipeline stage on
// a backend, and states the batch it consumes, its FLOPs and its activation memory.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/spec_enums.h"
#include "tensor/dtype.h"
#include "tensor/micro_batch.h"
#include "model/parameter_layout.h"
#include "model/text_decoder.h"
#include "util/error.h"

namespace sg {

class Backend;
class Communicator;

// What `export` asks of a family's export_weights besides the weights.
struct ExportOptions {
  int64_t step = 0;           // the optimizer step the weights come from
  std::string tokenizer_dir;  // a tokenizer to ship beside a text model's weights ("" = none)
};
class TensorGroup;
struct JobSpec;

// How one forward pass runs.
struct ForwardOptions {
  bool training = true;         // batch statistics (batch norm); false: running statistics
  bool update_buffers = false;  // the running statistics take this micro-batch
  float fused_dloss = 0.0f;     // != 0: the loss gradient is computed in the forward pass
};

// Called with a range [begin, end) of the gradient buffer as soon as backward has finished it
// (data parallelism starts reducing it there).
using OnReady = std::function<void(size_t, size_t)>;

// One pipeline stage of the model on one process: its blocks, with this tensor rank's part of
// each, holding the activations of `slots` micro-batches in flight. Parameters, gradients and
// buffers are flat buffers owned by the caller (laid out by the ParameterLayout it was built
// for); activations are owned here and sized once.
class StageModel {
 public:
  virtual ~StageModel() = default;

  // Forward of the micro-batch in `slot`. A stage other than the first reads its input
  // (input_floats()) from stage_input(slot), which the caller fills. Returns the mean loss of the micro-batch on the
  // last stage, 0 elsewhere. With options.fused_dloss != 0 the loss gradient for that dloss is
  // computed in the same pass; backward must then be called with the same dloss.
  virtual float forward(int slot, const float* params, float* buffers, const MicroBatch& batch,
                        const ForwardOptions& options) = 0;
  // Backward of the micro-batch in `slot` (its forward had options.training). Adds to grads (+=)
  // the gradient of dloss * sum(per-sample losses). A stage other than the last first needs the
  // gradient of its output in output_grad(); afterwards input_grad() holds the gradient of its
  // input. on_ready, when given, is called for each range of grads as it becomes final.
  virtual void backward(int slot, float* grads, const float* params, const MicroBatch& batch,
                        float dloss, const OnReady& on_ready) = 0;
  // Called before the forwards that use params whenever params may have changed since the last
  // call (PipelineRunner: at the start of each train() and forward_only(), over which params
  // stay put). A stage whose products multiply a working copy of the weights in another type
  // (GPT-2's bf16 copy, docs/bf16.md) makes it here: one cast a step, not one per product.
  virtual void prepare_weights(const float* params) { (void)params; }

  // What crosses the stage's boundaries per micro-batch: its input (from the previous stage; its
  // gradient goes back) and its output (to the next stage; its gradient comes back).
  virtual size_t input_floats() const = 0;
  virtual size_t output_floats() const = 0;
  virtual float* stage_input(int slot) = 0;
  virtual const float* stage_output(int slot) const = 0;
  virtual float* output_grad() = 0;
  virtual const float* input_grad() const = 0;

  // Adds the family's evaluation counts (metric_names()) of the last forward of `slot`
  // (last stage only) to sums.
  virtual void add_metrics(int slot, const MicroBatch& batch, double* sums) {
    (void)slot, (void)batch, (void)sums;
  }
};

// How a family's stages keep activations: the backend they run on (its attention keeps
// different state), what they recompute and the type they store them in. Set from the job (make_model_family); `plan` and
// the run then size activations alike.
struct ActivationPolicy {
  BackendKind backend = BackendKind::Cpu;
  Recompute recompute = Recompute::None;
  DType storage = DType::F32;  // activation_dtype_for(backend, train.precision)
};

// What a stage is built with at run time.
struct StageContext {
  Backend* backend = nullptr;
  int micro_batch = 1;                     // samples per micro-batch
  int slots = 1;                           // micro-batches in flight
  TensorGroup* tensor_group = nullptr;     // tensor-split layouts
  Communicator* replica_group = nullptr;   // synchronised batch statistics over the replicas
};

class ModelFamily {
 public:
  virtual ~ModelFamily() = default;
  virtual std::string name() const = 0;  // "gpt2", "resnet": model.arch
  // The manifest's record of the model: {"family": name(), shape keys...}. A checkpoint loads
  // only into a job whose record is equal.
  virtual nlohmann::json shape_record() const = 0;
  // One line for logs and `plan`: "GPT-2 (12 layers, 12 heads, 768 wide)".
  virtual std::string summary() const = 0;
  virtual const ModelDescription& description() const = 0;
  virtual int64_t parameter_count() const = 0;  // as users quote it (GPT-2: real vocabulary)

  // SpecError saying why when the model cannot run split T-way by tensor and S-way by pipeline.
  virtual void check_split(int tensors, int stages) const = 0;
  // Fills this shard's parameters and buffers; deterministic in seed, and every shard gets
  // exactly its slice of the one-process values.
  virtual void initialize(float* params, float* buffers, const ParameterLayout& layout,
                          uint64_t seed) const = 0;

  // The batch of `micro_batch` samples one forward consumes.
  virtual std::vector<BatchField> batch_fields(int micro_batch) const = 0;
  virtual std::string sample_unit() const = 0;  // "tokens", "images": what throughput counts
  virtual int units_per_sample() const = 0;     // tokens per sequence, or 1

  // Training FLOPs (forward + backward) of one sample, as MFU counts them.
  virtual double training_flops_per_sample() const = 0;
  // Bytes of activations of a stage with `slots` micro-batches in flight (with backward
  // scratch); the stage allocates exactly this, so `plan` and the run agree.
  virtual size_t activation_bytes(const ParameterLayout& layout, int micro_batch,
                                  int slots) const = 0;
  // Bytes of a stage's working copy of its weights (prepare_weights), allocated once per stage;
  // 0 where the products multiply the fp32 parameters themselves.
  virtual size_t weight_copy_bytes(const ParameterLayout& layout) const {
    (void)layout;
    return 0;
  }

  // Batch statistics are synchronised over the data-parallel replicas (batch norm's sync_bn):
  // a process then runs its replicas together as one batch, so the statistics cover the same
  // samples whatever the number of processes.
  virtual bool synchronized_statistics() const { return false; }

  // Evaluation counts beyond the loss (add_metrics sums them; divided by samples), e.g.
  // {"val_top1", "val_top5"}.
  virtual std::vector<std::string> metric_names() const { return {}; }
  // One line for `eval`: the loss and what the family reads from it.
  virtual std::string evaluation_summary(double loss, const std::vector<double>& metrics) const = 0;

  virtual std::unique_ptr<StageModel> make_stage(const ParameterLayout& layout,
                                                 const StageContext& context) const = 0;

  // --- Weights in the family's ecosystem's layout (README "Weights in and out") and text
  // generation. Each works on the whole (unsharded) model's buffers; the defaults refuse.

  // Writes params and buffers at `path` in the family's format (its registry row's
  // weight_format); returns what it wrote, for the command's line ("DIR (Hugging Face GPT-2:
  // config.json, model.safetensors)"). SpecError where options do not apply to it.
  virtual std::string export_weights(const std::string& path, const float* params,
                                     const float* buffers, const ExportOptions& options) const {
    (void)path, (void)params, (void)buffers, (void)options;
    throw SpecError("model.arch " + name() + " has no export format");
  }
  // Reads model.init_from's foreign weights: a Hugging Face style directory (config.json +
  // model.safetensors, the config checked against the job) or a .safetensors file. Returns what
  // was read, for the log.
  virtual std::string import_weights(const std::string& path, bool directory, float* params,
                                     float* buffers) const {
    (void)directory, (void)params, (void)buffers;
    throw SpecError("model.init_from " + path + ": model.arch " + name() +
                    " reads no foreign weights; give one of our checkpoints");
  }
  // A decoder that generates text from `params` (whole model, kept by the caller), or nullptr
  // where the family does not generate text (`sample` says so).
  virtual std::unique_ptr<TextDecoder> make_decoder(const ParameterLayout& layout,
                                                    const float* params) const {
    (void)layout, (void)params;
    return nullptr;
  }

  // Where the family's stages run and what they recompute (default: the CPU, nothing).
  // SpecError when the family cannot recompute that way.
  virtual void set_activation_policy(const ActivationPolicy& policy) { policy_ = policy; }
  const ActivationPolicy& policy() const { return policy_; }
  // The type this family's stages store activations in under the policy: a family whose ops
  // take 16-bit activations (GPT-2, ResNet) follows policy().storage, others stay fp32.
  virtual DType activation_storage() const { return DType::F32; }

 private:
  ActivationPolicy policy_;
};

// The family of spec.model.arch, with the spec's model keys (model_registry.cpp).
std::unique_ptr<ModelFamily> make_model_family(const JobSpec& spec);
// A checkpoint's model record as written today: records from before model families (GPT-2
// only, no "family" key) gain their family.
nlohmann::json current_shape_record(nlohmann::json record);

}  // namespace sg
