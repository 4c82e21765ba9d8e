// oneDNN's sgemm. See onednn_gemm.h.
#include "kernels/cpu/onednn_gemm.h"

#include <oneapi/dnnl/dnnl.h>

#include <string>

#include "util/error.h"

namespace sg::cpu {

static_assert(dnnl_success == 0, "onednn_gemm.h promises 0 for success");

int onednn_sgemm(char transa, char transb, long M, long N, long K, float alpha, const float* A,
                 long lda, const float* B, long ldb, float beta, float* C, long ldc) {
  return static_cast<int>(dnnl_sgemm(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc));
}

void throw_onednn_sgemm_error(int status) {  // bad arguments: a bug here, never the user's input
  throw RunError("oneDNN's sgemm failed (status " + std::to_string(status) +
                 ") in a matrix product; please report it with the job spec");
}

}  // namespace sg::cpu
