#pragma once
// Checked calls into CUDA, cuBLAS(Lt), cuDNN and NCCL: every call of the CUDA backend goes through
// one of these macros, and a failure throws RunError naming the call as written, the library's
// error string, and where (file:line). Macros (not functions taking std::source_location) because
// the call's text is part of the message; each expands to one call of a plain function.
//   SG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
//   SG_CUDA_CHECK_LAUNCH("gelu_forward");  // after a kernel launch: launch errors surface here
#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>

#include "util/error.h"

namespace sg::cuda {

[[noreturn]] inline void throw_call_error(const char* library, const char* call,
                                          const std::string& error, const char* file, int line) {
  throw RunError(std::string(library) + " call " + call + " failed: " + error + " (" + file + ":" +
                 std::to_string(line) + ")");
}

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // a non-sticky error is reported once, here, not again by the next call
  throw_call_error("CUDA", call, std::string(cudaGetErrorName(status)) + ": " +
                                     cudaGetErrorString(status), file, line);
}

inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw_call_error("cuBLAS", call, cublasLtGetStatusString(status), file, line);
}

inline void check_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof(detail));  // cuDNN 9: what went wrong, in words
  std::string error = cudnnGetErrorString(status);
  if (detail[0] != '\0') error += std::string(" (") + detail + ")";
  throw_call_error("cuDNN", call, error, file, line);
}

inline void check_nccl(ncclResult_t status, const char* call, const char* file, int line) {
  if (status == ncclSuccess) return;
  std::string error = ncclGetErrorString(status);
  const char* last = ncclGetLastError(nullptr);  // the detail NCCL logged for this thread
  if (last != nullptr && last[0] != '\0') error += std::string(": ") + last;
  throw_call_error("NCCL", call, error, file, line);
}

}  // namespace sg::cuda

#define SG_CUDA_CHECK(call) ::sg::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define SG_CUBLAS_CHECK(call) ::sg::cuda::check_cublas((call), #call, __FILE__, __LINE__)
#define SG_CUDNN_CHECK(call) ::sg::cuda::check_cudnn((call), #call, __FILE__, __LINE__)
#define SG_NCCL_CHECK(call) ::sg::cuda::check_nccl((call), #call, __FILE__, __LINE__)
// A launch reports a bad configuration (grid, block, shared memory) through cudaGetLastError.
#define SG_CUDA_CHECK_LAUNCH(kernel_name) \
  ::sg::cuda::check_cuda(cudaGetLastError(), "launch of " kernel_name, __FILE__, __LINE__)
