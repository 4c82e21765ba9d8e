// What each backend's attention keeps (backend.h). Its own file: the CUDA module and `plan`
// need it without the CPU backend.
#include "backend/backend.h"

namespace sg {

AttentionStorage attention_storage_for(const std::string& backend, int B, int T, int NH) {
  const size_t heads = static_cast<size_t>(B) * static_cast<size_t>(NH);
  const size_t rows = heads * static_cast<size_t>(T);
  if (backend == "cuda") return {rows, rows};  // flash kernels: the log-sum-exp, the row deltas
  return {rows, 0};  // the CPU's blocked kernel: the log-sum-exp (band buffers are per thread)
}

}  // namespace sg
