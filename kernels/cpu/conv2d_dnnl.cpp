// Convolution on the CPU through oneDNN. Activations are NHWC (oneDNN's nhwc tag; its jit
// kernels run on it directly); weights are stored OIHW and reordered to the layout the
// primitive wants on every call (small next to the convolution itself). See kernels/conv2d.h.
#include <cblas.h>

#include <algorithm>
#include <array>
#include <vector>

#include "dnnl_context.h"
#include "kernels/conv2d.h"

namespace sg::cpu {
namespace {

using namespace dnnl_detail;
using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

using Key = std::array<int, 10>;

Key key_of(const Conv2dShape& s) {
  return {s.N, s.H, s.W, s.C, s.K, s.R, s.S, s.stride, s.pad, s.groups};
}

memory::desc activation_desc(int n, int c, int h, int w) {
  return memory::desc({n, c, h, w}, dt::f32, tag::nhwc);
}

memory::dims weight_dims(const Conv2dShape& s) {
  if (s.groups == 1) return {s.K, s.C, s.R, s.S};
  return {s.groups, s.K / s.groups, s.C / s.groups, s.R, s.S};
}

memory::desc weight_desc(const Conv2dShape& s, tag t) {
  const tag plain = s.groups == 1 ? tag::oihw : tag::goihw;
  return memory::desc(weight_dims(s), dt::f32, t == tag::any ? tag::any : plain);
}

// Forward, backward-data and backward-weights primitives of one shape, with the memory their
// weight layouts need.
struct ConvEntry {
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights bwd_weights;
  memory fwd_weights, bwd_data_weights, diff_weights;  // in the primitives' layouts
};

ConvEntry make_entry(const Conv2dShape& s) {
  return checked("convolution setup", [&] {
    const memory::desc src = activation_desc(s.N, s.C, s.H, s.W);
    const memory::desc dst = activation_desc(s.N, s.K, s.P(), s.Q());
    const memory::desc any_weights = weight_desc(s, tag::any);
    const memory::dims strides{s.stride, s.stride}, pad{s.pad, s.pad};
    auto& e = engine();
    dnnl::convolution_forward::primitive_desc fwd_pd(
        {dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src,
         any_weights, dst, strides, pad, pad},
        e);
    dnnl::convolution_backward_data::primitive_desc bwd_data_pd(
        {dnnl::algorithm::convolution_direct, src, any_weights, dst, strides, pad, pad}, e,
        fwd_pd);
    dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd(
        {dnnl::algorithm::convolution_direct, src, any_weights, dst, strides, pad, pad}, e,
        fwd_pd);
    return ConvEntry{fwd_pd,
                     bwd_data_pd,
                     bwd_weights_pd,
                     dnnl::convolution_forward(fwd_pd),
                     dnnl::convolution_backward_data(bwd_data_pd),
                     dnnl::convolution_backward_weights(bwd_weights_pd),
                     memory(fwd_pd.weights_desc(), e),
                     memory(bwd_data_pd.weights_desc(), e),
                     memory(bwd_weights_pd.diff_weights_desc(), e)};
  });
}

ConvEntry& entry_for(const Conv2dShape& s) {
  static PrimitiveCache<Key, ConvEntry> cache;
  return cache.get(key_of(s), [&](const Key&) { return make_entry(s); });
}

// The user's OIHW weights in the layout `target` holds (a plain copy when they agree).
memory& weights_for(const Conv2dShape& s, const float* weight, memory& target) {
  memory user(weight_desc(s, tag::oihw), engine(), const_cast<float*>(weight));
  dnnl::reorder(user, target).execute(stream(), user, target);
  return target;
}

// A strided 1x1 convolution's weight gradient as one GEMM over the subsampled input:
// dW (K, C) += dY^T (K, NPQ) X_s (NPQ, C). oneDNN 2.6's jit_1x1 kernel gets this wrong when C is
// below the SIMD width (measured: C <= 5 on AVX2, errors of order 1); it is only the
// downsample shortcuts, so the GEMM costs nothing that matters.
void strided_1x1_backward_weights(float* dweight, const float* dout, const float* inp,
                                  const Conv2dShape& s) {
  const int P = s.P(), Q = s.Q();
  std::vector<float> sub(static_cast<size_t>(s.N) * P * Q * s.C);
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < s.N; ++n) {
    for (int p = 0; p < P; ++p) {
      for (int q = 0; q < Q; ++q) {
        const float* x = inp + ((static_cast<long>(n) * s.H + p * s.stride) * s.W + q * s.stride) * s.C;
        std::copy(x, x + s.C, sub.data() + ((static_cast<long>(n) * P + p) * Q + q) * s.C);
      }
    }
  }
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s.K, s.C, s.N * P * Q, 1.0f, dout, s.K,
              sub.data(), s.C, 1.0f, dweight, s.C);
}

}  // namespace

void conv2d_forward(float* out, const float* inp, const float* weight, const Conv2dShape& s) {
  ConvEntry& c = entry_for(s);
  checked("convolution forward", [&] {
    auto& e = engine();
    memory src(c.fwd_pd.src_desc(), e, const_cast<float*>(inp));
    memory dst(c.fwd_pd.dst_desc(), e, out);
    const memory& w = weights_for(s, weight, c.fwd_weights);
    c.fwd.execute(stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, dst}});
    stream().wait();
  });
}

void conv2d_backward_data(float* dinp, const float* dout, const float* weight,
                          const Conv2dShape& s) {
  ConvEntry& c = entry_for(s);
  checked("convolution backward (data)", [&] {
    auto& e = engine();
    memory diff_dst(c.bwd_data_pd.diff_dst_desc(), e, const_cast<float*>(dout));
    memory diff_src(c.bwd_data_pd.diff_src_desc(), e, dinp);
    const memory& w = weights_for(s, weight, c.bwd_data_weights);
    c.bwd_data.execute(stream(), {{DNNL_ARG_DIFF_DST, diff_dst},
                                  {DNNL_ARG_WEIGHTS, w},
                                  {DNNL_ARG_DIFF_SRC, diff_src}});
    stream().wait();
  });
}


void conv2d_backward_weights(float* dweight, const float* dout, const float* inp,
                             const Conv2dShape& s) {
  if (s.R == 1 && s.S == 1 && s.pad == 0 && s.groups == 1 && s.stride > 1) {
    strided_1x1_backward_weights(dweight, dout, inp, s);
    return;
  }
  ConvEntry& c = entry_for(s);
  checked("convolution backward (weights)", [&] {
    auto& e = engine();
    memory src(c.bwd_weights_pd.src_desc(), e, const_cast<float*>(inp));
    memory diff_dst(c.bwd_weights_pd.diff_dst_desc(), e, const_cast<float*>(dout));
    c.bwd_weights.execute(stream(), {{DNNL_ARG_SRC, src},
                                     {DNNL_ARG_DIFF_DST, diff_dst},
                                     {DNNL_ARG_DIFF_WEIGHTS, c.diff_weights}});
    stream().wait();
    reorder_add(c.diff_weights, memory(weight_desc(s, tag::oihw), e, dweight));
  });
}

}  // namespace sg::cpu
