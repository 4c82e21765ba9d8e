// 3x3 convolutions by Winograd's minimal filtering F(4x4, 3x3) (Lavin and Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2015). See kernels/conv2d.h for the contract.
//
// The output is cut into 4x4 tiles; each reads a 6x6 input patch d. With the fixed matrices
// B (6x6), G (6x3) and A (6x4) below, one tile of one (input, output) channel pair is
//   Y = A^T [ (G g G^T) . (B^T d B) ] A        (. elementwise, g the 3x3 filter)
// which holds exactly in real arithmetic. Summed over the input channels, each of the 36
// positions of the 6x6 transform domain is a matrix product over channels:
//   M[p] (tiles x K) = V[p] (tiles x C) U[p] (C x K),  V = B^T d B,  U = G g G^T
// 36 products of tiles x C x K instead of 9 x 16 per tile: 4x fewer multiplications than the
// direct convolution, for transforms that cost a few additions per element.
//
// The three passes of training, each exact in real arithmetic:
//   forward           V from the input, U from the weights, out = A^T M A per tile;
//   input gradient    the forward of dout with the filters flipped and transposed (for stride
//                     1 and pad 1 the input gradient is that convolution);
//   weight gradient   the adjoint of the forward in g: dM = A dY A^T from dout,
//                     dU[p] (C x K) = V[p]^T dM[p], dg += G^T dU G.
//
// The products run on oneDNN's sgemm, one position per call on one thread (oneDNN runs
// single-threaded inside an OpenMP region), so the bits do not depend on the thread count. The
// transforms run on 8 channels at a time, 16 in the AVX-512 copy where the count allows (GCC
// vector extensions; the baseline copy splits them into SSE halves), hence the channel counts a
// multiple of 8.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/conv2d.h"
#include "kernels/cpu/onednn_gemm.h"
#include "kernels/cpu/vec8.h"

namespace sg::cpu::inline SG_CPU_ISA {
namespace {

constexpr int kTile = 4;   // output tile edge
constexpr int kPatch = 6;  // input patch edge
constexpr int kPos = 36;   // transform-domain positions

// The transformed filters cost 36 C K whatever the batch, the products 36 T C K for T tiles, so
// below some tile count the filter-side transform outweighs what the products save. The forward and
// the input gradient (which transform the weights) from kMinTiles up: on 2 AVX2 cores level with
// oneDNN's direct convolution at 32 tiles (ResNet-50's 7x7x512 layers at batch 8) and 1.2-2.2x
// faster from 64 up; on 2 AVX-512 cores, with the 16-lane transforms, 0.95-1.30x and 1.07-1.32x at
// 32 tiles (three conv_bench runs; in the training step those layers' forward 8 % and backward 18 %
// faster), 0.69-0.90x at 16. The weight gradient (whose filter-side transform runs once, on dU)
// from kMinWeightTiles up: 1.36-1.47x at 16 tiles, but 0.76-0.78x at 8 (7x7x512 at batch 2), where
// transforming the 36 C K of dU is most of the pass.
constexpr long kMinTiles = 32;
constexpr long kMinWeightTiles = 16;

// The transforms' vectors (kernels/cpu/vec8.h): 16 channels (or filters) in the lanes where the
// variant has AVX-512 and the count is a multiple of 16, else 8, the bits the same either way.
// The 16-wide copy runs each transform in about 0.55-0.6 of the time at ResNet-50's shapes
// (docs/performance.md): f.template operator()<V>() with the widest vector type whose lanes
// divide `count`.
template <class F>
void by_width([[maybe_unused]] long count, F f) {
#ifdef __AVX512F__
  if (count % 16 == 0) {
    f.template operator()<v16>();
    return;
  }
#endif
  f.template operator()<v8>();
}

// y = B^T x for a column of 6 (x and y with stride `st` in vector units).
template <class V>
inline void bt6(const V* x, V* y, int sx, int sy) {
  const V four = splat_as<V>(4.0f), five = splat_as<V>(5.0f), two = splat_as<V>(2.0f);
  const V x0 = x[0], x1 = x[sx], x2 = x[2 * sx], x3 = x[3 * sx], x4 = x[4 * sx], x5 = x[5 * sx];
  y[0] = four * x0 - five * x2 + x4;
  y[sy] = x4 + x3 - four * (x1 + x2);
  y[2 * sy] = x4 - x3 + four * (x1 - x2);
  y[3 * sy] = x4 - x2 + two * (x3 - x1);
  y[4 * sy] = x4 - x2 - two * (x3 - x1);
  y[5 * sy] = four * x1 - five * x3 + x5;
}

// y = A^T x: 6 -> 4.
template <class V>
inline void at6(const V* x, V* y, int sx, int sy) {
  const V two = splat_as<V>(2.0f), four = splat_as<V>(4.0f), eight = splat_as<V>(8.0f);
  const V x0 = x[0], x1 = x[sx], x2 = x[2 * sx], x3 = x[3 * sx], x4 = x[4 * sx], x5 = x[5 * sx];
  const V s12 = x1 + x2, d12 = x1 - x2, s34 = x3 + x4, d34 = x3 - x4;
  y[0] = x0 + s12 + s34;
  y[sy] = d12 + two * d34;
  y[2 * sy] = s12 + four * s34;
  y[3 * sy] = d12 + eight * d34 + x5;
}

// y = A x: 4 -> 6 (the adjoint of at6).
template <class V>
inline void a4(const V* x, V* y, int sx, int sy) {
  const V two = splat_as<V>(2.0f), four = splat_as<V>(4.0f), eight = splat_as<V>(8.0f);
  const V x0 = x[0], x1 = x[sx], x2 = x[2 * sx], x3 = x[3 * sx];
  const V e = x0 + x2, o = x1 + x3, e4 = x0 + four * x2, o4 = two * x1 + eight * x3;
  y[0] = x0;
  y[sy] = e + o;
  y[2 * sy] = e - o;
  y[3 * sy] = e4 + o4;
  y[4 * sy] = e4 - o4;
  y[5 * sy] = x3;
}

// y = G x: 3 -> 6.
template <class V>
inline void g3(const V* x, V* y, int sx, int sy) {
  const V x0 = x[0], x1 = x[sx], x2 = x[2 * sx];
  const V s02 = x0 + x2;
  y[0] = splat_as<V>(0.25f) * x0;
  y[sy] = splat_as<V>(-1.0f / 6.0f) * (s02 + x1);
  y[2 * sy] = splat_as<V>(-1.0f / 6.0f) * (s02 - x1);
  y[3 * sy] = splat_as<V>(1.0f / 24.0f) * x0 + splat_as<V>(1.0f / 12.0f) * x1 +
              splat_as<V>(1.0f / 6.0f) * x2;
  y[4 * sy] = splat_as<V>(1.0f / 24.0f) * x0 - splat_as<V>(1.0f / 12.0f) * x1 +
              splat_as<V>(1.0f / 6.0f) * x2;
  y[5 * sy] = x2;
}

// y = G^T x: 6 -> 3 (the adjoint of g3).
template <class V>
inline void gt6(const V* x, V* y, int sx, int sy) {
  const V x0 = x[0], x1 = x[sx], x2 = x[2 * sx], x3 = x[3 * sx], x4 = x[4 * sx], x5 = x[5 * sx];
  const V s12 = x1 + x2, d12 = x1 - x2, s34 = x3 + x4, d34 = x3 - x4;
  y[0] = splat_as<V>(0.25f) * x0 - splat_as<V>(1.0f / 6.0f) * s12 + splat_as<V>(1.0f / 24.0f) * s34;
  y[sy] = splat_as<V>(-1.0f / 6.0f) * d12 + splat_as<V>(1.0f / 12.0f) * d34;
  y[2 * sy] = splat_as<V>(-1.0f / 6.0f) * s12 + splat_as<V>(1.0f / 6.0f) * s34 + x5;
}

// Tiles of one image and in all.
struct Tiling {
  int th, tw;  // tiles down and across
  long per_image() const { return static_cast<long>(th) * tw; }
};

Tiling tiling_of(int P, int Q) { return {(P + kTile - 1) / kTile, (Q + kTile - 1) / kTile}; }

// Scratch areas shared by every shape (one thread issues the ops, so the calls never overlap);
// they grow to the largest size seen.
float* scratch(int which, size_t floats) {
  static std::vector<float> areas[3];
  std::vector<float>& a = areas[which];
  if (a.size() < floats) a.resize(floats);
  return a.data();
}

// One tile: image n, output origin (y0, x0); the tiles split between the threads.
struct Tile {
  int n, y0, x0;
};

template <class F>
void for_each_tile(long T, Tiling tl, F f) {
#pragma omp parallel for schedule(static)
  for (long t = 0; t < T; ++t) {
    const int n = static_cast<int>(t / tl.per_image());
    const int rest = static_cast<int>(t % tl.per_image());
    f(t, Tile{n, (rest / tl.tw) * kTile, (rest % tl.tw) * kTile});
  }
}

// Where pixel (n, y, x) of an (N, H, W, C) tensor starts.
inline long pixel(int n, int y, int x, int H, int W, int C) {
  return ((static_cast<long>(n) * H + y) * W + x) * C;
}

// V[p][t][c] = (B^T d B)[p] of tile t's 6x6 patch of x (N,H,W,C), zero outside the image
// (pad 1 on the top and left; the patches of the last tiles may reach past the bottom and right).
template <class V>
void input_transform(float* Vt, const float* x, int N, int H, int W, int C, Tiling tl) {
  const long T = N * tl.per_image();
  for_each_tile(T, tl, [&](long t, Tile k) {
    // Most patches lie inside the image: those load without a test per pixel.
    const bool inside = k.y0 >= 1 && k.x0 >= 1 && k.y0 + kPatch - 1 <= H && k.x0 + kPatch - 1 <= W;
    for (int c = 0; c < C; c += kLanes<V>) {
      V d[kPatch * kPatch], u[kPatch * kPatch];
      for (int i = 0; i < kPatch; ++i) {
        const int yy = k.y0 - 1 + i;
        for (int j = 0; j < kPatch; ++j) {
          const int xx = k.x0 - 1 + j;
          d[i * kPatch + j] = inside || (yy >= 0 && yy < H && xx >= 0 && xx < W)
                                  ? load_as<V>(x + pixel(k.n, yy, xx, H, W, C) + c)
                                  : splat_as<V>(0.0f);
        }
      }
      for (int j = 0; j < kPatch; ++j) bt6(d + j, u + j, kPatch, kPatch);          // columns
      for (int i = 0; i < kPatch; ++i) bt6(u + i * kPatch, d + i * kPatch, 1, 1);  // rows
      for (int p = 0; p < kPos; ++p) store_as(Vt + (p * T + t) * C + c, d[p]);
    }
  });
}

// y (N,P,Q,K) = A^T M A per tile, the parts inside the image.
template <class V>
void output_transform(float* y, const float* M, int N, int P, int Q, int K, Tiling tl) {
  const long T = N * tl.per_image();
  for_each_tile(T, tl, [&](long t, Tile k) {
    const int rows = std::min(kTile, P - k.y0), cols = std::min(kTile, Q - k.x0);
    for (int c = 0; c < K; c += kLanes<V>) {
      V m[kPos], u[kTile * kPatch], o[kTile * kTile];
      for (int p = 0; p < kPos; ++p) m[p] = load_as<V>(M + (p * T + t) * K + c);
      for (int j = 0; j < kPatch; ++j) at6(m + j, u + j, kPatch, kPatch);        // columns: 4x6
      for (int i = 0; i < kTile; ++i) at6(u + i * kPatch, o + i * kTile, 1, 1);  // rows: 4x4
      for (int i = 0; i < rows; ++i) {
        for (int j = 0; j < cols; ++j) {
          store_as(y + pixel(k.n, k.y0 + i, k.x0 + j, P, Q, K) + c, o[i * kTile + j]);
        }
      }
    }
  });
}

// dM[p][t][k] = (A dY A^T)[p] of tile t of dy (N,P,Q,K), zero outside the output.
template <class V>
void output_grad_transform(float* dM, const float* dy, int N, int P, int Q, int K, Tiling tl) {
  const long T = N * tl.per_image();
  for_each_tile(T, tl, [&](long t, Tile k) {
    const bool inside = k.y0 + kTile <= P && k.x0 + kTile <= Q;
    for (int c = 0; c < K; c += kLanes<V>) {
      V g[kTile * kTile], u[kPatch * kTile], m[kPos];
      for (int i = 0; i < kTile; ++i) {
        for (int j = 0; j < kTile; ++j) {
          g[i * kTile + j] = inside || (k.y0 + i < P && k.x0 + j < Q)
                                 ? load_as<V>(dy + pixel(k.n, k.y0 + i, k.x0 + j, P, Q, K) + c)
                                 : splat_as<V>(0.0f);
        }
      }
      for (int j = 0; j < kTile; ++j) a4(g + j, u + j, kTile, kTile);            // columns: 6x4
      for (int i = 0; i < kPatch; ++i) a4(u + i * kTile, m + i * kPatch, 1, 1);  // rows: 6x6
      for (int p = 0; p < kPos; ++p) store_as(dM + (p * T + t) * K + c, m[p]);
    }
  });
}

// U[p][k][c] = (G g G^T)[p] for the filter g = w[k][c] (K,C,3,3), with `flip` turned by 180
// degrees. Each task is a vector's lanes of filters side by side in memory (9 floats each),
// transformed in the lanes.
template <class V>
void weight_transform(float* U, const float* w, int K, int C, bool flip) {
  constexpr int L = kLanes<V>;
  const long plane = static_cast<long>(K) * C;
#pragma omp parallel for schedule(static)
  for (long f = 0; f < plane; f += L) {
    float raw[9 * L];
    std::memcpy(raw, w + f * 9, sizeof raw);
    V g[9] = {}, u[kPatch * 3], o[kPos];
    for (int rs = 0; rs < 9; ++rs) {
      const int from = flip ? 8 - rs : rs;
      for (int j = 0; j < L; ++j) g[rs][j] = raw[j * 9 + from];
    }
    for (int s = 0; s < 3; ++s) g3(g + s, u + s, 3, 3);                    // columns: 6x3
    for (int i = 0; i < kPatch; ++i) g3(u + i * 3, o + i * kPatch, 1, 1);  // rows: 6x6
    for (int p = 0; p < kPos; ++p) store_as(U + p * plane + f, o[p]);
  }
}

// dw[k][c] += G^T dU[.][k][c] G for the (K,C,3,3) weight gradient, a vector's lanes of filters
// a task.
template <class V>
void weight_grad_transform(float* dw, const float* dU, int K, int C) {
  constexpr int L = kLanes<V>;
  const long plane = static_cast<long>(K) * C;
#pragma omp parallel for schedule(static)
  for (long f = 0; f < plane; f += L) {
    V m[kPos], u[3 * kPatch], o[9];
    for (int p = 0; p < kPos; ++p) m[p] = load_as<V>(dU + p * plane + f);
    for (int j = 0; j < kPatch; ++j) gt6(m + j, u + j, kPatch, kPatch);  // columns: 3x6
    for (int r = 0; r < 3; ++r) gt6(u + r * kPatch, o + r * 3, 1, 1);    // rows: 3x3
    float* g = dw + f * 9;
    for (int j = 0; j < L; ++j) {
      for (int rs = 0; rs < 9; ++rs) g[j * 9 + rs] += o[rs][j];
    }
  }
}

// The 36 products, one position per call on one thread; product(p) returns oneDNN's status.
template <class F>
void per_position(F product) {
  int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(max : failed)
  for (int p = 0; p < kPos; ++p) {
    const int status = product(p);
    if (status != 0) failed = std::max(failed, status);
  }
  if (failed != 0) throw_onednn_sgemm_error(failed);
}

// out (N,H,W,K) = the 3x3 pad-1 convolution of x (N,H,W,C) by the filters w (K,C,3,3) or, with
// `flip`, by the filters w (C,K,3,3) turned by 180 degrees and transposed (w[c][k] joining input
// channel c to output channel k). U[p] holds w's first index in rows either way, so the product
// takes it transposed for the forward.
void winograd_conv(float* out, const float* x, const float* w, int N, int H, int W, int C, int K,
                   bool flip) {
  const Tiling tl = tiling_of(H, W);
  const long T = N * tl.per_image();
  const long CK = static_cast<long>(C) * K;
  float* V = scratch(0, kPos * T * C);
  float* M = scratch(1, kPos * T * K);
  float* U = scratch(2, kPos * CK);
  by_width(CK, [&]<class Vec>() { weight_transform<Vec>(U, w, flip ? C : K, flip ? K : C, flip); });
  by_width(C, [&]<class Vec>() { input_transform<Vec>(V, x, N, H, W, C, tl); });
  per_position([&](int p) {
    return flip ? onednn_sgemm('N', 'N', T, K, C, 1.0f, V + p * T * C, C, U + p * CK, K, 0.0f,
                               M + p * T * K, K)
                : onednn_sgemm('N', 'T', T, K, C, 1.0f, V + p * T * C, C, U + p * CK, C, 0.0f,
                               M + p * T * K, K);
  });
  by_width(K, [&]<class Vec>() { output_transform<Vec>(out, M, N, H, W, K, tl); });
}

}  // namespace

bool winograd_fits(const Conv2dShape& s) {
  return s.R == 3 && s.S == 3 && s.stride == 1 && s.pad == 1 && s.groups == 1 && s.C % 8 == 0 &&
         s.K % 8 == 0;
}

namespace {
long batch_tiles(const Conv2dShape& s) { return s.N * tiling_of(s.P(), s.Q()).per_image(); }
}  // namespace

bool winograd_applies(const Conv2dShape& s) {
  return winograd_fits(s) && batch_tiles(s) >= kMinTiles;
}

bool winograd_weights_applies(const Conv2dShape& s) {
  return winograd_fits(s) && batch_tiles(s) >= kMinWeightTiles;
}

void conv2d_winograd_forward(float* out, const float* inp, const float* weight,
                             const Conv2dShape& s) {
  winograd_conv(out, inp, weight, s.N, s.H, s.W, s.C, s.K, false);
}

void conv2d_winograd_backward_data(float* dinp, const float* dout, const float* weight,
                                   const Conv2dShape& s) {
  // The convolution of dout (K channels) into C channels with w[k][c] flipped: GEMM rows k.
  winograd_conv(dinp, dout, weight, s.N, s.H, s.W, s.K, s.C, true);
}

void conv2d_winograd_backward_weights(float* dweight, const float* dout, const float* inp,
                                      const Conv2dShape& s) {
  const Tiling tl = tiling_of(s.H, s.W);
  const long T = s.N * tl.per_image();
  const long CK = static_cast<long>(s.C) * s.K;
  float* V = scratch(0, kPos * T * s.C);
  float* dM = scratch(1, kPos * T * s.K);
  float* dU = scratch(2, kPos * CK);
  by_width(s.C, [&]<class Vec>() { input_transform<Vec>(V, inp, s.N, s.H, s.W, s.C, tl); });
  by_width(s.K, [&]<class Vec>() { output_grad_transform<Vec>(dM, dout, s.N, s.H, s.W, s.K, tl); });
  per_position([&](int p) {  // dU[p] (K x C) = dM[p]^T V[p]
    return onednn_sgemm('T', 'N', s.K, s.C, T, 1.0f, dM + p * T * s.K, s.K, V + p * T * s.C, s.C,
                        0.0f, dU + p * CK, s.C);
  });
  by_width(CK, [&]<class Vec>() { weight_grad_transform<Vec>(dweight, dU, s.K, s.C); });
}

}  // namespace sg::cpu::SG_CPU_ISA
