#pragma once
// oneDNN's sgemm and matmul primitive, compiled once (not per kernel variant: oneDNN picks its own
// instructions), for the products kernels/cpu/ gives them. Private to kernels/cpu/.

namespace sg::cpu {

// Row-major C (M,N) = alpha op(A) op(B) + beta C, op = transpose where trans is 'T' ('N': as is).
// Returns oneDNN's status (0: success). Inside an OpenMP region it runs on the calling thread.
int onednn_sgemm(char transa, char transb, long M, long N, long K, float alpha, const float* A,
                 long lda, const float* B, long ldb, float beta, float* C, long ldc);

// Throws the RunError for a failed status (outside any OpenMP region).
[[noreturn]] void throw_onednn_sgemm_error(int status);

// The same product (alpha 1) through oneDNN's matmul primitive (brgemm kernels on AVX-512),
// created once per shape and cached. Ahead of sgemm on some of ResNet-50's 1x1 passes and
// behind on others (kernels/cpu/conv2d_gemm.cpp says which it takes). Threads as oneDNN's
// sgemm: the bits are fixed for a given thread count. Throws a RunError on failure; not for
// use inside an OpenMP region.
void onednn_matmul(char transa, char transb, long M, long N, long K, const float* A, long lda,
                   const float* B, long ldb, float beta, float* C, long ldc);

}  // namespace sg::cpu
