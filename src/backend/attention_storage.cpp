// What each backend's attention keeps (backend.h). Its own file: the CUDA module and `plan`
// need it without the CPU backend.
#include "backend/backend.h"

namespace sg {

AttentionStorage attention_storage_for(const std::string& backend, int B, int T, int NH) {
  const size_t heads = static_cast<size_t>(B) * static_cast<size_t>(NH);
  if (backend == "cuda") {  // flash kernels: the log-sum-exp and the backward's row deltas
    return {heads * static_cast<size_t>(T), heads * static_cast<size_t>(T)};
  }
  const size_t square = heads * static_cast<size_t>(T) * static_cast<size_t>(T);
  return {square, square};  // the probabilities and their gradient
}

}  // namespace sg
