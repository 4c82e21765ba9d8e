#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace sg {
namespace {
constexpr int kForwardTag = 4101, kBackwardTag = 4102;  // in order per pair: MPI never reorders
constexpr int kTiedTag = 4103;
}  // namespace

void add_tied_embedding_grads(const ParameterLayout& layout, float* grads, Communicator& pipe,
                              std::vector<float>& scratch) {
  const int last = pipe.size() - 1;
  if (last == 0 || (!layout.has_embedding() && !layout.has_head())) return;
  const ParamTensor& wte = layout.find("wte");
  float* g = grads + wte.offset;
  if (layout.has_head()) {
    pipe.send(g, wte.numel * sizeof(float), 0, kTiedTag);
    return;
  }
  scratch.resize(wte.numel);
  pipe.recv(scratch.data(), wte.numel * sizeof(float), last, kTiedTag);
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < wte.numel; ++i) g[i] += scratch[i];
}

void copy_tied_embedding(const ParameterLayout& layout, float* params, Communicator& pipe) {
  const int last = pipe.size() - 1;
  if (last == 0 || (!layout.has_embedding() && !layout.has_head())) return;
  const ParamTensor& wte = layout.find("wte");
  if (layout.has_embedding()) {
    pipe.send(params + wte.offset, wte.numel * sizeof(float), last, kTiedTag);
  } else {
    pipe.recv(params + wte.offset, wte.numel * sizeof(float), 0, kTiedTag);
  }
}

int pipeline_slots(const std::string& schedule, int stage, int stages, int micro_batches) {
  if (stages == 1) return 1;  // no pipeline: plain accumulation, one micro-batch at a time
  if (schedule == "gpipe") return std::max(1, micro_batches);
  return std::max(1, std::min(micro_batches, stages - stage));
}

PipelineRunner::PipelineRunner(GPT2& model, Communicator& pipe, std::string schedule,
                               int micro_batches)
    : model_(model),
      pipe_(pipe),
      schedule_(std::move(schedule)),
      micro_batches_(micro_batches),
      stage_(pipe.rank()),
      stages_(pipe.size()),
      slots_(pipeline_slots(schedule_, stage_, stages_, micro_batches)),
      stream_floats_(model.stream_floats()) {
  if (schedule_ != "gpipe" && schedule_ != "1f1b") {
    throw SpecError("parallel.schedule must be gpipe or 1f1b, not '" + schedule_ + "'");
  }
  const size_t tokens = static_cast<size_t>(model.batch()) * model.seq_len();
  inputs_.assign(static_cast<size_t>(slots_), std::vector<int32_t>(tokens));
  targets_.assign(static_cast<size_t>(slots_), std::vector<int32_t>(tokens));
}

float* PipelineRunner::send_buffer(std::vector<std::vector<float>>& buffers, int m) {
  if (buffers.size() <= static_cast<size_t>(m)) buffers.resize(static_cast<size_t>(m) + 1);
  buffers[static_cast<size_t>(m)].resize(stream_floats_);
  return buffers[static_cast<size_t>(m)].data();
}

double PipelineRunner::forward(int m, int slot, const float* params, float dloss,
                               const FillBatch& fill) {
  int32_t* in = inputs_[static_cast<size_t>(slot)].data();
  int32_t* tgt = targets_[static_cast<size_t>(slot)].data();
  fill(m, in, tgt);
  if (stage_ > 0) {
    pipe_.recv(model_.stage_input(slot), stream_floats_ * sizeof(float), stage_ - 1, kForwardTag);
  }
  const double loss = model_.forward_stage(slot, params, in, tgt, dloss);
  if (stage_ < stages_ - 1) {
    float* out = send_buffer(forward_sends_, m);
    std::memcpy(out, model_.stage_output(slot), stream_floats_ * sizeof(float));
    pipe_.start_send(out, stream_floats_ * sizeof(float), stage_ + 1, kForwardTag);
  }
  return loss;
}

void PipelineRunner::backward(int m, int slot, const float* params, float* grads, float dloss,
                              const OnReady& on_ready) {
  if (stage_ < stages_ - 1) {
    pipe_.recv(model_.residual_grad(), stream_floats_ * sizeof(float), stage_ + 1, kBackwardTag);
  }
  model_.backward_stage(slot, grads, params, inputs_[static_cast<size_t>(slot)].data(),
                        targets_[static_cast<size_t>(slot)].data(), dloss, on_ready);
  if (stage_ > 0) {
    float* out = send_buffer(backward_sends_, m);
    std::memcpy(out, model_.residual_grad(), stream_floats_ * sizeof(float));
    pipe_.start_send(out, stream_floats_ * sizeof(float), stage_ - 1, kBackwardTag);
  }
}

double PipelineRunner::train(const float* params, float* grads, float dloss,
                             const FillBatch& fill, const OnReady& on_last_ready) {
  const int M = micro_batches_;
  // One stage: forward and backward alternate whatever the schedule (same results, one slot).
  const int warmup =
      schedule_ == "gpipe" && stages_ > 1 ? M : std::min(stages_ - stage_ - 1, M);
  double loss_sum = 0;
  int next_forward = 0;
  for (; next_forward < warmup; ++next_forward) {
    loss_sum += forward(next_forward, next_forward % slots_, params, dloss, fill);
  }
  for (int b = 0; b < M; ++b) {
    if (next_forward < M) {
      loss_sum += forward(next_forward, next_forward % slots_, params, dloss, fill);
      ++next_forward;
    }
    backward(b, b % slots_, params, grads, dloss, b == M - 1 ? on_last_ready : OnReady{});
  }
  if (stages_ > 1) pipe_.wait_all();
  return loss_sum;
}

double PipelineRunner::forward_only(const float* params, int micro_batches, const FillBatch& fill) {
  double loss_sum = 0;
  for (int m = 0; m < micro_batches; ++m) loss_sum += forward(m, 0, params, 0.0f, fill);
  if (stages_ > 1) pipe_.wait_all();
  return loss_sum;
}

}  // namespace sg
