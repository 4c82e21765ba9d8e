// Linear layer with bf16 products through oneDNN's bf16 matmul. See kernels/matmul_bf16.h.
//
// Each call rounds its fp32 operands into bf16 copies (per use: weights are stored fp32), then
// runs every product as fixed bands of output rows, one single-threaded oneDNN call each: as
// kernels/cpu/matmul.cpp does for oneDNN's sgemm, the bands are fixed by the shape, so no
// product's bits depend on the thread count. Every operand of a band is a dense matrix, which is
// what oneDNN's AMX kernels (brg:avx512_core_amx_bf16) take; a strided one sends it to a slower
// jit gemm. The weight gradient's dout^T is therefore made as a transposed bf16 copy, not read
// with strides.
#include "kernels/matmul_bf16.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/dnnl_context.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/matmul.h"
#include "util/error.h"

namespace sg::cpu {
namespace {

using dnnl::memory;
using dt = memory::data_type;

// Rows of the output per oneDNN call. 128 rows is 8 of AMX's 16-row tiles: enough for the
// kernel's blocking, and a training batch of 1024 rows makes 8 bands for the threads.
constexpr long kRowBand = 128;

struct Bf16Product {
  memory::desc a, b, c, scratch;
  dnnl::matmul primitive;
  std::string implementation;
};

// C (M,N) = or += A (M,K) @ B (K,N): A dense row-major bf16; B dense bf16, stored (K,N)
// row-major (transb 'N') or (N,K) row-major (transb 'T'); C dense row-major fp32. Built for one
// thread (it runs inside the bands' parallel region) and cached per shape.
Bf16Product& bf16_product(long M, long N, long K, char transb, bool accumulate) {
  using Key = std::tuple<long, long, long, char, bool>;
  static dnnl_detail::PrimitiveCache<Key, Bf16Product> cache;
  return cache.get(Key{M, N, K, transb, accumulate}, [&](const Key&) {
    return dnnl_detail::checked("bf16 matmul setup", [&] {
      const memory::desc a({M, K}, dt::bf16, memory::dims{K, 1});
      const memory::desc b({K, N}, dt::bf16,
                           transb == 'N' ? memory::dims{N, 1} : memory::dims{1, K});
      const memory::desc c({M, N}, dt::f32, memory::dims{N, 1});
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // one scratch per thread
      if (accumulate) {
        dnnl::post_ops ops;
        ops.append_sum(1.0f);
        attr.set_post_ops(ops);
      }
      // oneDNN sizes its partition by omp_get_max_threads() when the primitive is made; it runs
      // on one thread here, so it is made for one.
      const int threads = omp_get_max_threads();
      omp_set_num_threads(1);
      try {
        const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr,
                                              dnnl_detail::engine());
        omp_set_num_threads(threads);
        return Bf16Product{a, b, c, pd.scratchpad_desc(), dnnl::matmul(pd), pd.impl_info_str()};
      } catch (...) {
        omp_set_num_threads(threads);
        throw;
      }
    });
  });
}

// C = or += A @ B over bands of kRowBand rows of A and C, each band one oneDNN call on one
// thread (a oneDNN error inside the region is rethrown after it).
void banded_product(long M, long N, long K, const uint16_t* A, const uint16_t* B, char transb,
                    float* C, bool accumulate) {
  if (M == 0 || N == 0) return;
  const long bands = (M + kRowBand - 1) / kRowBand;
  const long last_rows = M - (bands - 1) * kRowBand;
  Bf16Product& full = bf16_product(std::min(M, kRowBand), N, K, transb, accumulate);
  Bf16Product& last = bf16_product(last_rows, N, K, transb, accumulate);
  int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(max : failed)
  for (long band = 0; band < bands; ++band) {
    thread_local dnnl::stream stream(dnnl_detail::engine());
    thread_local std::vector<char> scratch;
    Bf16Product& p = band == bands - 1 ? last : full;
    const long r0 = band * kRowBand;
    try {
      if (scratch.size() < p.scratch.get_size()) scratch.resize(p.scratch.get_size());
      const auto& e = dnnl_detail::engine();
      memory a(p.a, e, const_cast<uint16_t*>(A + r0 * K)), b(p.b, e, const_cast<uint16_t*>(B)),
          c(p.c, e, C + r0 * N), s(p.scratch, e, scratch.data());
      p.primitive.execute(stream, {{DNNL_ARG_SRC, a},
                                   {DNNL_ARG_WEIGHTS, b},
                                   {DNNL_ARG_DST, c},
                                   {DNNL_ARG_SCRATCHPAD, s}});
      stream.wait();
    } catch (const dnnl::error& e) {
      failed = std::max(failed, e.status == dnnl_success ? 1 : static_cast<int>(e.status));
    } catch (...) {  // the scratch's allocation
      failed = std::max(failed, static_cast<int>(dnnl_out_of_memory));
    }
  }
  if (failed != 0) {
    throw RunError("oneDNN's bf16 matrix product failed (status " + std::to_string(failed) +
                   "); run with train.precision: fp32, or report it with the job spec");
  }
}

// The operands' bf16 copies: the ops run one at a time (kernels/cpu/scratch.h), so each keeps
// one area that grows to the largest size asked for.
uint16_t* area(std::vector<uint16_t>& v, long n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}
std::vector<uint16_t> g_inp, g_weight, g_dout, g_dout_t;
float* area(std::vector<float>& v, long n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}
std::vector<float> g_inp_f, g_weight_f, g_dout_f;

inline uint16_t to_bf16(float f) {  // sg::float_to_bf16 without the branch, so it vectorises
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | 0x40u;
  return static_cast<uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

// out (cols, rows) = in (rows, cols)^T rounded to bf16, in 32 x 32 tiles.
void transpose_to_bf16(uint16_t* out, const float* in, long rows, long cols) {
  constexpr long kTile = 32;
#pragma omp parallel for collapse(2) schedule(static)
  for (long c0 = 0; c0 < cols; c0 += kTile)
    for (long r0 = 0; r0 < rows; r0 += kTile) {
      const long c1 = std::min(cols, c0 + kTile), r1 = std::min(rows, r0 + kTile);
      for (long c = c0; c < c1; ++c)
        for (long r = r0; r < r1; ++r) out[c * rows + r] = to_bf16(in[r * cols + c]);
    }
}

}  // namespace

void round_to_bf16(uint16_t* out, const float* in, long n) {
#pragma omp parallel for simd schedule(static) if (n > (1 << 15))
  for (long i = 0; i < n; ++i) out[i] = to_bf16(in[i]);
}

namespace {
// in rounded to the nearest bf16 value, kept in fp32.
const float* rounded(std::vector<float>& v, const float* in, long n) {
  float* out = area(v, n);
#pragma omp parallel for simd schedule(static) if (n > (1 << 15))
  for (long i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(to_bf16(in[i])) << 16;
    std::memcpy(out + i, &bits, sizeof bits);
  }
  return out;
}

bool native() {
  static const bool has = !bf16_matmul_implementation().empty();
  return has;
}
}  // namespace

void matmul_forward_bf16_emulated(float* out, const float* inp, const float* weight,
                                  const float* bias, int N, int C, int OC) {
  const long n = N, c = C, oc = OC;
  kernels().matmul_forward(out, rounded(g_inp_f, inp, n * c), rounded(g_weight_f, weight, oc * c),
                           bias, N, C, OC);
}

void matmul_backward_bf16_emulated(float* dinp, float* dweight, float* dbias, const float* dout,
                                   const float* inp, const float* weight, int N, int C, int OC) {
  const long n = N, c = C, oc = OC;
  kernels().matmul_backward(dinp, dweight, nullptr, rounded(g_dout_f, dout, n * oc),
                            rounded(g_inp_f, inp, n * c), rounded(g_weight_f, weight, oc * c), N,
                            C, OC);
  if (dbias != nullptr) kernels().matmul_bias_backward(dbias, dout, N, OC);  // unrounded, as native
}

void matmul_forward_bf16(float* out, const float* inp, const float* weight, const float* bias,
                         int N, int C, int OC) {
  if (!native()) return matmul_forward_bf16_emulated(out, inp, weight, bias, N, C, OC);
  const long n = N, c = C, oc = OC;
  uint16_t* inp16 = area(g_inp, n * c);
  uint16_t* weight16 = area(g_weight, oc * c);
  round_to_bf16(inp16, inp, n * c);
  round_to_bf16(weight16, weight, oc * c);
  if (bias != nullptr) {  // out starts as the broadcast bias and the product adds to it
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) std::copy(bias, bias + oc, out + i * oc);
  }
  // out (N,OC) = inp (N,C) @ weight^T: weight stored (OC,C) is the (C,OC) operand transposed.
  banded_product(n, oc, c, inp16, weight16, 'T', out, bias != nullptr);
}

void matmul_backward_bf16(float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, int N, int C, int OC) {
  if (!native()) {
    return matmul_backward_bf16_emulated(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  }
  const long n = N, c = C, oc = OC;
  if (dinp != nullptr) {  // dinp (N,C) = dout (N,OC) @ weight (OC,C)
    uint16_t* dout16 = area(g_dout, n * oc);
    uint16_t* weight16 = area(g_weight, oc * c);
    round_to_bf16(dout16, dout, n * oc);
    round_to_bf16(weight16, weight, oc * c);
    banded_product(n, c, oc, dout16, weight16, 'N', dinp, false);
  }
  // dweight (OC,C) += dout^T (OC,N) @ inp (N,C)
  uint16_t* dout_t16 = area(g_dout_t, oc * n);
  uint16_t* inp16 = area(g_inp, n * c);
  transpose_to_bf16(dout_t16, dout, n, oc);
  round_to_bf16(inp16, inp, n * c);
  banded_product(oc, c, n, dout_t16, inp16, 'N', dweight, true);
  if (dbias != nullptr) kernels().matmul_bias_backward(dbias, dout, N, OC);
}

std::string bf16_matmul_implementation() {
  try {
    return bf16_product(kRowBand, 256, 256, 'T', false).implementation;
  } catch (const RunError&) {
    return "";
  }
}

}  // namespace sg::cpu
