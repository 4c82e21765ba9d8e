#pragma once
// One data-parallel replica's micro-batches through this process's pipeline stage (DESIGN §3).
//   gpipe: every micro-batch forward, then every one backward.
//   1f1b:  stage s runs min(S-s-1, M) warm-up forwards, then alternates one forward and one
//          backward, then drains the backwards; at most S-s micro-batches are in flight.
// Both schedules run the backwards in micro-batch order 0..M-1, so the gradients are summed
// in the same order and the two give bitwise identical results. Activations and their
// gradients go point-to-point between neighbouring stages; sends are non-blocking (completed
// at the end of the replica), receives blocking, so no pair of stages can deadlock.
// With one stage this is plain gradient accumulation over the micro-batches.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "model/gpt2.h"

namespace sg {

// Slots (activation sets) stage `stage` of `stages` needs for M micro-batches.
int pipeline_slots(const std::string& schedule, int stage, int stages, int micro_batches);

// The LM head is tied to wte: with several stages the first stage's wte and the last stage's
// copy each accumulate part of its gradient. Before the optimizer step the last stage's part is
// added to the first stage's (add_tied_embedding_grads); after it, the first stage's updated wte
// replaces the copy (copy_tied_embedding), so the copies are equal by construction whatever
// order the data-parallel reductions of the two stages summed in. Other stages do nothing.
void add_tied_embedding_grads(const ParameterLayout& layout, float* grads, Communicator& pipe,
                              std::vector<float>& scratch);
void copy_tied_embedding(const ParameterLayout& layout, float* params, Communicator& pipe);

class PipelineRunner {
 public:
  // Fills micro-batch m's (B,T) inputs and targets.
  using FillBatch = std::function<void(int m, int32_t* inputs, int32_t* targets)>;
  using OnReady = std::function<void(size_t, size_t)>;

  // pipe: this process's pipeline group (rank = stage). The model must have been built with
  // pipeline_slots(schedule, ...) slots.
  PipelineRunner(GPT2& model, Communicator& pipe, std::string schedule, int micro_batches);

  // Forward and backward of the replica's micro-batches, adding to grads. Returns the sum of
  // the micro-batch mean losses on the last stage, 0 on the others. on_last_ready is passed to
  // the backward of the last micro-batch (gradient buckets; single-stage only).
  double train(const float* params, float* grads, float dloss, const FillBatch& fill,
               const OnReady& on_last_ready = {});
  // Forward only (validation): the sum of `micro_batches` mean losses on the last stage.
  double forward_only(const float* params, int micro_batches, const FillBatch& fill);

 private:
  double forward(int m, int slot, const float* params, float dloss, const FillBatch& fill);
  void backward(int m, int slot, const float* params, float* grads, float dloss,
                const OnReady& on_ready);
  float* send_buffer(std::vector<std::vector<float>>& buffers, int m);

  GPT2& model_;
  Communicator& pipe_;
  std::string schedule_;
  int micro_batches_, stage_, stages_, slots_;
  size_t stream_floats_;  // B*T*C: one residual stream
  std::vector<std::vector<int32_t>> inputs_, targets_;  // per slot
  std::vector<std::vector<float>> forward_sends_, backward_sends_;  // per micro-batch
};

}  // namespace sg
