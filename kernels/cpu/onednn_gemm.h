#pragma once
// oneDNN's sgemm, compiled once (not per kernel variant: oneDNN picks its own instructions), for
// the products kernels/cpu/matmul.cpp gives it. Private to kernels/cpu/.

namespace sg::cpu {

// Row-major C (M,N) = op(A) op(B) + beta C, op = transpose where trans is 'T' ('N': as is).
// Returns oneDNN's status (0: success); safe to call inside an OpenMP region.
int onednn_sgemm(char transa, char transb, long M, long N, long K, const float* A, long lda,
                 const float* B, long ldb, float beta, float* C, long ldc);

// Throws the RunError for a failed status (outside any OpenMP region).
[[noreturn]] void throw_onednn_sgemm_error(int status);

}  // namespace sg::cpu
