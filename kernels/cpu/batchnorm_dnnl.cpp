// The fused batch norm (training forward and backward) through oneDNN, on an (M, C) matrix
// described to oneDNN as NHWC with H = W = 1, with or without the following ReLU fused in
// (fuse_norm_relu; its workspace is the caller's relu_mask). See kernels/batchnorm.h.
#include <array>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "dnnl_context.h"
#include "kernels/batchnorm.h"
#include "util/error.h"

namespace sg::cpu {
namespace {

using namespace dnnl_detail;
using dnnl::memory;

using Key = std::array<long, 4>;  // M, C, eps bits, ReLU fused

struct BatchnormEntry {
  dnnl::batch_normalization_forward::primitive_desc fwd_pd;
  dnnl::batch_normalization_backward::primitive_desc bwd_pd;
  dnnl::batch_normalization_forward fwd;
  dnnl::batch_normalization_backward bwd;
};

BatchnormEntry& entry_for(long M, int C, float eps, bool relu) {
  static PrimitiveCache<Key, BatchnormEntry> cache;
  long eps_bits = 0;
  static_assert(sizeof(float) <= sizeof(long));
  std::memcpy(&eps_bits, &eps, sizeof eps);
  return cache.get({M, C, eps_bits, relu ? 1 : 0}, [&](const Key&) {
    return checked("batch norm setup", [&] {
      const memory::desc data({M, C, 1, 1}, memory::data_type::f32, memory::format_tag::nhwc);
      auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
      if (relu) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
      dnnl::batch_normalization_forward::primitive_desc fwd_pd(
          {dnnl::prop_kind::forward_training, data, eps, flags}, engine());
      dnnl::batch_normalization_backward::primitive_desc bwd_pd(
          {dnnl::prop_kind::backward, data, data, eps, flags}, engine(), fwd_pd);
      return BatchnormEntry{fwd_pd, bwd_pd, dnnl::batch_normalization_forward(fwd_pd),
                            dnnl::batch_normalization_backward(bwd_pd)};
    });
  });
}

memory channel_memory(const float* p, int C) {
  return memory({{C}, memory::data_type::f32, memory::format_tag::a}, engine(),
                const_cast<float*>(p));
}

// One forward / backward call; relu_mask is the workspace when the ReLU is fused (else null).
void forward(float* out, float* mean, float* var, unsigned char* relu_mask, const float* inp,
             const float* gamma, const float* beta, long M, int C, float eps) {
  BatchnormEntry& b = entry_for(M, C, eps, relu_mask != nullptr);
  checked("batch norm forward", [&] {
    auto& e = engine();
    memory src(b.fwd_pd.src_desc(), e, const_cast<float*>(inp));
    memory dst(b.fwd_pd.dst_desc(), e, out);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src},
                                         {DNNL_ARG_DST, dst},
                                         {DNNL_ARG_SCALE, channel_memory(gamma, C)},
                                         {DNNL_ARG_SHIFT, channel_memory(beta, C)},
                                         {DNNL_ARG_MEAN, channel_memory(mean, C)},
                                         {DNNL_ARG_VARIANCE, channel_memory(var, C)}};
    if (relu_mask != nullptr) {
      args.insert({DNNL_ARG_WORKSPACE, memory(b.fwd_pd.workspace_desc(), e, relu_mask)});
    }
    b.fwd.execute(stream(), args);
    stream().wait();
  });
}

void backward(float* dinp, float* dgamma, float* dbeta, const float* dout, const float* inp,
              const unsigned char* relu_mask, const float* mean, const float* var,
              const float* gamma, long M, int C, float eps) {
  BatchnormEntry& b = entry_for(M, C, eps, relu_mask != nullptr);
  std::vector<float> diff_scale(static_cast<size_t>(C)), diff_shift(static_cast<size_t>(C));
  // oneDNN 2.6's backward asks for the shift too, although the gradients do not depend on it.
  std::vector<float> unused_shift(static_cast<size_t>(C), 0.0f);
  checked("batch norm backward", [&] {
    auto& e = engine();
    memory src(b.bwd_pd.src_desc(), e, const_cast<float*>(inp));
    memory diff_dst(b.bwd_pd.diff_dst_desc(), e, const_cast<float*>(dout));
    memory diff_src(b.bwd_pd.diff_src_desc(), e, dinp);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src},
        {DNNL_ARG_DIFF_DST, diff_dst},
        {DNNL_ARG_DIFF_SRC, diff_src},
        {DNNL_ARG_MEAN, channel_memory(mean, C)},
        {DNNL_ARG_VARIANCE, channel_memory(var, C)},
        {DNNL_ARG_SCALE, channel_memory(gamma, C)},
        {DNNL_ARG_SHIFT, channel_memory(unused_shift.data(), C)},
        {DNNL_ARG_DIFF_SCALE, channel_memory(diff_scale.data(), C)},
        {DNNL_ARG_DIFF_SHIFT, channel_memory(diff_shift.data(), C)}};
    if (relu_mask != nullptr) {
      args.insert({DNNL_ARG_WORKSPACE, memory(b.bwd_pd.workspace_desc(), e,
                                              const_cast<unsigned char*>(relu_mask))});
    }
    b.bwd.execute(stream(), args);
    stream().wait();
  });
  for (int c = 0; c < C; ++c) {
    dgamma[c] += diff_scale[static_cast<size_t>(c)];
    dbeta[c] += diff_shift[static_cast<size_t>(c)];
  }
}

}  // namespace

void batchnorm_forward_train(float* out, float* mean, float* var, const float* inp,
                             const float* gamma, const float* beta, long M, int C, float eps) {
  forward(out, mean, var, nullptr, inp, gamma, beta, M, C, eps);
}

void batchnorm_backward(float* dinp, float* dgamma, float* dbeta, const float* dout,
                        const float* inp, const float* mean, const float* var, const float* gamma,
                        long M, int C, float eps) {
  backward(dinp, dgamma, dbeta, dout, inp, nullptr, mean, var, gamma, M, C, eps);
}

size_t batchnorm_relu_mask_bytes(long M, int C) {
  // The workspace does not depend on eps; any value finds the primitive.
  return entry_for(M, C, 1e-5f, true).fwd_pd.workspace_desc().get_size();
}

void batchnorm_relu_forward_train(float* out, float* mean, float* var, unsigned char* relu_mask,
                                  const float* inp, const float* gamma, const float* beta, long M,
                                  int C, float eps) {
  if (relu_mask == nullptr) throw RunError("batchnorm_relu_forward_train: no relu_mask");
  forward(out, mean, var, relu_mask, inp, gamma, beta, M, C, eps);
}

void batchnorm_relu_backward(float* dinp, float* dgamma, float* dbeta, const float* dout,
                             const float* inp, const unsigned char* relu_mask, const float* mean,
                             const float* var, const float* gamma, long M, int C, float eps) {
  if (relu_mask == nullptr) throw RunError("batchnorm_relu_backward: no relu_mask");
  backward(dinp, dgamma, dbeta, dout, inp, relu_mask, mean, var, gamma, M, C, eps);
}

}  // namespace sg::cpu
