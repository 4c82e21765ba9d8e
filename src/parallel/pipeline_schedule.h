#pragma once
// One data-parallel replica's micro-batches through this process's pipeline stage
// (docs/architecture.md, "The virtual mesh").
//   gpipe: every micro-batch forward, then every one backward.
//   1f1b:  stage s runs min(S-s-1, M) warm-up forwards, then alternates one forward and one
//          backward, then drains the backwards; at most S-s micro-batches are in flight.
// Both schedules run the backwards in micro-batch order 0..M-1, so the gradients are summed
// in the same order and the two give bitwise identical results. Activations and their
// gradients go point-to-point between neighbouring stages; sends are non-blocking (completed
// at the end of the replica), receives blocking, so no pair of stages can deadlock.
// With one stage this is plain gradient accumulation over the micro-batches.
// The runner knows the model only as a StageModel and its batch only as the family's fields.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "model/model_family.h"

namespace sg {

// Slots (activation sets) stage `stage` of `stages` needs for M micro-batches.
int pipeline_slots(PipelineSchedule schedule, int stage, int stages, int micro_batches);

// The order in which a stage runs its micro-batches' forwards and backwards: what
// PipelineRunner::train executes, step by step (tests check it against the schedule's promises:
// 1f1b's warm-up forwards, the micro-batches in flight never above pipeline_slots).
struct PipelineOp {
  bool forward = true;
  int micro = 0;
  bool operator==(const PipelineOp&) const = default;
};
std::vector<PipelineOp> pipeline_program(PipelineSchedule schedule, int stage, int stages,
                                         int micro_batches);

// Tied tensors (a first-stage tensor the last stage also uses, e.g. GPT-2's LM head tied to
// wte): with several stages the first stage's tensor and the last stage's copy each accumulate
// part of its gradient. Before the optimizer step the last stage's part is added to the first
// stage's (add_tied_grads); after it, the first stage's updated values replace the copy
// (copy_tied_params), so the copies are equal by construction whatever order the data-parallel
// reductions of the two stages summed in. Other stages do nothing.
// Pointers, scratch and pipe's transport are `backend`'s memory.
void add_tied_grads(const ParameterLayout& layout, float* grads, Communicator& pipe,
                    Buffer& scratch, Backend& backend);
void copy_tied_params(const ParameterLayout& layout, float* params, Communicator& pipe);
bool has_tied_tensors(const ParameterLayout& layout);

// The loss and the family's evaluation counts summed over micro-batches (last stage only).
struct ForwardSums {
  double loss = 0;               // sum of the micro-batch mean losses
  std::vector<double> metrics;   // summed add_metrics counts
};

class PipelineRunner {
 public:
  // Fills micro-batch m of the replica into `batch`.
  using FillBatch = std::function<void(int m, MicroBatch& batch)>;

  // pipe: this process's pipeline group (rank = stage) over `backend`'s memory, which the
  // model runs on. The model must have been built with pipeline_slots(schedule, ...) slots;
  // `fields` are its family's batch fields, uploaded to the backend once filled.
  PipelineRunner(StageModel& model, std::vector<BatchField> fields, Communicator& pipe,
                 PipelineSchedule schedule, int micro_batches, Backend& backend = cpu_backend());

  // Forward and backward of the replica's micro-batches, adding to grads. Returns the sum of
  // the micro-batch mean losses on the last stage, 0 on the others. update_buffers: the running
  // statistics take this replica's micro-batches. on_last_ready is passed to the backward of the
  // last micro-batch (gradient buckets; single-stage only).
  double train(const float* params, float* buffers, float* grads, float dloss,
               const FillBatch& fill, bool update_buffers, const OnReady& on_last_ready = {});
  // Whether this stage reads the batch: the first stage its inputs, the last its targets; the
  // stages between only pass activations, and their FillBatch is never called.
  bool consumes_batches() const { return stage_ == 0 || stage_ == stages_ - 1; }

  // Forward only, in evaluation mode (validation), over `micro_batches` micro-batches with
  // `metric_count` evaluation counts.
  ForwardSums forward_only(const float* params, float* buffers, int micro_batches,
                           size_t metric_count, const FillBatch& fill);

 private:
  double forward(int m, int slot, const float* params, float* buffers,
                 const ForwardOptions& options, const FillBatch& fill);
  void backward(int m, int slot, const float* params, float* grads, float dloss,
                const OnReady& on_ready);
  float* send_buffer(std::vector<Buffer>& buffers, int m, size_t floats);

  StageModel& model_;
  Communicator& pipe_;
  Backend& backend_;
  PipelineSchedule schedule_;
  int micro_batches_, stage_, stages_, slots_;
  size_t input_floats_, output_floats_;
  std::vector<MicroBatch> batches_;  // per slot
  std::vector<Buffer> forward_sends_, backward_sends_;  // per micro-batch, device memory
  std::vector<CommHandle> sends_;
};

}  // namespace sg
