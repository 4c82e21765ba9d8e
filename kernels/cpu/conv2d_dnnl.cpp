// Convolution on the CPU through oneDNN. Activations are NHWC; weights are stored OIHW and
// reordered to the layout the primitive wants on every call (small next to the convolution
// itself). See kernels/conv2d.h.
//
// Which activation layout the primitive runs on is chosen once per shape, by a fixed rule (so
// every process makes the same choice and deterministic runs stay bitwise equal): 1x1
// convolutions run on NHWC directly; spatial ones (3x3, 7x7) on oneDNN's channel-blocked layout,
// their activations reordered in and out around the call, except the strided ones where oneDNN
// runs AVX-512. Measured on 2 AVX2 cores (ResNet-18/50 shapes, forward + both backwards): blocked
// 3x3 layers are 5-35 % faster even with the reorders, blocked 1x1 layers 0-75 % slower (their
// reorders cost as much as the GEMM). On 2 AVX-512 cores (conv_bench, data from memory) NHWC
// took ResNet-50's 3x3 stride-2 layers in 0.8-1.0x the blocked time with the reorders, the
// 7x7x512 stride-1 forward in 1.2x (docs/performance.md).
//
// Two kinds of layer go to other kernels instead, as SINGULARITY_CONV allows (conv2d.h):
//  - the 3x3 stride-1 layers with enough tiles to Winograd's (winograd_applies;
//    kernels/cpu/conv2d_winograd.cpp, through the chosen variant's table): on ResNet-50's 56x56
//    to 14x14 layers at batch 8 it took the forward and the input gradient in about half
//    oneDNN's time and the weight gradient in a third to a half; with fewer tiles (ResNet-50's
//    7x7x512 layers below batch 8) only their weight gradient;
//  - the 1x1 layers to a matrix product on oneDNN's sgemm (kernels/cpu/conv2d_gemm.cpp),
//    5-16 % faster per pass inside the ResNet-50 step than oneDNN's jit_1x1
//    (docs/performance.md);
//  - the strided spatial layers' weight gradients to one product over the gathered input windows
//    (kernels/cpu/conv2d_im2col.cpp): ResNet-50's three 3x3 stride-2 layers in 0.54-0.86x the
//    direct pass's time on 2 AVX-512 cores.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "dnnl_context.h"
#include "kernels/conv2d.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/matmul_bf16.h"
#include "kernels/cpu/scratch.h"
#include "util/error.h"

namespace sg::cpu {
namespace {

using namespace dnnl_detail;
using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

using Key = std::array<int, 12>;

memory::desc activation_desc(int n, int c, int h, int w, dt type = dt::f32) {
  return memory::desc({n, c, h, w}, type, tag::nhwc);
}

// d with another element type, its layout kept (oneDNN 2.x exposes the C struct).
memory::desc with_type(memory::desc d, dt type) {
  d.data.data_type = static_cast<dnnl_data_type_t>(type);
  return d;
}

memory::dims weight_dims(const Conv2dShape& s) {
  if (s.groups == 1) return {s.K, s.C, s.R, s.S};
  return {s.groups, s.K / s.groups, s.C / s.groups, s.R, s.S};
}

memory::desc weight_desc(const Conv2dShape& s, tag t, dt type = dt::f32) {
  const tag plain = s.groups == 1 ? tag::oihw : tag::goihw;
  return memory::desc(weight_dims(s), type, t == tag::any ? tag::any : plain);
}

// Forward, backward-data and backward-weights primitives of one shape, with the memory their
// weight layouts need. With `blocked`, the primitives' activations are in oneDNN's layout and
// user_src/user_dst describe the caller's NHWC tensors.
struct ConvEntry {
  bool blocked = false;
  memory::desc user_src, user_dst;
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights bwd_weights;
  memory fwd_weights, bwd_data_weights, diff_weights;  // in the primitives' layouts
  bool bf16 = false;                                   // bf16 operands (make_entry)
};

ConvAlgorithms& chosen_algorithms() {
  static ConvAlgorithms chosen = conv_algorithms_from_env(std::getenv("SINGULARITY_CONV"));
  return chosen;
}

bool onednn_runs_avx512() {
  static const bool avx512 = (static_cast<int>(dnnl::get_effective_cpu_isa()) &
                              dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  return avx512;
}

// The rule above; few channels stay NHWC too (a blocked layout would pad them to its block).
// With AVX-512 oneDNN's NHWC kernels for strided layers beat the blocked ones with their
// reorders (ResNet-50's 3x3 stride-2 layers at batch 8: docs/performance.md).
bool runs_blocked(const Conv2dShape& s) {
  if ((s.R == 1 && s.S == 1) || s.groups != 1 || s.C < 16 || s.K < 16) return false;
  switch (chosen_algorithms().spatial_layout) {
    case SpatialLayout::blocked: return true;
    case SpatialLayout::nhwc: return false;
    case SpatialLayout::by_isa: break;
  }
  return !(onednn_runs_avx512() && s.stride > 1);
}

Key key_of(const Conv2dShape& s) {
  return {s.N, s.H, s.W, s.C, s.K,      s.R,           s.S,
          s.stride, s.pad, s.groups, runs_blocked(s), chosen_algorithms().bf16};
}

bool is_reference(const char* impl) { return std::string(impl).starts_with("ref"); }

// With bf16, the sources, weights and output gradients the primitives read are bf16 (the
// reorders that bring the caller's fp32 tensors into their layouts convert them: round to
// nearest even), what they write fp32.
ConvEntry make_entry(const Conv2dShape& s, bool blocked, bool bf16) {
  return checked("convolution setup", [&] {
    const dt operand = bf16 ? dt::bf16 : dt::f32;
    const memory::desc user_src = activation_desc(s.N, s.C, s.H, s.W);
    const memory::desc user_dst = activation_desc(s.N, s.K, s.P(), s.Q());
    const memory::desc src = blocked ? memory::desc({s.N, s.C, s.H, s.W}, operand, tag::any)
                                     : activation_desc(s.N, s.C, s.H, s.W, operand);
    const memory::desc dst =
        blocked ? memory::desc({s.N, s.K, s.P(), s.Q()}, dt::f32, tag::any) : user_dst;
    const memory::desc any_weights = weight_desc(s, tag::any, operand);
    const memory::dims strides{s.stride, s.stride}, pad{s.pad, s.pad};
    auto& e = engine();
    dnnl::convolution_forward::primitive_desc fwd_pd(
        {dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src,
         any_weights, dst, strides, pad, pad},
        e);
    // The backward passes take the forward's activation layouts (gradients of the source fp32,
    // of the output the operand type).
    const memory::desc diff_src = with_type(fwd_pd.src_desc(), dt::f32);
    const memory::desc diff_dst = with_type(fwd_pd.dst_desc(), operand);
    dnnl::convolution_backward_data::primitive_desc bwd_data_pd(
        {dnnl::algorithm::convolution_direct, diff_src, any_weights, diff_dst, strides, pad, pad},
        e, fwd_pd);
    dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd(
        {dnnl::algorithm::convolution_direct, fwd_pd.src_desc(), weight_desc(s, tag::any),
         diff_dst, strides, pad, pad},
        e, fwd_pd);
    return ConvEntry{blocked,
                     user_src,
                     user_dst,
                     fwd_pd,
                     bwd_data_pd,
                     bwd_weights_pd,
                     dnnl::convolution_forward(fwd_pd),
                     dnnl::convolution_backward_data(bwd_data_pd),
                     dnnl::convolution_backward_weights(bwd_weights_pd),
                     memory(fwd_pd.weights_desc(), e),
                     memory(bwd_data_pd.weights_desc(), e),
                     memory(bwd_weights_pd.diff_weights_desc(), e),
                     bf16};
  });
}

ConvEntry& entry_for(const Conv2dShape& s) {
  static PrimitiveCache<Key, ConvEntry> cache;
  return cache.get(key_of(s), [&](const Key&) {
    // The entry if oneDNN has optimised kernels for it (not its "ref:any": a 3x3 weight
    // gradient on 2x2 activations blocked was 200x slower), else none; in bf16 also none where
    // oneDNN has no bf16 kernel at all (a CPU without AVX-512 refuses the primitive).
    const auto optimised = [&](bool blocked, bool bf16) -> std::optional<ConvEntry> {
      try {
        ConvEntry c = make_entry(s, blocked, bf16);
        if (!is_reference(c.fwd_pd.impl_info_str()) &&
            !is_reference(c.bwd_data_pd.impl_info_str()) &&
            !is_reference(c.bwd_weights_pd.impl_info_str())) {
          return c;
        }
      } catch (const RunError&) {
        if (!bf16) throw;
      }
      return std::nullopt;
    };
    // Blocked where the rule says, else (or where it has no optimised kernel) NHWC; in bf16 a
    // shape with no optimised bf16 kernel in either layout (few channels) stays fp32.
    if (chosen_algorithms().bf16) {
      if (runs_blocked(s)) {
        if (auto c = optimised(true, true)) return std::move(*c);
      }
      if (auto c = optimised(false, true)) return std::move(*c);
    }
    if (runs_blocked(s)) {
      if (auto c = optimised(true, false)) return std::move(*c);
    }
    return make_entry(s, false, false);
  });
}

// Scratch areas, shared by every shape: the ops run one at a time, so they never overlap. They
// grow to the largest activation seen. 0 and 1 hold activations in the blocked layout; 2 and 3
// fp32 copies of bf16 activations (and results) for the fp32 kernels, 4 a widened bf16 weight
// (conv2d_forward / backward on Act).
float* scratch(int which, size_t bytes) {
  static std::vector<float> areas[5];
  return detail::grown(areas[which], (bytes + sizeof(float) - 1) / sizeof(float));
}

// The caller's NHWC tensor `data` as the primitive wants it (`want`): the same memory when the
// layouts agree, else a reorder into scratch area `which`.
memory as_layout(const memory::desc& user, const memory::desc& want, const void* data, int which) {
  memory in(user, engine(), const_cast<void*>(data));
  if (user == want) return in;
  memory out(want, engine(), scratch(which, want.get_size()));
  dnnl::reorder(in, out).execute(stream(), in, out);
  return out;
}

// Where the primitive writes a result the caller wants in NHWC at `data`.
memory output_in(const memory::desc& user, const memory::desc& have, void* data, int which) {
  return user == have ? memory(user, engine(), data) : memory(have, engine(), scratch(which, have.get_size()));
}

void copy_out(const memory& result, const memory::desc& user, void* data) {
  if (result.get_desc() == user) return;
  memory out(user, engine(), data);
  memory in = result;
  dnnl::reorder(in, out).execute(stream(), in, out);
}

// The user's OIHW weights (fp32, or the bf16 working copy: Backend::conv2d_filter) in the layout
// and type `target` holds (a plain copy when they agree).
memory& weights_for(const Conv2dShape& s, ConstAct weight, memory& target) {
  const dt type = weight.bf16() ? dt::bf16 : dt::f32;
  memory user(weight_desc(s, tag::oihw, type), engine(), const_cast<void*>(weight.data));
  dnnl::reorder(user, target).execute(stream(), user, target);
  return target;
}

// In bf16 every layer with oneDNN bf16 kernels runs on them (conv2d.h): the fp32 kernels below
// take only the others.
bool fp32_kernels(const Conv2dShape& s) {
  return !chosen_algorithms().bf16 || !entry_for(s).bf16;
}
bool by_winograd(const Conv2dShape& s) {
  return fp32_kernels(s) && chosen_algorithms().winograd && winograd_applies(s);
}
// Below winograd_applies' 32 tiles the weight gradient alone still gains from 16 up: its
// transforms scale with the tiles, not with the 36 C K transformed filters that make the other
// two passes lose (ResNet-50's 7x7x512 layers at batch 4 on 2 AVX-512 cores, conv_bench: 1.4x
// the direct pass).
bool by_winograd_weights(const Conv2dShape& s) {
  return fp32_kernels(s) && chosen_algorithms().winograd && winograd_weights_applies(s);
}
bool by_gemm(const Conv2dShape& s) {
  return fp32_kernels(s) && chosen_algorithms().gemm && conv2d_1x1_fits(s);
}
// In bf16, the 1x1 layers run as the linear layers' bf16 products (matmul_bf16.h: the (K, C)
// weight is the (OC, C) one there, the M = N*P*Q output pixels the rows; a strided layer's
// input pixels under them gathered first, and its input gradient scattered back): oneDNN 2.6's
// jit bf16 1x1 convolution took their weight gradient at a few per cent of the AMX peak
// (ResNet-50, batch 8, ONEDNN_VERBOSE), its brgemm matmul runs them near it
// (docs/performance.md).
bool by_bf16_matmul(const Conv2dShape& s) {
  return chosen_algorithms().bf16 && chosen_algorithms().gemm && conv2d_1x1_fits(s);
}
int pixels(const Conv2dShape& s) { return static_cast<int>(s.out_size() / s.K); }

void conv1x1_bf16_forward(Act out, ConstAct inp, ConstAct weight, const Conv2dShape& s) {
  matmul_forward_bf16(out, conv2d_1x1_rows(inp, s), weight, nullptr, pixels(s), s.C, s.K);
}

// dinp = the rows' gradient at the pixels the outputs read, 0 elsewhere; dweight +=.
void conv1x1_bf16_backward(float* dinp, float* dweight, ConstAct dout, ConstAct inp,
                           ConstAct weight, const Conv2dShape& s) {
  static std::vector<float> rows_grad;
  const long M = pixels(s);
  float* dx = dinp;
  if (dinp != nullptr && s.stride > 1) {
    const size_t n = static_cast<size_t>(M) * s.C;
    if (rows_grad.size() < n) rows_grad.resize(n);
    dx = rows_grad.data();
  }
  matmul_backward_bf16(dx, dweight, nullptr, dout, conv2d_1x1_rows(inp, s), weight,
                       static_cast<int>(M), s.C, s.K);
  if (dx != dinp) conv2d_1x1_scatter(dinp, dx, s);
}

bool by_im2col_weights(const Conv2dShape& s) {
  return fp32_kernels(s) && chosen_algorithms().gemm && conv2d_im2col_weights_applies(s);
}

}  // namespace

ConvAlgorithms conv_algorithms_from_env(const char* value) {
  const std::string v = value == nullptr ? "" : value;
  if (v.empty() || v == "auto") return {true, true};
  if (v == "winograd") return {true, false};
  if (v == "gemm") return {false, true};
  if (v == "direct") return {false, false};
  throw RunError("SINGULARITY_CONV=" + v +
                 " is not a convolution choice: use auto (the default), winograd, gemm or "
                 "direct, or unset it");
}

ConvAlgorithms conv_algorithms() { return chosen_algorithms(); }
bool conv2d_runs_bf16(const Conv2dShape& s) {
  return chosen_algorithms().bf16 && entry_for(s).bf16;
}
void set_conv_algorithms(const ConvAlgorithms& chosen) { chosen_algorithms() = chosen; }

void conv2d_forward(float* out, const float* inp, const float* weight, const Conv2dShape& s) {
  if (by_bf16_matmul(s)) return conv1x1_bf16_forward(out, inp, weight, s);
  if (by_winograd(s)) {
    kernels().conv2d_winograd_forward(out, inp, weight, s);
    return;
  }
  if (by_gemm(s)) {
    conv2d_1x1_forward(out, inp, weight, s);
    return;
  }
  ConvEntry& c = entry_for(s);
  checked("convolution forward", [&] {
    memory src = as_layout(c.user_src, c.fwd_pd.src_desc(), inp, 0);
    memory dst = output_in(c.user_dst, c.fwd_pd.dst_desc(), out, 1);
    const memory& w = weights_for(s, weight, c.fwd_weights);
    c.fwd.execute(stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, dst}});
    copy_out(dst, c.user_dst, out);
    stream().wait();
  });
}

namespace {

void backward_data(ConvEntry& c, float* dinp, const memory& diff_dst, ConstAct weight,
                   const Conv2dShape& s) {
  memory diff_src = output_in(c.user_src, c.bwd_data_pd.diff_src_desc(), dinp, 1);
  const memory& w = weights_for(s, weight, c.bwd_data_weights);
  c.bwd_data.execute(stream(), {{DNNL_ARG_DIFF_DST, diff_dst},
                                {DNNL_ARG_WEIGHTS, w},
                                {DNNL_ARG_DIFF_SRC, diff_src}});
  copy_out(diff_src, c.user_src, dinp);
  stream().wait();
}

void backward_weights(ConvEntry& c, float* dweight, const memory& diff_dst, const memory::desc& user_src,
                      const void* inp, const Conv2dShape& s) {
  // The input goes to scratch area 1: area 0 may hold diff_dst.
  memory src = as_layout(user_src, c.bwd_weights_pd.src_desc(), inp, 1);
  c.bwd_weights.execute(stream(), {{DNNL_ARG_SRC, src},
                                   {DNNL_ARG_DIFF_DST, diff_dst},
                                   {DNNL_ARG_DIFF_WEIGHTS, c.diff_weights}});
  stream().wait();
  reorder_add(c.diff_weights, memory(weight_desc(s, tag::oihw), engine(), dweight));
}

// oneDNN 2.6's jit_1x1 backward-weights kernel gets a strided 1x1 convolution wrong when C is
// below the SIMD width (measured: C <= 5 on AVX2, errors of order 1), so those weight gradients
// are always the product, SINGULARITY_CONV=direct or not.
bool gemm_weights(const Conv2dShape& s) { return conv2d_1x1_fits(s) && s.stride > 1; }

// The weight gradient on the kernel that takes it off oneDNN's direct pass, if one does (the
// strided 1x1 product above, Winograd's, im2col's); false, having done nothing, where none does.
bool weights_elsewhere(float* dweight, const float* dout, const float* inp, const Conv2dShape& s) {
  if (gemm_weights(s)) {
    conv2d_1x1_backward_weights(dweight, dout, inp, s);
  } else if (by_winograd_weights(s)) {
    kernels().conv2d_winograd_backward_weights(dweight, dout, inp, s);
  } else if (by_im2col_weights(s)) {
    conv2d_im2col_backward_weights(dweight, dout, inp, s);
  } else {
    return false;
  }
  return true;
}

}  // namespace

void conv2d_backward_data(float* dinp, const float* dout, const float* weight,
                          const Conv2dShape& s) {
  conv2d_backward(dinp, nullptr, dout, nullptr, weight, s);
}

void conv2d_backward_weights(float* dweight, const float* dout, const float* inp,
                             const Conv2dShape& s) {
  conv2d_backward(nullptr, dweight, dout, inp, nullptr, s);
}

void conv2d_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                     const float* weight, const Conv2dShape& s) {
  if (by_bf16_matmul(s) && dweight != nullptr) {
    return conv1x1_bf16_backward(dinp, dweight, dout, inp, weight, s);
  }
  if (by_winograd(s)) {
    const KernelTable& k = kernels();
    if (dweight != nullptr) k.conv2d_winograd_backward_weights(dweight, dout, inp, s);
    if (dinp != nullptr) k.conv2d_winograd_backward_data(dinp, dout, weight, s);
    return;
  }
  if (by_gemm(s)) {
    if (dweight != nullptr) conv2d_1x1_backward_weights(dweight, dout, inp, s);
    if (dinp != nullptr) conv2d_1x1_backward_data(dinp, dout, weight, s);
    return;
  }
  ConvEntry& c = entry_for(s);
  checked("convolution backward", [&] {
    // The forward's layouts are the backward passes' too, so dout is reordered once for both
    // (and not at all when only the weight gradient is wanted and it runs elsewhere).
    const bool weights_done = dweight != nullptr && weights_elsewhere(dweight, dout, inp, s);
    const bool weights_here = dweight != nullptr && !weights_done;
    memory diff_dst;
    if (dinp != nullptr || weights_here) {
      diff_dst = as_layout(c.user_dst, c.bwd_data_pd.diff_dst_desc(), dout, 0);
    }
    if (weights_here) backward_weights(c, dweight, diff_dst, c.user_src, inp, s);
    if (dinp != nullptr) backward_data(c, dinp, diff_dst, weight, s);
  });
}

namespace {

// An fp32 view of an activation: itself, or a copy widened into scratch area `which` (exact).
const float* widened(ConstAct a, long n, int which) {
  if (!a.bf16()) return a.f32();
  float* copy = scratch(which, static_cast<size_t>(n) * sizeof(float));
  widen_from_bf16(copy, a.b16(), n);
  return copy;
}

void require_uniform(ConstAct a, ConstAct b, const char* op) {
  if (a.dtype != b.dtype) {
    throw RunError(std::string(op) + ": activations stored as " + dtype_name(a.dtype) + " and " +
                   dtype_name(b.dtype) + " in one call; the CPU convolution takes one type");
  }
}

}  // namespace

void conv2d_forward(Act out, ConstAct inp, ConstAct weight, const Conv2dShape& s) {
  require_uniform(out, inp, "conv2d_forward");
  if (out.bf16() && by_bf16_matmul(s)) return conv1x1_bf16_forward(out, inp, weight, s);
  if (!out.bf16()) return conv2d_forward(out.f32(), inp.f32(), widened(weight, s.weight_size(), 4), s);
  if (!conv2d_runs_bf16(s)) {
    const float* w = widened(weight, s.weight_size(), 4);
    // The fp32 kernels on the widened input, into scratch, rounded into out.
    float* result = scratch(3, static_cast<size_t>(s.out_size()) * sizeof(float));
    conv2d_forward(result, widened(inp, s.in_size(), 2), w, s);
    round_to_bf16(out.b16(), result, s.out_size());
    return;
  }
  ConvEntry& c = entry_for(s);
  checked("convolution forward", [&] {
    const memory::desc user_src = with_type(c.user_src, dt::bf16);
    const memory::desc user_dst = with_type(c.user_dst, dt::bf16);
    memory src = as_layout(user_src, c.fwd_pd.src_desc(), inp.data, 0);
    memory dst = output_in(user_dst, c.fwd_pd.dst_desc(), out.data, 1);
    const memory& wt = weights_for(s, weight, c.fwd_weights);
    c.fwd.execute(stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wt}, {DNNL_ARG_DST, dst}});
    copy_out(dst, user_dst, out.data);  // the fp32 result rounded to bf16 by the reorder
    stream().wait();
  });
}

void conv2d_backward(float* dinp, float* dweight, ConstAct dout, ConstAct inp, ConstAct weight,
                     const Conv2dShape& s) {
  if (inp) require_uniform(dout, inp, "conv2d_backward");
  if (dout.bf16() && by_bf16_matmul(s) && dweight != nullptr) {
    return conv1x1_bf16_backward(dinp, dweight, dout, inp, weight, s);
  }
  const auto w32 = [&] { return weight ? widened(weight, s.weight_size(), 4) : nullptr; };
  if (!dout.bf16()) return conv2d_backward(dinp, dweight, dout.f32(), inp.f32(), w32(), s);
  if (!conv2d_runs_bf16(s)) {
    const float* w = w32();
    const float* x = inp ? widened(inp, s.in_size(), 2) : nullptr;
    const float* dy = widened(dout, s.out_size(), 3);
    conv2d_backward(dinp, dweight, dy, x, w, s);
    return;
  }
  ConvEntry& c = entry_for(s);
  checked("convolution backward", [&] {
    const bool weights_here = dweight != nullptr && !gemm_weights(s);
    if (dweight != nullptr && !weights_here) {
      // The strided 1x1 weight gradient stays the fp32 product (gemm_weights), on widened copies.
      conv2d_1x1_backward_weights(dweight, widened(dout, s.out_size(), 2),
                                  widened(inp, s.in_size(), 3), s);
    }
    if (dinp == nullptr && !weights_here) return;
    const memory::desc user_src = with_type(c.user_src, dt::bf16);
    const memory::desc user_dst = with_type(c.user_dst, dt::bf16);
    memory diff_dst = as_layout(user_dst, c.bwd_data_pd.diff_dst_desc(), dout.data, 0);
    if (weights_here) backward_weights(c, dweight, diff_dst, user_src, inp.data, s);
    if (dinp != nullptr) backward_data(c, dinp, diff_dst, weight, s);
  });
}

}  // namespace sg::cpu
