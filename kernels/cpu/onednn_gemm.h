#pragma once
// oneDNN's sgemm, compiled once (not per kernel variant: oneDNN picks its own instructions), for
// the products kernels/cpu/matmul.cpp gives it. Private to kernels/cpu/.

namespace sg::cpu {

// Row-major C (M,N) = alpha op(A) op(B) + beta C, op = transpose where trans is 'T' ('N': as is).
// Returns oneDNN's status (0: success). Inside an OpenMP region it runs on the calling thread.
int onednn_sgemm(char transa, char transb, long M, long N, long K, float alpha, const float* A,
                 long lda, const float* B, long ldb, float beta, float* C, long ldc);

// Throws the RunError for a failed status (outside any OpenMP region).
[[noreturn]] void throw_onednn_sgemm_error(int status);

}  // namespace sg::cpu
