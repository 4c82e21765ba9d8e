// oneDNN's sgemm. See onednn_gemm.h.
#include "kernels/cpu/onednn_gemm.h"

#include <oneapi/dnnl/dnnl.h>

#include <string>
#include <tuple>

#include "kernels/cpu/dnnl_context.h"
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

namespace {

using dnnl::memory;

// Row-major (rows, cols), or its transpose as stored (cols, rows): the strides say which.
memory::desc matrix(long rows, long cols, char trans, long ld) {
  const memory::dims strides = trans == 'N' ? memory::dims{ld, 1} : memory::dims{1, ld};
  return memory::desc({rows, cols}, memory::data_type::f32, strides);
}

struct MatmulEntry {
  memory::desc a, b, c;
  dnnl::matmul primitive;
};

}  // namespace

void onednn_matmul(char transa, char transb, long M, long N, long K, const float* A, long lda,
                   const float* B, long ldb, float beta, float* C, long ldc) {
  using namespace dnnl_detail;
  using Key = std::tuple<char, char, long, long, long, long, long, long, bool>;
  static PrimitiveCache<Key, MatmulEntry> cache;
  const bool accumulate = beta != 0.0f;
  if (accumulate && beta != 1.0f) throw_onednn_sgemm_error(dnnl_invalid_arguments);
  MatmulEntry& e =
      cache.get(Key{transa, transb, M, N, K, lda, ldb, ldc, accumulate}, [&](const Key&) {
        return checked("matmul setup", [&] {
          const memory::desc a = matrix(M, K, transa, lda), b = matrix(K, N, transb, ldb),
                             c = matrix(M, N, 'N', ldc);
          dnnl::primitive_attr attr;
          if (accumulate) {  // C += A B
            dnnl::post_ops ops;
            ops.append_sum(1.0f);
            attr.set_post_ops(ops);
          }
          return MatmulEntry{a, b, c,
                             dnnl::matmul(dnnl::matmul::primitive_desc(
                                 dnnl::matmul::desc(a, b, c), attr, engine()))};
        });
      });
  checked("matmul", [&] {
    memory a(e.a, engine(), const_cast<float*>(A)), b(e.b, engine(), const_cast<float*>(B)),
        c(e.c, engine(), C);
    e.primitive.execute(stream(), {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    stream().wait();
  });
}

}  // namespace sg::cpu
