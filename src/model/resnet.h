#pragma once
// One pipeline stage of a ResNet (StageModel, model_family.h) on a backend's ops: its stem (on
// the first stage), its residual blocks, and the average pool, fc and label-smoothed loss (on
// the last). Activations are NHWC, allocated once for `slots` micro-batches in flight; the
// images arrive NCHW (the batch field) and are transposed on entry.
//
// Batch norm normalises with the micro-batch's statistics in training (oneDNN's fused pair) or,
// with model.sync_bn, with statistics summed over the replica group (the split batch norm, its
// sums all-reduced between the calls); with the running statistics in evaluation. The running
// statistics take a micro-batch when ForwardOptions::update_buffers says so.
//
// Activations (the images after their transpose, convolution and batch-norm outputs, the max
// pool's) are stored in the backend's activation type: bf16 under train.precision bf16
// (docs/bf16.md), as is the batch norm's input gradient (the convolution backward's dout). The
// gradients of unit and block outputs, which residual blocks sum, stay fp32, as do the pooled
// features, logits and everything per channel. Stages exchange fp32: a bf16 stage converts what
// it receives and what it sends (exactly, both ways for bf16 values).
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/model_family.h"
#include "model/resnet_family.h"

namespace sg {

// A convolution + batch norm unit resolved for one stage: shapes at the micro-batch, tensor
// offsets (params: weight, gamma, beta; buffers: running mean and variance).
struct ResNetUnit {
  Conv2dShape conv;
  size_t weight = 0, gamma = 0, beta = 0, running_mean = 0, running_var = 0;
  bool relu = true;
  long rows() const { return static_cast<long>(conv.N) * conv.P() * conv.Q(); }  // BN's M
};
struct ResNetStageBlock {
  std::vector<ResNetUnit> units;
  bool downsample = false;
  ResNetUnit shortcut;
  std::pair<size_t, size_t> tensors;  // range of the layout's tensors, for on_ready
};
// What one stage runs for micro-batches of B images.
struct ResNetStagePlan {
  int B = 1;
  bool first = true, last = true;
  ResNetUnit stem;
  Pool2dShape pool;
  std::vector<ResNetStageBlock> blocks;
  size_t fc_weight = 0, fc_bias = 0;
  int features = 0, classes = 0, final_hw = 0, image_size = 0;
  size_t input_floats = 0, output_floats = 0, largest = 0;  // largest: any activation here
};
ResNetStagePlan plan_resnet_stage(const ResNetFamily& family, const ParameterLayout& layout,
                                  int B);

// Floats of activation memory of a stage with `slots` micro-batches of B images in flight,
// with the backward scratch: what ResNet allocates and `plan` reports.
size_t resnet_activation_floats(const ResNetFamily& family, const ParameterLayout& layout, int B,
                                int slots);
// Bytes of a stage's bf16 filters (the convolutions' working copy, made once a step) for
// activations stored as `storage`: laid out as the stage's parameters, so 2 bytes a parameter
// in bf16, none in fp32.
size_t resnet_weight_copy_bytes(const ParameterLayout& layout, DType storage);

class ResNet final : public StageModel {
 public:
  ResNet(const ResNetFamily& family, const ParameterLayout& layout, const StageContext& context);

  float forward(int slot, const float* params, float* buffers, const MicroBatch& batch,
                const ForwardOptions& options) override;
  void backward(int slot, float* grads, const float* params, const MicroBatch& batch, float dloss,
                const OnReady& on_ready) override;
  size_t input_floats() const override { return plan_.input_floats; }
  size_t output_floats() const override { return plan_.output_floats; }
  float* stage_input(int slot) override { return slots_[static_cast<size_t>(slot)].received; }
  const float* stage_output(int slot) const override;
  float* output_grad() override { return output_grad_; }
  const float* input_grad() const override { return input_grad_; }
  void add_metrics(int slot, const MicroBatch& batch, double* sums) override;
  // With bf16 activations: the convolutions' bf16 filters (Backend::conv2d_filter), made here
  // once a step; a forward on other parameters is refused.
  void prepare_weights(const float* params) override;

  const float* logits(int slot) const { return slots_[static_cast<size_t>(slot)].logits; }

  struct UnitActs {
    Act conv, out;
    float *mean = nullptr, *var = nullptr;
  };

 private:
  struct Slot {
    Act input;  // NHWC: the transposed images on the first stage, else the stage's input
    float* received = nullptr;  // a later stage's input as received: input itself in fp32
    float* sent = nullptr;      // an earlier stage's output as sent: fp32 (itself in fp32)
    UnitActs stem;
    Act pooled;
    int32_t* argmax = nullptr;
    std::vector<std::vector<UnitActs>> blocks;  // per block: its units, then the shortcut
    float *features = nullptr, *logits = nullptr, *losses = nullptr;
    float fused_dloss = 0.0f;
    bool trained = false;  // the last forward ran in training mode (backward may follow)
  };

  using Unit = ResNetUnit;
  // The weight a unit's convolution takes: its bf16 working copy where there is one, else the
  // fp32 master in params.
  ConstAct filter(const Unit& u, const float* params) const;
  template <class F>
  void for_each_unit(F f) const;
  // Places one slot's activations (and, once, the scratch) from `arena` on; returns the floats
  // used. With a null arena only counts.
  size_t lay_out(float* arena, int slots);
  // The last block's output of a slot (the stage's output before any conversion).
  Act block_output(const Slot& s) const;
  // With a `residual` (a block's last unit): out = max(0, batch norm + residual).
  void unit_forward(const Unit& u, UnitActs& a, ConstAct x, const float* params,
                    float* buffers, const ForwardOptions& options, ConstAct residual = nullptr);
  // A residual block from its input x; its output is the last unit's `out`.
  void block_forward(const ResNetStageBlock& block, std::vector<UnitActs>& acts, ConstAct x,
                     const float* params, float* buffers, const ForwardOptions& options);
  // A residual block's input gradient not yet complete: dy += g and the ReLU before the block
  // (whose output is `out`) still to be applied (Backend::add_relu_backward); the next batch
  // norm back does it in its first pass.
  struct PendingAddRelu {
    const float* g;  // null: nothing pending
    ConstAct out;
  };
  // dy: the gradient of the unit's output (may be modified: the ReLU's mask applied in place,
  // `pending` completed in place); dx (may be null): the gradient of its input, written with =.
  void unit_backward(const Unit& u, const UnitActs& a, float* dy, ConstAct x, float* dx,
                     float* grads, const float* params,
                     PendingAddRelu pending = {nullptr, nullptr});
  void batchnorm_train(const Unit& u, UnitActs& a, const float* params);
  void batchnorm_train_backward(const Unit& u, const UnitActs& a, const float* dy, Act dconv,
                                float* grads, const float* params);
  void reduce_over_replicas(double* sums, size_t n);
  // Training runs the unit's batch norm and ReLU as one op (Backend::batchnorm_relu_*) where
  // the unit has a ReLU and its statistics are its own (not synchronised over replicas).
  bool fused_relu(const Unit& u) const { return u.relu && !sync_bn_; }

  friend size_t resnet_activation_floats(const ResNetFamily&, const ParameterLayout&, int, int);
  ResNet(const ResNetFamily& family, const ParameterLayout& layout, int B,
         DType storage);  // plan only

  const ResNetFamily& family_;
  const ParameterLayout& layout_;
  Backend* backend_ = nullptr;
  Communicator* replica_group_ = nullptr;
  ResNetStagePlan plan_;
  Recompute recompute_ = Recompute::None;
  bool sync_bn_ = false;
  DType storage_ = DType::F32;  // the activations' type
  Buffer arena_;
  std::vector<Slot> slots_;
  float *grad_a_ = nullptr, *grad_b_ = nullptr, *grad_c_ = nullptr, *grad_d_ = nullptr,
        *dfeatures_ = nullptr;
  Act dconv_;  // the batch norm's input gradient, in the activations' type
  Buffer filters16_;                    // bf16 filters at their parameters' offsets, or none
  const float* filters_of_ = nullptr;  // the params filters16_ was made from
  double* bn_sums_ = nullptr;
  int64_t* correct_ = nullptr;  // backend memory: classifier_correct's two counts
  float *output_grad_ = nullptr, *input_grad_ = nullptr;
  std::vector<double> local_sums_, gathered_sums_;  // host
};

}  // namespace sg
