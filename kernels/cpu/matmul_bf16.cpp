// Linear layer with bf16 products through oneDNN's bf16 matmul. See kernels/matmul_bf16.h.
//
// Each call rounds its fp32 operands into bf16 copies (operands stored in bf16, activations and
// the weights' working copy, are used as they are), then runs every product as fixed bands of
// output rows, one single-threaded oneDNN call each: as kernels/cpu/matmul.cpp does for oneDNN's sgemm, the
// bands are fixed by the shape, so no product's bits depend on the thread count. oneDNN's AMX
// kernels (brg:avx512_core_amx_bf16) want dense operands; the weight gradient's dout^T is the one
// read with strides (banded_product says why).
#include "kernels/matmul_bf16.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/bf16.h"
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
  // Where B is packed: the reorder from its fp32 source (transb's layout) into b.
  memory::desc b_source;
  dnnl::reorder pack;
};

// B (K,N) stored (K,N) row-major (transb 'N') or (N,K) row-major (transb 'T').
memory::desc plain_b(long K, long N, char transb, dt type) {
  return memory::desc({K, N}, type, transb == 'N' ? memory::dims{N, 1} : memory::dims{1, K});
}

// C (M,N) = or += A (M,K) @ B (K,N): A bf16, row-major (lda_t 0) or stored transposed, (K,M)
// with rows of lda_t; C dense row-major fp32; B dense bf16 in transb's layout (pack_source
// undef), or in the layout oneDNN's kernel reads, made once per product from an fp32 or bf16
// source (pack_source) by the entry's reorder. Built for one thread (it runs inside the bands'
// parallel region), cached per shape.
Bf16Product& bf16_product(long M, long N, long K, long lda_t, char transb, bool accumulate,
                          dt pack_source) {
  const bool packed = pack_source != dt::undef;
  using Key = std::tuple<long, long, long, long, char, bool, dt>;
  static dnnl_detail::PrimitiveCache<Key, Bf16Product> cache;
  return cache.get(Key{M, N, K, lda_t, transb, accumulate, pack_source}, [&](const Key&) {
    return dnnl_detail::checked("bf16 matmul setup", [&] {
      const memory::desc a({M, K}, dt::bf16,
                           lda_t == 0 ? memory::dims{K, 1} : memory::dims{1, lda_t});
      const memory::desc b = packed ? memory::desc({K, N}, dt::bf16, memory::format_tag::any)
                                    : plain_b(K, N, transb, dt::bf16);
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
        Bf16Product p{a, pd.weights_desc(), c, pd.scratchpad_desc(), dnnl::matmul(pd),
                      pd.impl_info_str(), {}, {}};
        if (packed) {
          p.b_source = plain_b(K, N, transb, pack_source);
          p.pack = dnnl::reorder(dnnl::reorder::primitive_desc(
              dnnl_detail::engine(), p.b_source, dnnl_detail::engine(), p.b));
        }
        return p;
      } catch (...) {
        omp_set_num_threads(threads);
        throw;
      }
    });
  });
}

// The operands' bf16 copies: the ops run one at a time (kernels/cpu/scratch.h), so each keeps
// one area that grows to the largest size asked for.
uint16_t* area(std::vector<uint16_t>& v, long n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}
std::vector<uint16_t> g_inp, g_weight, g_dout, g_packed, g_packed_last;

// Packs source (fp32 or bf16, in p's source layout) into area v in p's layout, on all threads.
const uint16_t* pack_b(Bf16Product& p, const void* source, std::vector<uint16_t>& v) {
  uint16_t* out = area(v, static_cast<long>(p.b.get_size() / sizeof(uint16_t)) + 1);
  const auto& e = dnnl_detail::engine();
  memory src(p.b_source, e, const_cast<void*>(source)), dst(p.b, e, out);
  dnnl_detail::checked("bf16 matmul packing", [&] {
    p.pack.execute(dnnl_detail::stream(), src, dst);
    dnnl_detail::stream().wait();
  });
  return out;
}

// The B operand of a product: bf16 in transb's layout (B16), or a source (fp32 or bf16) that the
// product packs into oneDNN's layout once, for every band.
struct BOperand {
  const uint16_t* B16 = nullptr;
  ConstAct source;
  char transb = 'N';
};

// C = or += A @ B over bands of kRowBand rows of A and C, each band one oneDNN call on one
// thread (a oneDNN error inside the region is rethrown after it). A is (M,K) row-major, or with
// transa 'T' stored (K,M) row-major: oneDNN reads it with strides (its gemm kernel rather than
// the AMX brgemm, which wants dense rows, yet faster than a transposed copy of a head-sized
// gradient: 57 against 41 + 54 ms at 50304 x 384 x 1024, docs/performance.md).
//
// C is fp32 (C32), or bf16 (C16): then each band is computed into an fp32 buffer of the thread
// (which starts as bias_row in every row where bias_row is given, for accumulate) and rounded.
struct COperand {
  float* C32 = nullptr;
  uint16_t* C16 = nullptr;
  const float* bias_row = nullptr;  // C16 only
};

void banded_product(long M, long N, long K, const uint16_t* A, char transa, const BOperand& B,
                    const COperand& C, bool accumulate) {
  if (M == 0 || N == 0) return;
  const long bands = (M + kRowBand - 1) / kRowBand;
  const long last_rows = M - (bands - 1) * kRowBand;
  const bool packed = B.source.data != nullptr;
  const dt pack_source = !packed ? dt::undef : B.source.bf16() ? dt::bf16 : dt::f32;
  const long lda_t = transa == 'T' ? M : 0;
  Bf16Product& full =
      bf16_product(std::min(M, kRowBand), N, K, lda_t, B.transb, accumulate, pack_source);
  Bf16Product& last = bf16_product(last_rows, N, K, lda_t, B.transb, accumulate, pack_source);
  const uint16_t* b_full = B.B16;
  const uint16_t* b_last = B.B16;
  if (packed) {
    b_full = b_last = pack_b(full, B.source.data, g_packed);
    if (last.b != full.b) b_last = pack_b(last, B.source.data, g_packed_last);
  }
  int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(max : failed)
  for (long band = 0; band < bands; ++band) {
    thread_local dnnl::stream stream(dnnl_detail::engine());
    thread_local std::vector<char> scratch;
    thread_local std::vector<float> c_band;
    const bool is_last = band == bands - 1;
    Bf16Product& p = is_last ? last : full;
    const long r0 = band * kRowBand;
    const long rows = is_last ? last_rows : std::min(M, kRowBand);
    try {
      if (scratch.size() < p.scratch.get_size()) scratch.resize(p.scratch.get_size());
      float* c32 = C.C32 + r0 * N;
      if (C.C16 != nullptr) {
        if (c_band.size() < static_cast<size_t>(rows * N)) c_band.resize(static_cast<size_t>(rows * N));
        c32 = c_band.data();
        if (C.bias_row != nullptr) {
          for (long r = 0; r < rows; ++r) std::copy(C.bias_row, C.bias_row + N, c32 + r * N);
        }
      }
      const auto& e = dnnl_detail::engine();
      memory a(p.a, e, const_cast<uint16_t*>(A + (lda_t == 0 ? r0 * K : r0))),
          b(p.b, e, const_cast<uint16_t*>(is_last ? b_last : b_full)), c(p.c, e, c32),
          s(p.scratch, e, scratch.data());
      p.primitive.execute(stream, {{DNNL_ARG_SRC, a},
                                   {DNNL_ARG_WEIGHTS, b},
                                   {DNNL_ARG_DST, c},
                                   {DNNL_ARG_SCRATCHPAD, s}});
      stream.wait();
      if (C.C16 != nullptr) {
        uint16_t* out = C.C16 + r0 * N;
        for (long i = 0; i < rows * N; ++i) out[i] = detail::to_bf16(c32[i]);
      }
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

float* area(std::vector<float>& v, long n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}
std::vector<float> g_inp_f, g_weight_f, g_dout_f;

// n floats to bf16 through oneDNN's reorder (round to nearest even; its jit code runs the
// CPU's widest vectors, where this file is compiled for the baseline), on all threads.
void reorder_to_bf16(uint16_t* out, const float* in, long n) {
  struct Entry {
    memory::desc src, dst;
    dnnl::reorder reorder;
  };
  static dnnl_detail::PrimitiveCache<long, Entry> cache;
  Entry& r = cache.get(n, [&](long) {
    return dnnl_detail::checked("bf16 conversion setup", [&] {
      const memory::desc src({n}, dt::f32, memory::dims{1}), dst({n}, dt::bf16, memory::dims{1});
      return Entry{src, dst, dnnl::reorder(dnnl::reorder::primitive_desc(
                                 dnnl_detail::engine(), src, dnnl_detail::engine(), dst))};
    });
  });
  const auto& e = dnnl_detail::engine();
  memory src(r.src, e, const_cast<float*>(in)), dst(r.dst, e, out);
  dnnl_detail::checked("bf16 conversion", [&] {
    r.reorder.execute(dnnl_detail::stream(), src, dst);
    dnnl_detail::stream().wait();
  });
}

// in rounded to the nearest bf16 value, kept in fp32.
const float* rounded(std::vector<float>& v, const float* in, long n) {
  float* out = area(v, n);
#pragma omp parallel for simd schedule(static) if (n > (1 << 15))
  for (long i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(detail::to_bf16(in[i])) << 16;
    std::memcpy(out + i, &bits, sizeof bits);
  }
  return out;
}

// Whether oneDNN has bf16 products on this CPU (else they are emulated), asked once.
bool native() {
  static const bool has = !bf16_matmul_implementation().empty();
  return has;
}
}  // namespace

void round_to_bf16(uint16_t* out, const float* in, long n) {
  if (n > 0 && native()) return reorder_to_bf16(out, in, n);
#pragma omp parallel for simd schedule(static) if (n > (1 << 15))
  for (long i = 0; i < n; ++i) out[i] = detail::to_bf16(in[i]);
}

void widen_from_bf16(float* out, const uint16_t* in, long n) {
#pragma omp parallel for simd schedule(static) if (n > (1 << 15))
  for (long i = 0; i < n; ++i) out[i] = detail::from_bf16(in[i]);
}

namespace {

// An activation operand as fp32 values: itself, or its bf16 values widened into v.
const float* as_f32(std::vector<float>& v, ConstAct x, long n) {
  if (!x.bf16()) return x.f32();
  float* out = area(v, n);
  widen_from_bf16(out, x.b16(), n);
  return out;
}
// An activation operand rounded to bf16 values held in fp32 (the emulation's operands).
const float* rounded(std::vector<float>& v, ConstAct x, long n) {
  return x.bf16() ? as_f32(v, x, n) : rounded(v, x.f32(), n);
}
// An activation operand as bf16: itself, or rounded into v.
const uint16_t* as_bf16(std::vector<uint16_t>& v, ConstAct x, long n) {
  if (x.bf16()) return x.b16();
  uint16_t* out = area(v, n);
  round_to_bf16(out, x.f32(), n);
  return out;
}
// Where an fp32 result is written: out itself, or an area then rounded into out (finish()).
struct Result {
  Act out;
  long n;
  std::vector<float>& area_;
  float* f32() { return out.bf16() ? area(area_, n) : out.f32(); }
  void finish() {
    if (out.bf16()) round_to_bf16(out.b16(), area_.data(), n);
  }
};
std::vector<float> g_out_f;

}  // namespace

void matmul_forward_bf16_emulated(Act out, ConstAct inp, ConstAct weight, const float* bias,
                                  int N, int C, int OC) {
  const long n = N, c = C, oc = OC;
  Result r{out, n * oc, g_out_f};
  kernels().matmul_forward(r.f32(), rounded(g_inp_f, inp, n * c),
                           rounded(g_weight_f, weight, oc * c), bias, N, C, OC);
  r.finish();
}

void matmul_backward_bf16_emulated(Act dinp, float* dweight, float* dbias, ConstAct dout,
                                   ConstAct inp, ConstAct weight, int N, int C, int OC) {
  const long n = N, c = C, oc = OC;
  Result r{dinp, n * c, g_out_f};
  const float* dout_r = rounded(g_dout_f, dout, n * oc);
  kernels().matmul_backward(dinp ? r.f32() : nullptr, dweight, nullptr, dout_r,
                            rounded(g_inp_f, inp, n * c), rounded(g_weight_f, weight, oc * c), N,
                            C, OC);
  if (dinp) r.finish();
  // dbias from dout as stored (unrounded when fp32), as the native path
  if (dbias != nullptr) kernels().matmul_bias_backward(dbias, as_f32(g_dout_f, dout, n * oc), N, OC);
}

// Which operands are rounded (into a dense bf16 copy) and which packed by the product is what
// measured fastest at GPT-2's shapes (docs/performance.md): the forward's weight rounded
// (packing it cost 1.2x at the head) or used as it is when given in bf16, the input gradient's
// weight packed (from fp32 or bf16), the weight gradient reading dout's bf16 copy transposed in
// place and its input rounded.
void matmul_forward_bf16(Act out, ConstAct inp, ConstAct weight, const float* bias, int N, int C,
                         int OC) {
  if (!native()) return matmul_forward_bf16_emulated(out, inp, weight, bias, N, C, OC);
  const long n = N, c = C, oc = OC;
  const uint16_t* inp16 = as_bf16(g_inp, inp, n * c);
  const uint16_t* weight16 = as_bf16(g_weight, weight, oc * c);
  COperand result;
  if (out.bf16()) {
    result.C16 = out.b16();
    result.bias_row = bias;
  } else {
    result.C32 = out.f32();
    if (bias != nullptr) {  // out starts as the broadcast bias and the product adds to it
      float* o = result.C32;
#pragma omp parallel for schedule(static)
      for (long i = 0; i < n; ++i) std::copy(bias, bias + oc, o + i * oc);
    }
  }
  // out (N,OC) = inp (N,C) @ weight^T: weight stored (OC,C) is the (C,OC) operand transposed.
  banded_product(n, oc, c, inp16, 'N', BOperand{weight16, nullptr, 'T'}, result, bias != nullptr);
}

void matmul_backward_bf16(Act dinp, float* dweight, float* dbias, ConstAct dout, ConstAct inp,
                          ConstAct weight, int N, int C, int OC) {
  if (!native()) {
    return matmul_backward_bf16_emulated(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  }
  const long n = N, c = C, oc = OC;
  // The weight gradient reads dout16 transposed while the input gradient's area may be reused:
  // dout's copy lives in its own area (g_dout).
  const uint16_t* dout16 = as_bf16(g_dout, dout, n * oc);
  if (dinp) {  // dinp (N,C) = dout (N,OC) @ weight (OC,C), the weight packed
    COperand result;
    if (dinp.bf16()) {
      result.C16 = dinp.b16();
    } else {
      result.C32 = dinp.f32();
    }
    banded_product(n, c, oc, dout16, 'N', BOperand{nullptr, weight, 'N'}, result, false);
  }
  // dweight (OC,C) += dout^T (OC,N) @ inp (N,C): dout16 read as the transposed operand
  const uint16_t* inp16 = as_bf16(g_inp, inp, n * c);
  COperand dw;
  dw.C32 = dweight;
  banded_product(oc, c, n, dout16, 'T', BOperand{inp16, nullptr, 'N'}, dw, true);
  if (dbias != nullptr) kernels().matmul_bias_backward(dbias, as_f32(g_dout_f, dout, n * oc), N, OC);
}

std::string bf16_matmul_implementation() {
  try {
    return bf16_product(kRowBand, 256, 256, 0, 'T', false, dt::undef).implementation;
  } catch (const RunError&) {
    return "";
  }
}

}  // namespace sg::cpu
