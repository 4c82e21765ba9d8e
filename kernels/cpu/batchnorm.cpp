// Batch normalisation on the CPU over an (M, C) matrix (NHWC activations): the split functions
// (what synchronised batch norm runs, and evaluation) and the fused training pair a replica runs
// alone, with or without the ReLU that follows. See kernels/batchnorm.h.
//
// Every pass is memory-bound, so the pair makes as few as the arithmetic allows: the forward
// reads x for its sums and once more to write out (3 tensor passes), the backward reads x and
// dy for its sums and once more to write dx (5). The fused ReLU keeps no mask: the backward
// recomputes x * scale + shift > 0 from x, which it reads anyway, with the forward's scale and
// shift, bit for bit the forward's test. A residual block's add + ReLU backward (relu.h) can
// ride in the backward's first pass the same way (batchnorm_add_relu_backward), saving a read
// of the gradient it makes. oneDNN 2.6's fused pair, used before, made 4 and 5
// passes plus a bit mask; on ResNet-50's 53 batch norms at batch 8 (bench/bn_bench.cpp, 2
// AVX-512 threads) this pair is level with it with the data in memory, as in a training step,
// and about 20 % faster with the data in cache.
//
// Column sums run in double, over bands of rows fixed by M and C, each band's in registers a
// vector of channels at a time (runs of 16 rows in float first), then the bands added in order,
// so the bits do not depend on the thread count. Every pass takes 8 channels a vector with GCC
// vector extensions (the baseline copy splits them into SSE halves), 16 in the AVX-512 copy
// where they fit (the same arithmetic per channel, so the same bits: kernels/cpu/vec8.h), the
// last C % 8 channels of a row in scalars. On ResNet-50's 53 shapes at batch 8 the 16-wide
// copy, with 64-byte streaming stores and the prefetch below, took the forward pair from
// 57-63 to 46-49 ms a step and the backward from 80-85 to 72-78 (bench/bn_bench.cpp, four
// alternated runs).
#include <omp.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SG_STREAMING_STORES 1
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <vector>

#include "kernels/batchnorm.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/vec8.h"

namespace sg::cpu::inline SG_CPU_ISA {
namespace {

typedef double v8d __attribute__((vector_size(64)));

// The outputs of the two writing passes (out, dinp) go to memory with streaming stores when
// they are larger than a core's L2: they are read next by a convolution, long after, and the
// stores then skip reading the lines in first. Inside ResNet-50's step (batch 8, 2 AVX-512
// threads, three A/B pairs against plain stores) that took the batch-norm forwards from 75-87
// to 64-80 ms a step and the backwards from 109-120 to 94-112, the convolutions reading them no
// slower; bench/bn_bench.cpp cannot tell the two apart.
// The stores are two 16-byte halves (SSE's, on every x86-64; the write-combining buffers join
// them into lines), so 16-byte alignment suffices: malloc's (glibc maps large blocks at 16 past
// a page) as well as the model's arena (64).
constexpr long kStreamBytes = 4L << 20;
bool streams(const uint16_t*, long, int) { return false; }  // bf16 outputs: plain stores
bool streams(const float* p, long M, int C) {
#ifdef SG_STREAMING_STORES
  return M * C * static_cast<long>(sizeof(float)) >= kStreamBytes && C % 8 == 0 &&
         reinterpret_cast<uintptr_t>(p) % 16 == 0;
#else
  (void)p, (void)M, (void)C;
  return false;
#endif
}
template <class V>
inline void put(float* p, V v, bool stream) {
#ifdef SG_STREAMING_STORES
  if (stream) {
#ifdef __AVX512F__
    if constexpr (kLanes<V> == 16) {
      if (reinterpret_cast<uintptr_t>(p) % 64 == 0) {
        _mm512_stream_ps(p, reinterpret_cast<__m512>(v));
        return;
      }
    }
#endif
    for (int i = 0; i < kLanes<V>; i += 4) {
      _mm_stream_ps(p + i, __m128{v[i], v[i + 1], v[i + 2], v[i + 3]});
    }
    return;
  }
#endif
  store_as(p, v);
}
template <class V>
inline void put(uint16_t* p, V v, bool) {
  store_act(p, v);
}
inline v8d widen(v8 v) { return __builtin_convertvector(v, v8d); }
#ifdef __AVX512F__
typedef double v16d __attribute__((vector_size(128)));
inline v16d widen(v16 v) { return __builtin_convertvector(v, v16d); }
#endif
// The double vector a float vector's sums widen to.
template <class V>
using Wide = decltype(widen(V{}));
// v where keep (a comparison's all-ones lanes), else 0.
template <class V, class I>
inline V keep_where(I keep, V v) {
  return reinterpret_cast<V>(keep & reinterpret_cast<I>(v));
}

// The normalisation as one multiply-add per element, y = x * scale + shift; the forward and
// the fused ReLU's backward both compute it through these, so they agree on its sign.
struct Affine {
  std::vector<float> scale, shift;
  Affine(const float* mean, const float* var, const float* gamma, const float* beta, int C,
         float eps)
      : scale(static_cast<size_t>(C)), shift(static_cast<size_t>(C)) {
    for (int c = 0; c < C; ++c) {
      const float s = gamma[c] / std::sqrt(var[c] + eps);
      scale[static_cast<size_t>(c)] = s;
      shift[static_cast<size_t>(c)] = beta[c] - mean[c] * s;
    }
  }
};
template <class V>
inline V affine(V x, const float* sc, const float* sh) {
  return x * load_as<V>(sc) + load_as<V>(sh);
}
inline float affine(float x, float sc, float sh) { return x * sc + sh; }

// Rows per band, fixed by C (the bits depend on the bands, never on the threads): about 256 KB
// of the matrix, at least 64 rows so the bands' partial sums stay a few per cent of the data.
long band_rows(int C) { return std::clamp(65536L / std::max(C, 1), 64L, 256L); }

// The bands' partial sums, kept per thread between calls. A plain buffer: a thread_local
// std::vector would make the compiler emit its destructor as a shared symbol outside this
// variant's namespace (kernels/cpu/isa.h).
struct Partials {
  double* p = nullptr;
  size_t n = 0;
  Partials() = default;
  Partials(const Partials&) = delete;
  Partials& operator=(const Partials&) = delete;
  ~Partials() { std::free(p); }
  double* at_least(size_t k) {
    if (k > n) {
      std::free(p);
      p = static_cast<double*>(std::malloc(k * sizeof(double)));
      n = p != nullptr ? k : 0;
      if (p == nullptr) throw std::bad_alloc();
    }
    return p;
  }
};

// Rows summed in float registers before their sums join the double ones: double arithmetic
// all the way ran at 18-26 GB/s on 2 AVX-512 cores, runs of 16 at the read bandwidth (32-34).
constexpr long kRun = 16;

// Two ways to walk a band, adding the same values in the same order per channel (so the same
// bits); which is faster depends on how many tensors the sums read. Measured from memory on
// ResNet-50's 53 shapes (bench/bn_bench.cpp, 2 AVX-512 threads, three alternated runs): the
// forward's sums of x alone ran down the rows (29-30 ms a step against 32-34 across), the
// backward's sums of x and dy across them (the whole backward 95-103 ms against 99-113).

// Down the rows: a band's rows [m0, m1) of G vectors of channels from c into acc (see
// column_sums), the sums in registers.
template <int G, class V, class F>
void band_sums_down(double* acc, long m0, long m1, int c, int C, const F& f) {
  constexpr int L = kLanes<V>;
  using D = Wide<V>;
  V shift[G];
  for (int g = 0; g < G; ++g) {
    shift[g] = f.template shift<V>(m0, std::min(m1, m0 + kRun), c + L * g);
  }
  D s[G] = {}, q[G] = {};
  for (long r = m0; r < m1; r += kRun) {
    V fs[G] = {}, fq[G] = {};
    const long end = std::min(m1, r + kRun);
    for (long m = r; m < end; ++m) {
      for (int g = 0; g < G; ++g) f.vec(m, c + L * g, shift[g], fs[g], fq[g]);
    }
    for (int g = 0; g < G; ++g) {
      s[g] += widen(fs[g]);
      q[g] += widen(fq[g]);
    }
  }
  for (int g = 0; g < G; ++g) {
    f.unshift(s[g], q[g], widen(shift[g]), static_cast<double>(m1 - m0));
    store_as(acc + c + L * g, s[g]);
    store_as(acc + C + c + L * g, q[g]);
  }
}

// Channels the walk across takes at once: their float and double sums (28 KiB) stay in cache.
constexpr int kChunk = 1024;

// Across the rows: a band's rows [m0, m1) of the channels [c0, c0 + width) (width a multiple of
// 8, at most kChunk) into acc, row by row, each row's channels in turn into float sums in
// memory, which join the double ones every kRun rows: one stream per tensor for the prefetchers.
template <class V, class F>
void band_sums_across(double* acc, long m0, long m1, int c0, int width, int C, const F& f) {
  constexpr int L = kLanes<V>;
  using D = Wide<V>;
  const int G = width / L;
  alignas(64) float fs[kChunk], fq[kChunk], shift[kChunk];
  alignas(64) double s[kChunk], q[kChunk];
  const long first_end = std::min(m1, m0 + kRun);
  for (int g = 0; g < G; ++g)
    store_as(shift + L * g, f.template shift<V>(m0, first_end, c0 + L * g));
  std::fill(s, s + width, 0.0);
  std::fill(q, q + width, 0.0);
  for (long r = m0; r < m1; r += kRun) {
    std::fill(fs, fs + width, 0.0f);
    std::fill(fq, fq + width, 0.0f);
    const long end = std::min(m1, r + kRun);
    for (long m = r; m < end; ++m) {
      for (int g = 0; g < G; ++g) {
        V a = load_as<V>(fs + L * g), b = load_as<V>(fq + L * g);
        f.vec(m, c0 + L * g, load_as<V>(shift + L * g), a, b);
        store_as(fs + L * g, a);
        store_as(fq + L * g, b);
      }
    }
    for (int g = 0; g < G; ++g) {
      store_as(s + L * g, load_as<D>(s + L * g) + widen(load_as<V>(fs + L * g)));
      store_as(q + L * g, load_as<D>(q + L * g) + widen(load_as<V>(fq + L * g)));
    }
  }
  for (int g = 0; g < G; ++g) {
    D a = load_as<D>(s + L * g), b = load_as<D>(q + L * g);
    f.unshift(a, b, widen(load_as<V>(shift + L * g)), static_cast<double>(m1 - m0));
    store_as(acc + c0 + L * g, a);
    store_as(acc + C + c0 + L * g, b);
  }
}

// out[0..C) = sum over rows of s(m, c), out[C..2C) = sum of q(m, c), in double. Each band sums
// its rows in order, 8 channels a vector, runs of kRun rows in float, walking down or across
// the rows as F::kAcross says, the last C % 8 channels in double; the bands' sums are then added
// in band order.
// f.vec(m, c, shift, s, q) adds row m's 8 channels from c to s and q, in float, relative to
// f.shift(m0, m1, c) (computed from a band's first rows: float sums of squares of values far
// from zero would lose the variance), and f.unshift(s, q, shift, rows) turns a band's sums back
// to the true ones; f.one(m, c, s, q) adds one channel in double.
template <class F>
void column_sums(double* out, long M, int C, const F& f) {
  const long rows = band_rows(C);
  const long bands = (M + rows - 1) / rows;
  thread_local Partials partial;
  double* const part = partial.at_least(static_cast<size_t>(bands) * 2 * C);
  const int C8 = C / 8 * 8;
#pragma omp parallel for schedule(static)
  for (long b = 0; b < bands; ++b) {
    double* acc = part + b * 2 * C;
    const long m0 = b * rows, m1 = std::min(M, m0 + rows);
    if constexpr (F::kAcross) {
      for (int c0 = 0; c0 < C8; c0 += kChunk) {
        const int width = std::min(kChunk, C8 - c0);
#ifdef __AVX512F__
        if (width % 16 == 0) {
          band_sums_across<v16>(acc, m0, m1, c0, width, C, f);
          continue;
        }
#endif
        band_sums_across<v8>(acc, m0, m1, c0, width, C, f);
      }
    } else {
      int c = 0;
#ifdef __AVX512F__
      for (; c + 64 <= C8; c += 64) band_sums_down<4, v16>(acc, m0, m1, c, C, f);
#endif
      for (; c + 32 <= C8; c += 32) band_sums_down<4, v8>(acc, m0, m1, c, C, f);
      for (; c < C8; c += 8) band_sums_down<1, v8>(acc, m0, m1, c, C, f);
    }
    for (int c = C8; c < C; ++c) {
      double s = 0, q = 0;
      for (long m = m0; m < m1; ++m) f.one(m, c, s, q);
      acc[c] = s;
      acc[C + c] = q;
    }
  }
  std::fill(out, out + 2 * C, 0.0);
  for (long b = 0; b < bands; ++b) {
    const double* acc = part + b * 2 * C;
    for (int c = 0; c < 2 * C; ++c) out[c] += acc[c];
  }
}

// Calls f.vec(m, c) for every row m and every 8 channels from c, f.one(m, c) for the last
// C % 8 channels, the rows split between the threads; each thread then fences its streaming
// stores, so they are in memory before the region's closing barrier.
template <class F>
void for_each_row(long M, int C, const F& f) {
  const int C8 = C / 8 * 8;
#pragma omp parallel
  {
#pragma omp for schedule(static) nowait
    for (long m = 0; m < M; ++m) {
      int c = 0;
#ifdef __AVX512F__
      for (; c + 16 <= C8; c += 16) f.template vec<v16>(m, c);
#endif
      for (; c < C8; c += 8) f.template vec<v8>(m, c);
      for (int c = C8; c < C; ++c) f.one(m, c);
    }
#ifdef SG_STREAMING_STORES
    _mm_sfence();
#endif
  }
}

// The walk down the rows reads each row's few lines a row's length apart, which the hardware
// prefetchers follow too late: a software prefetch this many rows ahead took the forward's sums
// on ResNet-50's 53 shapes from 22-27 to 17-20 ms a step (bench/bn_bench.cpp, data in memory).
constexpr long kPrefetchRows = 8;

// sums[c] = sum x, sums[C+c] = sum x^2, from the sums of d = x - k with k the mean of a band's
// first rows: sum x = sum d + n k, sum x^2 = sum d^2 + 2 k sum d + n k^2.
template <class T>
struct XSums {
  static constexpr bool kAcross = false;
  const T* x;
  int C;
  template <class V>
  V shift(long m0, long m1, int c) const {
    V k = {};
    for (long m = m0; m < m1; ++m) k += load_act<V>(x + m * C + c);
    return k / splat_as<V>(static_cast<float>(m1 - m0));
  }
  template <class V>
  void vec(long m, int c, V k, V& s, V& q) const {
    __builtin_prefetch(x + (m + kPrefetchRows) * C + c);  // past the end: a no-op
    const V d = load_act<V>(x + m * C + c) - k;
    s += d;
    q += d * d;
  }
  template <class D>
  void unshift(D& s, D& q, D k, double n) const {
    q += (s + s) * k + n * k * k;
    s += n * k;
  }
  void one(long m, int c, double& s, double& q) const {
    const double v = detail::load(x + m * C + c);
    s += v;
    q += v * v;
  }
};

// One row's channels of normalize (below).
// With bf16 storage and a residual, the batch norm's result is rounded to bf16 before the sum:
// bit for bit the unfused pair, whose batch norm stores its output (batchnorm.h).
template <class T>
struct NormalizePass {
  static constexpr bool kBf16 = sizeof(T) == 2;
  T* out;
  const T* x;
  const float *sc, *sh;
  const T* r;
  int C;
  bool relu, stream;
  template <class V>
  void vec(long m, int c) const {
    V y = affine(load_act<V>(x + m * C + c), sc + c, sh + c);
    if (r != nullptr) {
      if constexpr (kBf16) y = bf16_round(y);  // as the batch norm's stored output
      y += load_act<V>(r + m * C + c);
    }
    if (relu) y = keep_where(y > splat_as<V>(0.0f), y);
    put(out + m * C + c, y, stream);
  }
  void one(long m, int c) const {
    float y = affine(detail::load(x + m * C + c), sc[c], sh[c]);
    if (r != nullptr) {
      if constexpr (kBf16) y = detail::from_bf16(detail::to_bf16(y));
      y += detail::load(r + m * C + c);
    }
    detail::store(out + m * C + c, relu ? (y > 0.0f ? y : 0.0f) : y);
  }
};

// out = x * scale + shift, plus the residual r where one is given, then max(0, .) with `relu`
// (each step rounded to float as the separate passes would).
template <class T>
void normalize(T* out, const T* x, const Affine& a, const T* r, long M, int C, bool relu) {
  const float *sc = a.scale.data(), *sh = a.shift.data();
  for_each_row(M, C, NormalizePass<T>{out, x, sc, sh, r, C, relu, streams(out, M, C)});
}

// sums[c] = sum dy', sums[C+c] = sum dy' (x - mean), dy' = dy or, with a ReLU (a non-null
// affine), dy where x * scale + shift > 0 and 0 elsewhere. With `add` set, dy first becomes
// (dy + add.g where add.out > 0, else 0), written back to dy: add_relu_backward's pass, its
// result summed as it is made.
template <class T>
struct PendingAddRelu {
  float* acc = nullptr;  // dy itself, writable
  const float* g = nullptr;
  const T* out = nullptr;
};
template <class T>
struct DySums {
  static constexpr bool kAcross = true;
  const float* dy;
  const T* x;
  const float *mean, *sc, *sh;
  int C;
  PendingAddRelu<T> add;
  template <class V>
  V shift(long, long, int) const {  // x - mean is centred already
    return V{};
  }
  template <class V>
  void vec(long m, int c, V, V& s, V& q) const {
    const long i = m * C + c;
    const V xv = load_act<V>(x + i);
    V g = load_as<V>(dy + i);
    if (add.acc != nullptr) {
      g = keep_where(load_act<V>(add.out + i) > splat_as<V>(0.0f), g + load_as<V>(add.g + i));
      store_as(add.acc + i, g);
    }
    if (sc != nullptr) g = keep_where(affine(xv, sc + c, sh + c) > splat_as<V>(0.0f), g);
    s += g;
    q += g * (xv - load_as<V>(mean + c));
  }
  template <class D>
  void unshift(D&, D&, D, double) const {}
  void one(long m, int c, double& s, double& q) const {
    const long i = m * C + c;
    const float xv = detail::load(x + i);
    float g = dy[i];
    if (add.acc != nullptr) add.acc[i] = g = detail::load(add.out + i) > 0.0f ? g + add.g[i] : 0.0f;
    if (sc != nullptr && !(affine(xv, sc[c], sh[c]) > 0.0f)) g = 0.0f;
    s += g;
    q += double{g} * (double{xv} - double{mean[c]});
  }
};

// The backward's sums (see batchnorm_backward_sums) with an optional ReLU mask and an optional
// add_relu_backward pass before them.
template <class T>
void backward_sums(double* sums, float* dgamma, float* dbeta, const float* dout, const T* x,
                   const float* mean, const float* var, const Affine* relu, long M, int C,
                   float eps, PendingAddRelu<T> add = {}) {
  column_sums(sums, M, C,
              DySums<T>{dout, x, mean, relu ? relu->scale.data() : nullptr,
                     relu ? relu->shift.data() : nullptr, C, add});
  for (int c = 0; c < C; ++c) {
    sums[C + c] /= std::sqrt(double{var[c]} + eps);  // sum dy' xhat
    dbeta[c] += static_cast<float>(sums[c]);
    dgamma[c] += static_cast<float>(sums[C + c]);
  }
}

// One row's channels of backward_input (below): dx = a dy' + b x + d.
template <class T>
struct BackwardInputPass {
  T* dx;
  const float* dy;
  const T* x;
  const float *pa, *pb, *pd, *sc, *sh;
  int C;
  bool stream;
  template <class V>
  void vec(long m, int c) const {
    const V xv = load_act<V>(x + m * C + c);
    V g = load_as<V>(dy + m * C + c);
    if (sc != nullptr) g = keep_where(affine(xv, sc + c, sh + c) > splat_as<V>(0.0f), g);
    put(dx + m * C + c, load_as<V>(pa + c) * g + load_as<V>(pb + c) * xv + load_as<V>(pd + c),
        stream);
  }
  void one(long m, int c) const {
    const float xv = detail::load(x + m * C + c);
    float g = dy[m * C + c];
    if (sc != nullptr && !(affine(xv, sc[c], sh[c]) > 0.0f)) g = 0.0f;
    detail::store(dx + m * C + c, pa[c] * g + pb[c] * xv + pd[c]);
  }
};

// dx = gamma rstd (dy' - mean(dy') - xhat mean(dy' xhat)) = a dy' + b x + d per channel.
template <class T>
void backward_input(T* dinp, const double* sums, const float* dout, const T* x,
                    const float* mean, const float* var, const float* gamma, const Affine* relu,
                    double count, long M, int C, float eps) {
  std::vector<float> a(static_cast<size_t>(C)), b(static_cast<size_t>(C)),
      d(static_cast<size_t>(C));
  for (int c = 0; c < C; ++c) {
    const double rstd = 1.0 / std::sqrt(double{var[c]} + eps);
    const double g = double{gamma[c]} * rstd;
    const double mean_dy = sums[c] / count, mean_dy_xhat = sums[C + c] / count;
    a[static_cast<size_t>(c)] = static_cast<float>(g);
    b[static_cast<size_t>(c)] = static_cast<float>(-g * mean_dy_xhat * rstd);
    d[static_cast<size_t>(c)] =
        static_cast<float>(-g * mean_dy + g * mean_dy_xhat * rstd * double{mean[c]});
  }
  for_each_row(M, C,
               BackwardInputPass<T>{dinp, dout, x, a.data(), b.data(), d.data(),
                                 relu ? relu->scale.data() : nullptr,
                                 relu ? relu->shift.data() : nullptr, C, streams(dinp, M, C)});
}

// The training pair for either storage type (T: float, or uint16_t for bf16).
template <class T>
void forward_train(T* out, float* mean, float* var, const T* inp, const float* gamma,
                   const float* beta, const T* residual, long M, int C, float eps, bool relu) {
  if (M <= 0 || C <= 0) return;  // no statistics of no rows (as the CUDA backend)
  std::vector<double> sums(2 * static_cast<size_t>(C));
  column_sums(sums.data(), M, C, XSums<T>{inp, C});
  batchnorm_stats(mean, var, sums.data(), static_cast<double>(M), C);
  normalize(out, inp, Affine(mean, var, gamma, beta, C, eps), residual, M, C, relu);
}

template <class T>
void backward(T* dinp, float* dgamma, float* dbeta, const float* dout, const T* inp,
              const float* mean, const float* var, const float* gamma, const float* beta, long M,
              int C, float eps, bool relu) {
  if (M <= 0 || C <= 0) return;
  std::optional<Affine> forward;  // the forward's normalisation, for the ReLU's mask
  if (relu) forward.emplace(mean, var, gamma, beta, C, eps);
  const Affine* mask = forward ? &*forward : nullptr;
  std::vector<double> sums(2 * static_cast<size_t>(C));
  backward_sums(sums.data(), dgamma, dbeta, dout, inp, mean, var, mask, M, C, eps);
  backward_input(dinp, sums.data(), dout, inp, mean, var, gamma, mask, static_cast<double>(M), M, C,
                 eps);
}

template <class T>
void add_relu_backward_pair(T* dinp, float* dgamma, float* dbeta, float* dout, const float* g,
                            const T* out, const T* inp, const float* mean, const float* var,
                            const float* gamma, long M, int C, float eps) {
  if (M <= 0 || C <= 0) return;
  std::vector<double> sums(2 * static_cast<size_t>(C));
  backward_sums(sums.data(), dgamma, dbeta, dout, inp, mean, var, nullptr, M, C, eps,
                PendingAddRelu<T>{dout, g, out});
  backward_input(dinp, sums.data(), dout, inp, mean, var, gamma, nullptr, static_cast<double>(M), M,
                 C, eps);
}

}  // namespace

void batchnorm_sums(double* sums, const float* inp, long M, int C) {
  column_sums(sums, M, C, XSums<float>{inp, C});
}
void batchnorm_sums_bf16(double* sums, const uint16_t* inp, long M, int C) {
  column_sums(sums, M, C, XSums<uint16_t>{inp, C});
}

void batchnorm_stats(float* mean, float* var, const double* sums, double count, int C) {
  for (int c = 0; c < C; ++c) {
    const double mu = sums[c] / count;
    mean[c] = static_cast<float>(mu);
    var[c] = static_cast<float>(std::max(0.0, sums[C + c] / count - mu * mu));
  }
}

void batchnorm_normalize(float* out, const float* inp, const float* mean, const float* var,
                         const float* gamma, const float* beta, long M, int C, float eps) {
  normalize(out, inp, Affine(mean, var, gamma, beta, C, eps), static_cast<const float*>(nullptr),
            M, C, false);
}
void batchnorm_normalize_bf16(uint16_t* out, const uint16_t* inp, const float* mean,
                              const float* var, const float* gamma, const float* beta, long M,
                              int C, float eps) {
  normalize(out, inp, Affine(mean, var, gamma, beta, C, eps),
            static_cast<const uint16_t*>(nullptr), M, C, false);
}

void batchnorm_backward_sums(double* sums, float* dgamma, float* dbeta, const float* dout,
                             const float* inp, const float* mean, const float* var, long M, int C,
                             float eps) {
  backward_sums(sums, dgamma, dbeta, dout, inp, mean, var, nullptr, M, C, eps);
}
void batchnorm_backward_sums_bf16(double* sums, float* dgamma, float* dbeta, const float* dout,
                                  const uint16_t* inp, const float* mean, const float* var,
                                  long M, int C, float eps) {
  backward_sums(sums, dgamma, dbeta, dout, inp, mean, var, nullptr, M, C, eps);
}

void batchnorm_backward_input(float* dinp, const double* sums, const float* dout, const float* inp,
                              const float* mean, const float* var, const float* gamma, double count,
                              long M, int C, float eps) {
  backward_input(dinp, sums, dout, inp, mean, var, gamma, nullptr, count, M, C, eps);
}
void batchnorm_backward_input_bf16(uint16_t* dinp, const double* sums, const float* dout,
                                   const uint16_t* inp, const float* mean, const float* var,
                                   const float* gamma, double count, long M, int C, float eps) {
  backward_input(dinp, sums, dout, inp, mean, var, gamma, nullptr, count, M, C, eps);
}

void batchnorm_forward_train(float* out, float* mean, float* var, const float* inp,
                             const float* gamma, const float* beta, const float* residual, long M,
                             int C, float eps, bool relu) {
  forward_train(out, mean, var, inp, gamma, beta, residual, M, C, eps, relu);
}
void batchnorm_forward_train_bf16(uint16_t* out, float* mean, float* var, const uint16_t* inp,
                                  const float* gamma, const float* beta, const uint16_t* residual,
                                  long M, int C, float eps, bool relu) {
  forward_train(out, mean, var, inp, gamma, beta, residual, M, C, eps, relu);
}

void batchnorm_backward(float* dinp, float* dgamma, float* dbeta, const float* dout,
                        const float* inp, const float* mean, const float* var, const float* gamma,
                        const float* beta, long M, int C, float eps, bool relu) {
  backward(dinp, dgamma, dbeta, dout, inp, mean, var, gamma, beta, M, C, eps, relu);
}
void batchnorm_backward_bf16(uint16_t* dinp, float* dgamma, float* dbeta, const float* dout,
                             const uint16_t* inp, const float* mean, const float* var,
                             const float* gamma, const float* beta, long M, int C, float eps,
                             bool relu) {
  backward(dinp, dgamma, dbeta, dout, inp, mean, var, gamma, beta, M, C, eps, relu);
}

void batchnorm_add_relu_backward(float* dinp, float* dgamma, float* dbeta, float* dout,
                                 const float* g, const float* out, const float* inp,
                                 const float* mean, const float* var, const float* gamma, long M,
                                 int C, float eps) {
  add_relu_backward_pair(dinp, dgamma, dbeta, dout, g, out, inp, mean, var, gamma, M, C, eps);
}
void batchnorm_add_relu_backward_bf16(uint16_t* dinp, float* dgamma, float* dbeta, float* dout,
                                      const float* g, const uint16_t* out, const uint16_t* inp,
                                      const float* mean, const float* var, const float* gamma,
                                      long M, int C, float eps) {
  add_relu_backward_pair(dinp, dgamma, dbeta, dout, g, out, inp, mean, var, gamma, M, C, eps);
}

void batchnorm_update_running(float* running_mean, float* running_var, const float* mean,
                              const float* var, double count, int C, float momentum) {
  const double unbias = count > 1 ? count / (count - 1) : 1.0;
  for (int c = 0; c < C; ++c) {
    running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mean[c];
    running_var[c] =
        (1.0f - momentum) * running_var[c] + momentum * static_cast<float>(double{var[c]} * unbias);
  }
}

}  // namespace sg::cpu::SG_CPU_ISA
