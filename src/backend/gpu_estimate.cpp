#include "backend/gpu_estimate.h"

#include <algorithm>

namespace sg {
namespace {

// FLOP/s an op's arithmetic runs at.
double arithmetic_rate(const OpCost& op, const GpuSheet& gpu, const GpuEfficiency& e) {
  const double reduced = gpu.reduced_tflops * 1e12, fp32 = gpu.fp32_tflops * 1e12;
  switch (op.kind) {
    case CostKind::Matrix:
      if (!op.reduced) return fp32 * e.matrix_fp32;
      return reduced * (op.fp32_operands ? e.matrix_fp32_operands : e.matrix_reduced);
    case CostKind::Convolution:
      if (!op.reduced) return fp32 * e.conv_fp32;
      return reduced * (op.fp32_operands ? e.conv_fp32_operands : e.conv_reduced);
    case CostKind::Attention:
      return op.reduced ? reduced * e.attention_reduced : fp32 * e.attention_fp32;
    case CostKind::Memory:
      break;
  }
  return 0;
}

}  // namespace

StepEstimate estimate_step(const std::vector<OpCost>& ops, const GpuSheet& gpu,
                           const GpuEfficiency& efficiency) {
  StepEstimate step;
  const double bandwidth = gpu.memory_tbs * 1e12 * efficiency.memory;
  for (const OpCost& op : ops) {
    OpEstimate e;
    e.cost = op;
    const double rate = arithmetic_rate(op, gpu, efficiency);
    const double compute = rate > 0 ? op.flops / rate : 0;
    const double memory = op.bytes / bandwidth;
    e.compute_bound = compute > memory;
    e.seconds = std::max(compute, memory) + op.launches * efficiency.launch_seconds;
    step.seconds += e.seconds;
    step.bytes += op.bytes;
    step.flops += op.flops;
    step.ops.push_back(e);
  }
  std::stable_sort(step.ops.begin(), step.ops.end(),
                   [](const OpEstimate& a, const OpEstimate& b) { return a.seconds > b.seconds; });
  return step;
}

}  // namespace sg
