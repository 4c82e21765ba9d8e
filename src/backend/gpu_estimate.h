#pragma once
// A step's time on a named GPU before there is one (`plan --gpu`): each op counted by the cost
// backend (cost_backend.h) takes the longer of its arithmetic at the rate its units reach and
// its bytes at the memory bandwidth, plus its launches; the step is their sum (one stream, no
// overlap between ops). The rates are data-sheet peaks times the fractions below, which
// docs/gpu.md "Estimates" sources and checks against the H200 measurements.
#include <string>
#include <vector>

#include "backend/cost_backend.h"
#include "backend/gpu_peak.h"

namespace sg {

// Fractions of the data-sheet peaks that kernels reach.
struct GpuEfficiency {
  double matrix_reduced = 0.60;        // bf16/fp16 GEMMs on 16-bit tensors
  double matrix_fp32_operands = 0.31;  // the same reading fp32 tensors (cuBLASLt _FAST_16BF)
  double matrix_fp32 = 0.80;           // fp32 GEMMs on the CUDA cores
  double conv_reduced = 0.40;          // cuDNN's bf16/fp16 convolutions on 16-bit NHWC tensors
  double conv_fp32_operands = 0.05;    // the same on fp32 NHWC tensors (tensor-op math)
  double conv_fp32 = 0.60;             // fp32 convolutions on the CUDA cores
  double attention_reduced = 0.08;    // cuDNN's fused SDPA on 16-bit copies, forward and backward
  double attention_fp32 = 0.25;       // our fp32 flash kernels on the CUDA cores
  double memory = 0.85;               // of the data-sheet bandwidth
  double launch_seconds = 2e-6;       // per kernel, between dependent kernels on one stream
};

struct OpEstimate {
  OpCost cost;
  double seconds = 0;
  bool compute_bound = false;  // its arithmetic, not its bytes, set its time
};

struct StepEstimate {
  std::vector<OpEstimate> ops;  // by estimated time, longest first
  double seconds = 0;
  double bytes = 0, flops = 0;  // summed over the ops
};

StepEstimate estimate_step(const std::vector<OpCost>& ops, const GpuSheet& gpu,
                           const GpuEfficiency& efficiency = {});

}  // namespace sg
