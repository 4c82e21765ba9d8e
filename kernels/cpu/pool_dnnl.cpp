// Max pooling on the CPU through oneDNN (NHWC). The workspace oneDNN's forward writes for its
// backward lives in the caller's argmax buffer, whose (N,P,Q,C) 32-bit slots are at least as
// large (checked). See kernels/pool.h.
#include <array>

#include "dnnl_context.h"
#include "kernels/pool.h"
#include "util/error.h"

namespace sg::cpu {
namespace {

using namespace dnnl_detail;
using dnnl::memory;

using Key = std::array<int, 8>;

struct PoolEntry {
  dnnl::pooling_forward::primitive_desc fwd_pd;
  dnnl::pooling_backward::primitive_desc bwd_pd;
  dnnl::pooling_forward fwd;
  dnnl::pooling_backward bwd;
};

PoolEntry& entry_for(const Pool2dShape& s) {
  static PrimitiveCache<Key, PoolEntry> cache;
  return cache.get({s.N, s.H, s.W, s.C, s.R, s.S, s.stride, s.pad}, [&](const Key&) {
    return checked("max pool setup", [&] {
      const memory::desc src({s.N, s.C, s.H, s.W}, memory::data_type::f32, memory::format_tag::nhwc);
      const memory::desc dst({s.N, s.C, s.P(), s.Q()}, memory::data_type::f32,
                             memory::format_tag::nhwc);
      const memory::dims strides{s.stride, s.stride}, kernel{s.R, s.S}, pad{s.pad, s.pad};
      dnnl::pooling_forward::primitive_desc fwd_pd(
          {dnnl::prop_kind::forward_training, dnnl::algorithm::pooling_max, src, dst, strides,
           kernel, pad, pad},
          engine());
      dnnl::pooling_backward::primitive_desc bwd_pd(
          {dnnl::algorithm::pooling_max, src, dst, strides, kernel, pad, pad}, engine(), fwd_pd);
      if (fwd_pd.workspace_desc().get_size() > static_cast<size_t>(s.out_size()) * 4) {
        throw RunError("oneDNN max pooling wants a larger workspace than the argmax buffer");
      }
      return PoolEntry{fwd_pd, bwd_pd, dnnl::pooling_forward(fwd_pd), dnnl::pooling_backward(bwd_pd)};
    });
  });
}

}  // namespace

void maxpool_forward(float* out, int32_t* argmax, const float* inp, const Pool2dShape& s) {
  PoolEntry& p = entry_for(s);
  checked("max pool forward", [&] {
    auto& e = engine();
    memory src(p.fwd_pd.src_desc(), e, const_cast<float*>(inp));
    memory dst(p.fwd_pd.dst_desc(), e, out);
    memory workspace(p.fwd_pd.workspace_desc(), e, argmax);
    p.fwd.execute(stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_WORKSPACE, workspace}});
    stream().wait();
  });
}

void maxpool_backward(float* dinp, const float* dout, const int32_t* argmax, const Pool2dShape& s) {
  PoolEntry& p = entry_for(s);
  checked("max pool backward", [&] {
    auto& e = engine();
    memory diff_dst(p.bwd_pd.diff_dst_desc(), e, const_cast<float*>(dout));
    memory diff_src(p.bwd_pd.diff_src_desc(), e, dinp);
    memory workspace(p.fwd_pd.workspace_desc(), e, const_cast<int32_t*>(argmax));
    p.bwd.execute(stream(), {{DNNL_ARG_DIFF_DST, diff_dst},
                             {DNNL_ARG_DIFF_SRC, diff_src},
                             {DNNL_ARG_WORKSPACE, workspace}});
    stream().wait();
  });
}

}  // namespace sg::cpu
