// cuDNN's fused SDPA through the cudnn-frontend graph API; see cudnn_attention.h for the layout
// and the contract. The one translation unit of the module that includes the frontend, compiled
// by the host compiler (no device code here).
#include "kernels/cuda/cudnn_attention.h"

#include <cudnn_frontend.h>

#include <cmath>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "util/error.h"

namespace sg::cuda {
namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

std::string describe(fe::error_t& error) {
  std::string message = error.get_message();
  if (message.empty()) {
    message = "cudnn_frontend error code " + std::to_string(static_cast<int>(error.get_code()));
  }
  return message;
}

// A frontend call that must succeed (running a built graph): RunError with the call and where.
void check_frontend(fe::error_t error, const char* call, const char* file, int line) {
  if (error.is_good()) return;
  throw_call_error("cudnn-frontend", call, describe(error), file, line);
}
#define SG_CUDNN_FE_CHECK(call) check_frontend((call), #call, __FILE__, __LINE__)

// A frontend call while building a graph: a failure means "cuDNN does not run this", and the
// caller falls back; the message keeps the step and the frontend's reason.
bool build_step(fe::error_t error, const char* step, std::string* why_not) {
  if (error.is_good()) return true;
  *why_not = std::string(step) + ": " + describe(error);
  return false;
}

// The deterministic backward option appeared in a later frontend than the graph API itself.
template <class Attributes>
constexpr bool kHasDeterministic =
    requires(Attributes a) { a.set_deterministic_algorithm(true); };

// Asks the forward for the statistics the backward takes: set_generate_stats in newer frontends,
// set_is_inference(false) (deprecated there) in older ones.
template <class Attributes>
void request_stats(Attributes& attributes) {
  if constexpr (requires(Attributes a) { a.set_generate_stats(true); }) {
    attributes.set_generate_stats(true);
  } else {
    attributes.set_is_inference(false);
  }
}

// Asks for the deterministic algorithm where the frontend has the option (a template, so that
// the call is not compiled against a frontend without it).
template <class Attributes>
void request_deterministic(Attributes& attributes) {
  if constexpr (kHasDeterministic<Attributes>) attributes.set_deterministic_algorithm(true);
}

// Q, K or V inside qkv (B, T, 3C) as (B, NH, T, HS); which third is the pointer's offset (the
// variant pack), not the descriptor's.
TensorPtr qkv_tensor(fe::graph::Graph& g, const char* name, const CudnnAttention::Shape& s) {
  const int64_t row = 3 * int64_t{s.NH} * s.HS;
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_dim({s.B, s.NH, s.T, s.HS})
                      .set_stride({s.T * row, s.HS, row, 1}));
}

// out or dout (B, T, C) as (B, NH, T, HS).
void set_out_layout(fe::graph::Tensor_attributes& t, const CudnnAttention::Shape& s) {
  const int64_t C = int64_t{s.NH} * s.HS;
  t.set_dim({s.B, s.NH, s.T, s.HS}).set_stride({s.T * C, s.HS, C, 1});
}

// The per-query statistics (B, NH, T, 1), fp32.
void set_stats_layout(fe::graph::Tensor_attributes& t, const CudnnAttention::Shape& s) {
  t.set_dim({s.B, s.NH, s.T, 1})
      .set_stride({int64_t{s.NH} * s.T, s.T, 1, 1})
      .set_data_type(fe::DataType_t::FLOAT);
}

std::shared_ptr<fe::graph::Graph> new_graph(const CudnnAttention::Shape& s) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(s.io == CudnnAttention::Io::Bf16 ? fe::DataType_t::BFLOAT16
                                                       : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

// validate, lower to cuDNN's backend, pick plans by heuristics, build them; the workspace size.
bool build(fe::graph::Graph& g, cudnnHandle_t handle, int64_t* workspace, std::string* why_not) {
  return build_step(g.validate(), "validate", why_not) &&
         build_step(g.build_operation_graph(handle), "build_operation_graph", why_not) &&
         build_step(g.create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans",
                    why_not) &&
         build_step(g.check_support(handle), "check_support", why_not) &&
         build_step(g.build_plans(handle), "build_plans", why_not) &&
         build_step(g.get_workspace_size(*workspace), "get_workspace_size", why_not);
}

float attention_scale(int HS) { return 1.0f / std::sqrt(static_cast<float>(HS)); }

// make() builds an entry; parts of the frontend report a refusal by throwing
// (cudnn_frontend::cudnnException, a std::runtime_error) instead of returning it.
template <class Make>
auto build_entry(Make make) -> decltype(make()) {
  try {
    return make();
  } catch (const std::exception& e) {
    decltype(make()) refused;
    refused.why_not = std::string("the frontend threw: ") + e.what();
    return refused;
  }
}

}  // namespace

struct CudnnAttention::Graphs {
  struct Forward {
    std::shared_ptr<fe::graph::Graph> graph;
    TensorPtr q, k, v, o, stats;
    int64_t workspace = 0;
  };
  struct Backward {
    std::shared_ptr<fe::graph::Graph> graph;
    TensorPtr q, k, v, o, dout, stats, dq, dk, dv;
    int64_t workspace = 0;
  };
  // A built graph, or why there is none.
  template <class G>
  struct Entry {
    std::optional<G> built;
    std::string why_not;
  };

  cudnnHandle_t handle = nullptr;
  std::map<Shape, Entry<Forward>> forward;
  std::map<Shape, Entry<Backward>> backward;

  Entry<Forward> make_forward(const Shape& s);
  Entry<Backward> make_backward(const Shape& s);
};

CudnnAttention::Graphs::Entry<CudnnAttention::Graphs::Forward>
CudnnAttention::Graphs::make_forward(const Shape& s) {
  Entry<Forward> entry;
  Forward f;
  f.graph = new_graph(s);
  fe::graph::Graph& g = *f.graph;
  f.q = qkv_tensor(g, "Q", s);
  f.k = qkv_tensor(g, "K", s);
  f.v = qkv_tensor(g, "V", s);
  auto options = fe::graph::SDPA_attributes()
                     .set_name("causal_sdpa")
                     .set_causal_mask(true)
                     .set_attn_scale(attention_scale(s.HS));
  request_stats(options);
  auto [o, stats] = g.sdpa(f.q, f.k, f.v, options);
  o->set_output(true);
  set_out_layout(*o, s);
  stats->set_output(true);
  set_stats_layout(*stats, s);
  f.o = o;
  f.stats = stats;
  if (build(g, handle, &f.workspace, &entry.why_not)) entry.built = std::move(f);
  return entry;
}

CudnnAttention::Graphs::Entry<CudnnAttention::Graphs::Backward>
CudnnAttention::Graphs::make_backward(const Shape& s) {
  Entry<Backward> entry;
  if (!has_deterministic_backward()) {
    entry.why_not = "cudnn-frontend " + frontend_version() +
                    " has no deterministic SDPA backward (set_deterministic_algorithm)";
    return entry;
  }
  Backward b;
  b.graph = new_graph(s);
  fe::graph::Graph& g = *b.graph;
  b.q = qkv_tensor(g, "Q", s);
  b.k = qkv_tensor(g, "K", s);
  b.v = qkv_tensor(g, "V", s);
  fe::graph::Tensor_attributes o_attributes, dout_attributes, stats_attributes;
  set_out_layout(o_attributes.set_name("O"), s);
  set_out_layout(dout_attributes.set_name("dO"), s);
  set_stats_layout(stats_attributes.set_name("stats"), s);
  b.o = g.tensor(o_attributes);
  b.dout = g.tensor(dout_attributes);
  b.stats = g.tensor(stats_attributes);
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("causal_sdpa_backward")
                     .set_causal_mask(true)
                     .set_attn_scale(attention_scale(s.HS));
  request_deterministic(options);  // no atomics in dQ: bitwise repeatable
  auto [dq, dk, dv] = g.sdpa_backward(b.q, b.k, b.v, b.o, b.dout, b.stats, options);
  // The gradients in dqkv's layout, the same strides as q, k, v in qkv.
  const int64_t row = 3 * int64_t{s.NH} * s.HS;
  for (const TensorPtr& t : {dq, dk, dv}) {
    t->set_output(true).set_dim({s.B, s.NH, s.T, s.HS}).set_stride({s.T * row, s.HS, row, 1});
  }
  b.dq = dq;
  b.dk = dk;
  b.dv = dv;
  if (build(g, handle, &b.workspace, &entry.why_not)) entry.built = std::move(b);
  return entry;
}

CudnnAttention::CudnnAttention(cudaStream_t stream)
    : stream_(stream), graphs_(std::make_unique<Graphs>()) {
  SG_CUDNN_CHECK(cudnnCreate(&graphs_->handle));
  const cudnnStatus_t status = cudnnSetStream(graphs_->handle, stream_);
  if (status != CUDNN_STATUS_SUCCESS) {
    cudnnDestroy(graphs_->handle);
    SG_CUDNN_CHECK(status);
  }
}

CudnnAttention::~CudnnAttention() {
  graphs_->forward.clear();  // the plans before the handle they were built with
  graphs_->backward.clear();
  cudnnDestroy(graphs_->handle);  // errors at exit (runtime unloading) are ignored
}

bool CudnnAttention::prepare(const Shape& s, Pass pass, std::string* why_not) {
  if (s.HS <= 0 || s.HS % 8 != 0 || s.HS > 128) {
    *why_not = "head size " + std::to_string(s.HS) + " is not a multiple of 8 up to 128";
    return false;
  }
  if (pass == Pass::Forward) {
    auto it = graphs_->forward.find(s);
    if (it == graphs_->forward.end()) {
      it = graphs_->forward.emplace(s, build_entry([&] { return graphs_->make_forward(s); })).first;
    }
    *why_not = it->second.why_not;
    return it->second.built.has_value();
  }
  auto it = graphs_->backward.find(s);
  if (it == graphs_->backward.end()) {
    it = graphs_->backward.emplace(s, build_entry([&] { return graphs_->make_backward(s); })).first;
  }
  *why_not = it->second.why_not;
  return it->second.built.has_value();
}

size_t CudnnAttention::workspace_bytes(const Shape& s, Pass pass) const {
  if (pass == Pass::Forward) {
    const auto it = graphs_->forward.find(s);
    if (it == graphs_->forward.end() || !it->second.built) {
      throw RunError("cuDNN attention: workspace of a forward graph that was not built");
    }
    return static_cast<size_t>(it->second.built->workspace);
  }
  const auto it = graphs_->backward.find(s);
  if (it == graphs_->backward.end() || !it->second.built) {
    throw RunError("cuDNN attention: workspace of a backward graph that was not built");
  }
  return static_cast<size_t>(it->second.built->workspace);
}

void CudnnAttention::forward(void* out, float* stats, const void* qkv, void* workspace,
                             const Shape& s) {
  const auto it = graphs_->forward.find(s);
  if (it == graphs_->forward.end() || !it->second.built) {
    throw RunError("cuDNN attention: forward of a shape that was not prepared");
  }
  const Graphs::Forward& f = *it->second.built;
  const int64_t C = int64_t{s.NH} * s.HS;
  auto* base = static_cast<unsigned char*>(const_cast<void*>(qkv));
  const size_t element = 2;  // bf16 and fp16
  std::unordered_map<TensorPtr, void*> pack = {
      {f.q, base}, {f.k, base + C * element}, {f.v, base + 2 * C * element},
      {f.o, out},  {f.stats, stats}};
  SG_CUDNN_FE_CHECK(f.graph->execute(graphs_->handle, pack, workspace));
}

void CudnnAttention::backward(void* dqkv, const void* dout, const void* qkv, const void* out,
                              const float* stats, void* workspace, const Shape& s) {
  const auto it = graphs_->backward.find(s);
  if (it == graphs_->backward.end() || !it->second.built) {
    throw RunError("cuDNN attention: backward of a shape that was not prepared");
  }
  const Graphs::Backward& b = *it->second.built;
  const int64_t C = int64_t{s.NH} * s.HS;
  const size_t element = 2;
  auto* base = static_cast<unsigned char*>(const_cast<void*>(qkv));
  auto* grad = static_cast<unsigned char*>(dqkv);
  std::unordered_map<TensorPtr, void*> pack = {
      {b.q, base},
      {b.k, base + C * element},
      {b.v, base + 2 * C * element},
      {b.o, const_cast<void*>(out)},
      {b.dout, const_cast<void*>(dout)},
      {b.stats, const_cast<float*>(stats)},
      {b.dq, grad},
      {b.dk, grad + C * element},
      {b.dv, grad + 2 * C * element}};
  SG_CUDNN_FE_CHECK(b.graph->execute(graphs_->handle, pack, workspace));
}

std::string CudnnAttention::frontend_version() {
  return std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_MINOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_PATCH_VERSION);
}

bool CudnnAttention::has_deterministic_backward() {
  return kHasDeterministic<fe::graph::SDPA_backward_attributes>;
}

}  // namespace sg::cuda
