// What each backend's attention keeps and the type it stores activations in (backend.h). Its
// own file: the CUDA module and `plan` need them without the CPU backend.
#include "backend/backend.h"

namespace sg {

AttentionStorage attention_storage_for(BackendKind backend, int B, int T, int NH) {
  const size_t heads = static_cast<size_t>(B) * static_cast<size_t>(NH);
  const size_t rows = heads * static_cast<size_t>(T);
  if (backend == BackendKind::Cuda) return {rows, rows};  // flash kernels: the log-sum-exp, the row deltas
  return {rows, 0};  // the CPU's blocked kernel: the log-sum-exp (band buffers are per thread)
}

// Both backends store bf16 activations under bf16 (docs/bf16.md); fp16 keeps fp32 tensors.
DType activation_dtype_for(BackendKind, Precision precision) {
  return precision == Precision::BF16 ? DType::BF16 : DType::F32;
}

}  // namespace sg
