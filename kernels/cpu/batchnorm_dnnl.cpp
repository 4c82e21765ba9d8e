// The fused batch norm (training forward and backward) through oneDNN, on an (M, C) matrix
// described to oneDNN as NHWC with H = W = 1. See kernels/batchnorm.h.
#include <array>
#include <cstring>
#include <vector>

#include "dnnl_context.h"
#include "kernels/batchnorm.h"

namespace sg::cpu {
namespace {

using namespace dnnl_detail;
using dnnl::memory;

using Key = std::array<long, 3>;  // M, C, eps bits

struct BatchnormEntry {
  dnnl::batch_normalization_forward::primitive_desc fwd_pd;
  dnnl::batch_normalization_backward::primitive_desc bwd_pd;
  dnnl::batch_normalization_forward fwd;
  dnnl::batch_normalization_backward bwd;
};

BatchnormEntry& entry_for(long M, int C, float eps) {
  static PrimitiveCache<Key, BatchnormEntry> cache;
  long eps_bits = 0;
  static_assert(sizeof(float) <= sizeof(long));
  std::memcpy(&eps_bits, &eps, sizeof eps);
  return cache.get({M, C, eps_bits}, [&](const Key&) {
    return checked("batch norm setup", [&] {
      const memory::desc data({M, C, 1, 1}, memory::data_type::f32, memory::format_tag::nhwc);
      const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
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

}  // namespace

void batchnorm_forward_train(float* out, float* mean, float* var, const float* inp,
                             const float* gamma, const float* beta, long M, int C, float eps) {
  BatchnormEntry& b = entry_for(M, C, eps);
  checked("batch norm forward", [&] {
    auto& e = engine();
    memory src(b.fwd_pd.src_desc(), e, const_cast<float*>(inp));
    memory dst(b.fwd_pd.dst_desc(), e, out);
    b.fwd.execute(stream(), {{DNNL_ARG_SRC, src},
                             {DNNL_ARG_DST, dst},
                             {DNNL_ARG_SCALE, channel_memory(gamma, C)},
                             {DNNL_ARG_SHIFT, channel_memory(beta, C)},
                             {DNNL_ARG_MEAN, channel_memory(mean, C)},
                             {DNNL_ARG_VARIANCE, channel_memory(var, C)}});
    stream().wait();
  });
}

void batchnorm_backward(float* dinp, float* dgamma, float* dbeta, const float* dout,
                        const float* inp, const float* mean, const float* var, const float* gamma,
                        long M, int C, float eps) {
  BatchnormEntry& b = entry_for(M, C, eps);
  std::vector<float> diff_scale(static_cast<size_t>(C)), diff_shift(static_cast<size_t>(C));
  // oneDNN 2.6's backward asks for the shift too, although the gradients do not depend on it.
  std::vector<float> unused_shift(static_cast<size_t>(C), 0.0f);
  checked("batch norm backward", [&] {
    auto& e = engine();
    memory src(b.bwd_pd.src_desc(), e, const_cast<float*>(inp));
    memory diff_dst(b.bwd_pd.diff_dst_desc(), e, const_cast<float*>(dout));
    memory diff_src(b.bwd_pd.diff_src_desc(), e, dinp);
    b.bwd.execute(stream(), {{DNNL_ARG_SRC, src},
                             {DNNL_ARG_DIFF_DST, diff_dst},
                             {DNNL_ARG_DIFF_SRC, diff_src},
                             {DNNL_ARG_MEAN, channel_memory(mean, C)},
                             {DNNL_ARG_VARIANCE, channel_memory(var, C)},
                             {DNNL_ARG_SCALE, channel_memory(gamma, C)},
                             {DNNL_ARG_SHIFT, channel_memory(unused_shift.data(), C)},
                             {DNNL_ARG_DIFF_SCALE, channel_memory(diff_scale.data(), C)},
                             {DNNL_ARG_DIFF_SHIFT, channel_memory(diff_shift.data(), C)}});
    stream().wait();
  });
  for (int c = 0; c < C; ++c) {
    dgamma[c] += diff_scale[static_cast<size_t>(c)];
    dbeta[c] += diff_shift[static_cast<size_t>(c)];
  }
}

}  // namespace sg::cpu
