#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace sg {
namespace {
constexpr int kForwardTag = 4101, kBackwardTag = 4102;  // in order per pair: MPI never reorders
constexpr int kTiedTag = 4103;

// The tied tensors of this stage: on the first stage the originals (before the blocks, marked
// tied_to_last), on the last the copies. Their order is the model's order on both.
std::vector<const ParamTensor*> tied_tensors(const ParameterLayout& layout) {
  std::vector<const ParamTensor*> out;
  for (const ParamTensor& t : layout.tensors()) {
    const bool original = layout.first_stage() && t.block < 0 &&
                          layout.model().tensors[t.global_index].tied_to_last;
    if (original || t.tied_copy) out.push_back(&t);
  }
  return out;
}

}  // namespace

bool has_tied_tensors(const ParameterLayout& layout) {
  for (const TensorSpec& t : layout.model().tensors) {
    if (t.tied_to_last) return true;
  }
  return false;
}

void add_tied_grads(const ParameterLayout& layout, float* grads, Communicator& pipe,
                    Buffer& scratch, Backend& backend) {
  const int last = pipe.size() - 1;
  if (last == 0 || (!layout.first_stage() && !layout.last_stage())) return;
  for (const ParamTensor* t : tied_tensors(layout)) {
    float* g = grads + t->offset;
    if (layout.last_stage()) {
      pipe.send(g, t->numel * sizeof(float), 0, kTiedTag);
      continue;
    }
    if (scratch.bytes() < t->numel * sizeof(float)) scratch = Buffer(backend, t->numel * sizeof(float));
    pipe.recv(scratch.data(), t->numel * sizeof(float), last, kTiedTag);
    backend.add_inplace(g, scratch.as<float>(), static_cast<long>(t->numel));
  }
}

void copy_tied_params(const ParameterLayout& layout, float* params, Communicator& pipe) {
  const int last = pipe.size() - 1;
  if (last == 0 || (!layout.first_stage() && !layout.last_stage())) return;
  for (const ParamTensor* t : tied_tensors(layout)) {
    if (layout.first_stage()) {
      pipe.send(params + t->offset, t->numel * sizeof(float), last, kTiedTag);
    } else {
      pipe.recv(params + t->offset, t->numel * sizeof(float), 0, kTiedTag);
    }
  }
}

int pipeline_slots(PipelineSchedule schedule, int stage, int stages, int micro_batches) {
  if (stages == 1) return 1;  // no pipeline: plain accumulation, one micro-batch at a time
  if (schedule == PipelineSchedule::GPipe) return std::max(1, micro_batches);
  return std::max(1, std::min(micro_batches, stages - stage));
}

std::vector<PipelineOp> pipeline_program(PipelineSchedule schedule, int stage, int stages,
                                         int micro_batches) {
  const int M = micro_batches;
  // gpipe: every forward first. 1f1b: S-s-1 warm-up forwards, then one forward and one backward
  // in turn, then the remaining backwards. One stage: forward and backward alternate whatever the
  // schedule (same results, one slot).
  const int warmup = schedule == PipelineSchedule::GPipe && stages > 1 ? M : std::min(stages - stage - 1, M);
  std::vector<PipelineOp> program;
  int next_forward = 0;
  for (; next_forward < warmup; ++next_forward) program.push_back({true, next_forward});
  for (int b = 0; b < M; ++b) {
    if (next_forward < M) program.push_back({true, next_forward++});
    program.push_back({false, b});
  }
  return program;
}

PipelineRunner::PipelineRunner(StageModel& model, std::vector<BatchField> fields,
                               Communicator& pipe, PipelineSchedule schedule, int micro_batches,
                               Backend& backend)
    : model_(model),
      pipe_(pipe),
      backend_(backend),
      schedule_(schedule),
      micro_batches_(micro_batches),
      stage_(pipe.rank()),
      stages_(pipe.size()),
      slots_(pipeline_slots(schedule_, stage_, stages_, micro_batches)),
      input_floats_(model.input_floats()),
      output_floats_(model.output_floats()) {
  for (int s = 0; s < slots_; ++s) batches_.emplace_back(fields);
}

float* PipelineRunner::send_buffer(std::vector<Buffer>& buffers, int m, size_t floats) {
  if (buffers.size() <= static_cast<size_t>(m)) buffers.resize(static_cast<size_t>(m) + 1);
  Buffer& b = buffers[static_cast<size_t>(m)];
  if (b.bytes() < floats * sizeof(float)) b = Buffer(backend_, std::max<size_t>(1, floats) * sizeof(float));
  return b.as<float>();
}

double PipelineRunner::forward(int m, int slot, const float* params, float* buffers,
                               const ForwardOptions& options, const FillBatch& fill) {
  MicroBatch& batch = batches_[static_cast<size_t>(slot)];
  if (consumes_batches()) {
    fill(m, batch);
    batch.upload(backend_);
  }
  if (stage_ > 0) {
    pipe_.recv(model_.stage_input(slot), input_floats_ * sizeof(float), stage_ - 1, kForwardTag);
  }
  const double loss = model_.forward(slot, params, buffers, batch, options);
  if (stage_ < stages_ - 1) {
    float* out = send_buffer(forward_sends_, m, output_floats_);
    backend_.copy(out, model_.stage_output(slot), output_floats_ * sizeof(float));
    sends_.push_back(pipe_.start_send(out, output_floats_ * sizeof(float), stage_ + 1, kForwardTag));
  }
  return loss;
}

void PipelineRunner::backward(int m, int slot, const float* params, float* grads, float dloss,
                              const OnReady& on_ready) {
  if (stage_ < stages_ - 1) {
    pipe_.recv(model_.output_grad(), output_floats_ * sizeof(float), stage_ + 1, kBackwardTag);
  }
  model_.backward(slot, grads, params, batches_[static_cast<size_t>(slot)], dloss, on_ready);
  if (stage_ > 0) {
    float* out = send_buffer(backward_sends_, m, input_floats_);
    backend_.copy(out, model_.input_grad(), input_floats_ * sizeof(float));
    sends_.push_back(pipe_.start_send(out, input_floats_ * sizeof(float), stage_ - 1, kBackwardTag));
  }
}

double PipelineRunner::train(const float* params, float* buffers, float* grads, float dloss,
                             const FillBatch& fill, bool update_buffers,
                             const OnReady& on_last_ready) {
  const int M = micro_batches_;
  ForwardOptions options;
  options.training = true;
  options.update_buffers = update_buffers;
  options.fused_dloss = dloss;
  model_.prepare_weights(params);
  double loss_sum = 0;
  for (const PipelineOp& op : pipeline_program(schedule_, stage_, stages_, M)) {
    if (op.forward) {
      loss_sum += forward(op.micro, op.micro % slots_, params, buffers, options, fill);
    } else {
      backward(op.micro, op.micro % slots_, params, grads, dloss,
               op.micro == M - 1 ? on_last_ready : OnReady{});
    }
  }
  for (CommHandle& send : sends_) send->wait();
  sends_.clear();
  return loss_sum;
}

ForwardSums PipelineRunner::forward_only(const float* params, float* buffers, int micro_batches,
                                         size_t metric_count, const FillBatch& fill) {
  ForwardSums sums;
  sums.metrics.assign(metric_count, 0.0);
  ForwardOptions options;
  options.training = false;
  model_.prepare_weights(params);
  for (int m = 0; m < micro_batches; ++m) {
    sums.loss += forward(m, 0, params, buffers, options, fill);
    if (stage_ == stages_ - 1 && metric_count > 0) {
      model_.add_metrics(0, batches_[0], sums.metrics.data());
    }
  }
  for (CommHandle& send : sends_) send->wait();
  sends_.clear();
  return sums;
}

}  // namespace sg
