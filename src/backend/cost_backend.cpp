// Counting the CUDA backend's work per op; see cost_backend.h. Each op's bytes are those its
// kernels read and write in kernels/cuda/ today (F = 4 for an fp32 tensor, es(x) for an
// activation: 2 when it is stored in bf16), its
// flops the products' (2 per multiply-add) or attention's; elementwise arithmetic is not
// counted (those ops are bound by their bytes). The comments name the kernels.
#include "backend/cost_backend.h"

#include <cstring>
#include <utility>

#include "util/error.h"

namespace sg {
namespace {

constexpr double F = 4;  // bytes of a float in device memory
constexpr double I = 4;  // bytes of an int32 (token ids, labels, argmax)

double d(long v) { return static_cast<double>(v); }
double es(ConstAct x) { return static_cast<double>(dtype_size(x.dtype)); }  // bytes an element

// Causal attention: query t attends to keys 0..t, T(T+1)/2 pairs a head; each pair is HS
// multiply-adds for the scores and HS for the weighted values (2 products, 2 flops each).
double attention_forward_flops(int B, int T, int C) {
  return 4.0 * B * (static_cast<double>(T) * (T + 1) / 2) * C;
}

}  // namespace

void CostBackend::reset_counts() {
  ops_.clear();
  index_.clear();
}

void CostBackend::count(const std::string& name, double bytes, double launches, CostKind kind,
                        double flops, bool operands16) {
  auto [it, added] = index_.emplace(name, ops_.size());
  if (added) {
    OpCost op;
    op.name = name;
    op.kind = kind;
    op.reduced = kind != CostKind::Memory && reduced();
    op.fp32_operands =
        (kind == CostKind::Matrix || kind == CostKind::Convolution) && reduced() && !operands16;
    ops_.push_back(op);
  }
  OpCost& op = ops_[it->second];
  op.bytes += bytes;
  op.flops += flops;
  op.launches += launches;
  ++op.calls;
}

void CostBackend::set_precision(Precision precision) { precision_ = precision; }

bool CostBackend::sdpa(int head_size) const {
  return reduced() && head_size % 8 == 0 && head_size <= 128;
}

// --- memory ------------------------------------------------------------------------------------

void* CostBackend::allocate(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  void* p = reinterpret_cast<void*>(next_address_);
  next_address_ += rounded;
  sizes_[p] = rounded;
  allocated_ += rounded;
  peak_ = std::max(peak_, allocated_);
  return p;
}
void CostBackend::deallocate(void* ptr) noexcept {
  const auto it = sizes_.find(ptr);
  if (it == sizes_.end()) return;
  allocated_ -= it->second;
  sizes_.erase(it);
}
void CostBackend::copy(void* /*dst*/, const void* /*src*/, size_t bytes) {
  count("copy", 2.0 * d(static_cast<long>(bytes)));
}
// Host transfers are not device-memory traffic; batches go through page-locked staging
// asynchronously (upload_batch), parameters once at start-up.
void CostBackend::copy_from_host(void*, const void*, size_t) {}
void CostBackend::copy_to_host(void* host_dst, const void*, size_t bytes) {
  std::memset(host_dst, 0, bytes);
}
void CostBackend::fill(const TensorView& t, double /*value*/) {
  count("fill", d(static_cast<long>(t.bytes())));
}

// --- linear algebra and elementwise --------------------------------------------------------------

void CostBackend::convert(Act out, ConstAct inp, long n) {
  count("convert", (es(inp) + es(out)) * d(n));
}
// A 16-bit GEMM's casts of its fp32 operands to bf16, per call: 4 bytes read and 2 written per
// element of each (x, elements) not already stored in bf16, one launch each; counted apart.
void CostBackend::count_casts(const char* name,
                              std::initializer_list<std::pair<ConstAct, double>> operands) {
  double bytes = 0, launches = 0;
  for (const auto& [x, n] : operands) {
    if (!x.bf16()) bytes += (F + 2) * n, launches += 1;
  }
  if (launches > 0) count(name, bytes, launches);
}
// cuBLASLt: out = inp @ W^T with the bias in the epilogue (cublaslt_gemm.h). With any operand
// stored in bf16 (an activation, the weights' working copy) it is a 16-bit GEMM: the others cast
// to bf16 first.
void CostBackend::matmul_forward(Act out, ConstAct inp, ConstAct weight, const float* bias, int N,
                                 int C, int OC) {
  const bool in16 = out.bf16() || inp.bf16() || weight.bf16();
  const double w = in16 ? 2 : F, x = in16 ? 2 : es(inp);
  const double bytes = w * d(OC) * C + x * d(N) * C + es(out) * d(N) * OC + (bias ? F * OC : 0);
  count("matmul_forward", bytes, 1, CostKind::Matrix, 2.0 * N * C * OC, in16);
  if (in16) count_casts("matmul_forward: bf16 casts", {{weight, d(OC) * C}, {inp, d(N) * C}});
}
// dinp = dout @ W; dweight += dout^T @ inp (beta 1: read and written, fp32); dbias: our column
// sums (matmul.cuh), partials then their sum.
void CostBackend::matmul_backward(Act dinp, float*, float* dbias, ConstAct dout, ConstAct inp,
                                  ConstAct weight, int N, int C, int OC) {
  const bool in16 = (dinp && dinp.bf16()) || dout.bf16() || inp.bf16() || weight.bf16();
  const double w = in16 ? 2 : F, g = in16 ? 2 : es(dout), x = in16 ? 2 : es(inp);
  double bytes = g * d(N) * OC + x * d(N) * C + 2.0 * F * OC * C;
  double flops = 2.0 * N * C * OC, launches = 1;
  if (dinp) {
    bytes += g * d(N) * OC + w * d(OC) * C + es(dinp) * d(N) * C;
    flops += 2.0 * N * C * OC;
    launches += 1;
  }
  count("matmul_backward", bytes, launches, CostKind::Matrix, flops, in16);
  if (in16) {
    count_casts("matmul_backward: bf16 casts",
                {{weight, d(OC) * C}, {dout, d(N) * OC}, {inp, d(N) * C}});
  }
  if (dbias != nullptr) count("matmul_backward: bias sums", es(dout) * d(N) * OC + 2.0 * F * OC, 2);
}
void CostBackend::gelu_forward(Act out, ConstAct inp, long n) {
  count("gelu_forward", (es(inp) + es(out)) * d(n));
}
void CostBackend::gelu_backward(Act dinp, ConstAct inp, ConstAct dout, long n) {
  count("gelu_backward", (es(inp) + es(dout) + es(dinp)) * d(n));
}
void CostBackend::relu_forward(Act out, ConstAct inp, long n) {
  count("relu_forward", (es(inp) + es(out)) * d(n));
}
void CostBackend::relu_backward(float*, ConstAct out, const float*, long n) {
  count("relu_backward", (2 * F + es(out)) * d(n));
}
void CostBackend::residual_forward(float*, const float*, const float*, long n) {
  count("residual_forward", 3 * F * d(n));
}
void CostBackend::add_inplace(float*, const float*, long n) { count("add_inplace", 3 * F * d(n)); }
void CostBackend::add_relu_backward(float*, const float*, ConstAct out, long n) {
  count("add_relu_backward", (3 * F + es(out)) * d(n));
}
void CostBackend::add_relu_inplace(Act out, ConstAct in, long n) {
  count("add_relu_inplace", (2 * es(out) + es(in)) * d(n));
}
void CostBackend::add_bias(float*, const float*, long N, long C) {
  count("add_bias", F * (2.0 * d(N) * d(C) + d(C)));
}
void CostBackend::scale(float*, float, long n) { count("scale", 2 * F * d(n)); }

// --- transformer ---------------------------------------------------------------------------------

void CostBackend::layernorm_forward(Act out, float*, float*, const float*, const float*,
                                    const float*, int N, int C) {
  count("layernorm_forward", (F + es(out)) * N * C + F * (2.0 * C + 2.0 * N));
}
// dinp += (read and written), dout and inp read; per-block partials of dweight, dbias, summed by
// a second kernel.
void CostBackend::layernorm_backward(float*, float*, float*, const float*, const float*,
                                     const float*, const float*, const float*, int N, int C) {
  count("layernorm_backward", F * (4.0 * N * C + 2.0 * N + 5.0 * C), 2);
}
AttentionStorage CostBackend::attention_storage(int B, int T, int NH) const {
  return attention_storage_for(BackendKind::Cuda, B, T, NH);
}
// fp32: our flash kernel reads qkv, writes out and the log-sum-exp. bf16/fp16: cuDNN's SDPA on
// 16-bit qkv and out (attention_op.cu): the activations themselves where they are stored in
// bf16, else 16-bit copies cast from and to fp32. A bf16-stored tensor on our fp32 kernels is
// widened into a copy (and out rounded back).
void CostBackend::attention_forward(Act out, float*, ConstAct qkv, int B, int T, int C, int NH) {
  const double n = d(B) * T * C, lse = F * B * NH * T;
  const double flops = attention_forward_flops(B, T, C);
  const bool fused = sdpa(C / NH);
  const double kernel_bytes = fused ? 2.0 : F;  // what the kernel reads and writes an element
  count("attention_forward", kernel_bytes * 4 * n + lse, 1, CostKind::Attention, flops);
  double copies = 0, launches = 0;
  if ((es(qkv) == F) == fused) copies += (F + 2) * 3 * n, launches += 1;
  if ((es(out) == F) == fused) copies += (2 + F) * n, launches += 1;
  if (launches > 0) count("attention_forward: 16-bit copies", copies, launches);
}
// The backward recomputes the scores: 5 products to the forward's 2. fp32: the row deltas
// (dout . out), then dq and dk, dv (+=). bf16/fp16: SDPA's backward on 16-bit qkv, out and dout
// (copies as in the forward), its 16-bit dq, dk, dv added into the fp32 dqkv.
void CostBackend::attention_backward(float*, float*, ConstAct dout, ConstAct qkv, ConstAct out,
                                     const float*, int B, int T, int C, int NH) {
  const double n = d(B) * T * C, lse = F * B * NH * T;
  const double flops = 2.5 * attention_forward_flops(B, T, C);
  const bool fused = sdpa(C / NH);
  double copies = 0, launches = 0;
  for (const auto& [x, elements] : {std::pair{qkv, 3 * n}, {out, n}, {dout, n}}) {
    if ((es(x) == F) == fused) copies += (F + 2) * elements, launches += 1;
  }
  if (fused) {
    count("attention_backward", 2 * 5 * n + lse + 2 * 3 * n, 1, CostKind::Attention, flops);
    copies += (2 + 2 * F) * 3 * n, launches += 1;  // dqkv += the 16-bit gradients
  } else {
    const double deltas = F * 2 * n + lse;
    const double kernels = F * (3 * n + 2 * n) * 2 + 2 * lse + 2 * F * 3 * n;
    count("attention_backward", deltas + kernels, 4, CostKind::Attention, flops);
  }
  if (launches > 0) count("attention_backward: 16-bit copies", copies, launches);
}
void CostBackend::encoder_forward(float*, const int32_t*, const float*, const float*, int B,
                                  int T, int C) {
  count("encoder_forward", F * (2.0 * B * T * C + d(T) * C) + I * B * T);
}
// dwpe += the column sums over the batch; dwte += each token's row, bucketed by token (rows
// read and written once per occurrence at most).
void CostBackend::encoder_backward(float*, float*, const float*, const int32_t*, int B, int T,
                                   int C) {
  count("encoder_backward", F * (3.0 * B * T * C + 2.0 * T * C) + I * B * T, 2);
}
void CostBackend::embedding_forward_vocab_range(float*, const int32_t*, const float*, int N,
                                                int C, int, int) {
  count("embedding_forward_vocab_range", F * 2.0 * N * C + I * N);
}
// One pass over the rows: inp read, out written, rstd written.
void CostBackend::rmsnorm_forward(float*, float*, const float*, const float*, int N, int C, float) {
  count("rmsnorm_forward", 2 * F * d(N) * C + F * (d(C) + d(N)));
}
// dinp += (read and written), dout and inp read; per-block partials of dweight, then their sum.
void CostBackend::rmsnorm_backward(float*, float*, const float*, const float*, const float*,
                                   const float*, int N, int C) {
  count("rmsnorm_backward", F * (4.0 * N * C + d(N) + 3.0 * C), 2);
}
void CostBackend::swiglu_forward(float*, const float*, long N, int I) {
  count("swiglu_forward", 3 * F * d(N) * I);
}
void CostBackend::swiglu_backward(float*, const float*, const float*, long N, int I) {
  count("swiglu_backward", 5 * F * d(N) * I);
}
// Reads the fused q/k/v rows (keys and values once per query head in a group, from cache) and
// writes the packed rows for the attention.
void CostBackend::rope_qkv_forward(float*, const float*, const float*, const float*, int B, int T,
                                   int NH, int NKV, int HS) {
  count("rope_qkv_forward", F * d(B) * T * HS * ((NH + 2.0 * NKV) + 3.0 * NH) + F * d(T) * HS);
}
void CostBackend::rope_qkv_backward(float*, const float*, const float*, const float*, int B, int T,
                                    int NH, int NKV, int HS) {
  count("rope_qkv_backward", F * d(B) * T * HS * ((NH + 2.0 * NKV) + 3.0 * NH) + F * d(T) * HS);
}
void CostBackend::position_add(float*, const float*, int B, int T, int C) {
  count("position_add", F * (2.0 * B * T * C + d(T) * C));
}
void CostBackend::encoder_backward_vocab_range(float*, float*, const float*, const int32_t*,
                                               int B, int T, int C, int, int) {
  count("encoder_backward_vocab_range", F * (3.0 * B * T * C + 2.0 * T * C) + I * B * T, 2);
}
void CostBackend::crossentropy_forward(float*, Act probs, ConstAct logits, const int32_t*, int N,
                                       int, int Vp) {
  count("crossentropy_forward", (es(logits) + es(probs)) * d(N) * Vp + F * N + I * N);
}
void CostBackend::crossentropy_backward(Act dlogits, ConstAct probs, const int32_t*, float, int N,
                                        int, int Vp) {
  count("crossentropy_backward", (es(probs) + es(dlogits)) * d(N) * Vp + I * N);
}
// One block per row: the logits read twice (max and sum, then the gradient), dlogits written.
void CostBackend::crossentropy_forward_backward(float*, Act dlogits, ConstAct logits,
                                                const int32_t*, float, int N, int, int Vp) {
  count("crossentropy_forward_backward",
        (2.0 * es(logits) + es(dlogits)) * d(N) * Vp + F * N + I * N);
}
void CostBackend::crossentropy_vp_max(float*, const float*, int N, int Vl, int, int) {
  count("crossentropy_vp_max", F * (d(N) * Vl + N));
}
void CostBackend::crossentropy_vp_sums(float*, float*, const float*, const float*, const int32_t*,
                                       int N, int Vl, int, int) {
  count("crossentropy_vp_sums", F * (d(N) * Vl + 3.0 * N) + I * N);
}
void CostBackend::crossentropy_vp_losses(float*, const float*, const float*, const float*, int N) {
  count("crossentropy_vp_losses", F * 4.0 * N);
}
void CostBackend::crossentropy_vp_backward(float*, const float*, const float*, const float*,
                                           const int32_t*, float, int N, int Vl, int, int) {
  count("crossentropy_vp_backward", F * (2.0 * N * Vl + 2.0 * N) + I * N);
}

// --- convolutional networks ----------------------------------------------------------------------

// cuDNN on NHWC tensors (cudnn_conv.cu). Its filter: a filter larger than 1x1 is transposed to
// KRSC first (with bf16 activations, cast to bf16 in the same pass; a 1x1 one only cast), and
// the filter gradient computed in cuDNN's layout and type and added to ours (a bf16 plan's
// input gradient, too, comes out in bf16 and is widened into the fp32 one): counted apart, as
// those are our memory-bound kernels between cuDNN's.
namespace {
bool transposes(const Conv2dShape& s) { return s.R * s.S > 1 && s.C / s.groups > 1; }
// The bytes of a filter element cuDNN reads: bf16 with bf16 activations, else the weight's.
double filter_bytes(ConstAct inp, ConstAct weight) { return inp.bf16() ? 2.0 : es(weight); }
// Whether the weight goes through our copy kernel before cuDNN reads it: with bf16 activations
// unless it is conv2d_filter's copy, with fp32 ones where the layouts differ.
bool copies_filter(const Conv2dShape& s, ConstAct inp, ConstAct weight) {
  return inp.bf16() ? !weight.bf16() : transposes(s);
}
}  // namespace

void CostBackend::conv2d_forward(Act out, ConstAct inp, ConstAct weight, const Conv2dShape& s) {
  const double w = d(s.weight_size()), wb = filter_bytes(inp, weight);
  const double flops = 2.0 * d(s.out_size()) * (s.C / s.groups) * s.R * s.S;
  count("conv2d_forward", es(inp) * d(s.in_size()) + wb * w + es(out) * d(s.out_size()), 1,
        CostKind::Convolution, flops, inp.bf16());
  if (copies_filter(s, inp, weight)) count("conv2d_forward: filter copies", (es(weight) + wb) * w);
}
// Our cast (and transpose) kernel: the fp32 filter read, its bf16 copy written.
void CostBackend::conv2d_filter(Act out, const float*, const Conv2dShape& s) {
  count("conv2d_filter", (F + es(out)) * d(s.weight_size()));
}
// Data gradient (when asked) and filter gradient: each the forward's products.
void CostBackend::conv2d_backward(float* dinp, float*, ConstAct dout, ConstAct inp,
                                  ConstAct weight, const Conv2dShape& s) {
  const double w = d(s.weight_size()), in = d(s.in_size()), out = d(s.out_size());
  const double wb = filter_bytes(inp, weight);
  const bool act16 = inp.bf16();
  // The filter gradient: into scratch where it is transposed or bf16, else added in place.
  const bool scratch_gradient = transposes(s) || act16;
  const double flops1 = 2.0 * out * (s.C / s.groups) * s.R * s.S;
  double bytes = es(inp) * in + es(dout) * out + (scratch_gradient ? wb * w : 2 * F * w);
  double flops = flops1, launches = 1;
  if (dinp != nullptr) {
    bytes += es(dout) * out + wb * w + es(inp) * in;  // dx in the activations' type
    flops += flops1;
    launches += 1;
  }
  count("conv2d_backward", bytes, launches, CostKind::Convolution, flops, act16);
  // Our kernels around cuDNN's: the filter's copy for the data gradient, the filter gradient
  // added to ours (read it, read and write ours), a bf16 input gradient widened into fp32.
  double copies = 0, copy_launches = 0;
  if (dinp != nullptr && copies_filter(s, inp, weight)) copies += (es(weight) + wb) * w, ++copy_launches;
  if (scratch_gradient) copies += (wb + 2 * F) * w, ++copy_launches;
  if (dinp != nullptr && act16) copies += (2 + F) * in, ++copy_launches;
  if (copy_launches > 0) count("conv2d_backward: filter copies and casts", copies, copy_launches);
}
// Column sums (inp read; the band sums and their reduction), statistics, normalize (inp read,
// out written; a fused ReLU and residual add on its store).
void CostBackend::batchnorm_forward_train(Act out, float*, float*, ConstAct inp, const float*,
                                          const float*, long M, int C, float) {
  count("batchnorm_forward_train", (2 * es(inp) + es(out)) * d(M) * C, 4);
}
// Sums of dout and dout * x-hat (dout, inp read), then the input gradient (dout, inp read; dinp
// written).
void CostBackend::batchnorm_backward(Act dinp, float*, float*, const float*, ConstAct inp,
                                     const float*, const float*, const float*, long M, int C,
                                     float) {
  count("batchnorm_backward", (2 * F + 2 * es(inp) + es(dinp)) * d(M) * C, 3);
}
void CostBackend::batchnorm_relu_forward_train(Act out, float*, float*, ConstAct inp,
                                               const float*, const float*, long M, int C, float) {
  count("batchnorm_relu_forward_train", (2 * es(inp) + es(out)) * d(M) * C, 4);
}
void CostBackend::batchnorm_add_relu_forward_train(Act out, float*, float*, ConstAct inp,
                                                   const float*, const float*, ConstAct residual,
                                                   long M, int C, float) {
  count("batchnorm_add_relu_forward_train", (2 * es(inp) + es(residual) + es(out)) * d(M) * C, 4);
}
// Both backward passes read the output to mask dout on the fly.
void CostBackend::batchnorm_relu_backward(Act dinp, float*, float*, const float*, ConstAct inp,
                                          ConstAct out, const float*, const float*, const float*,
                                          const float*, long M, int C, float) {
  count("batchnorm_relu_backward", (2 * F + 2 * es(out) + 2 * es(inp) + es(dinp)) * d(M) * C, 3);
}
// The first pass makes dout + g where out > 0 (dout, g, out read; the sum written into dout)
// and its sums; the second reads it back.
void CostBackend::batchnorm_add_relu_backward(Act dinp, float*, float*, float*, const float*,
                                              ConstAct out, ConstAct inp, const float*,
                                              const float*, const float*, long M, int C, float) {
  count("batchnorm_add_relu_backward", (4 * F + es(out) + 2 * es(inp) + es(dinp)) * d(M) * C, 3);
}
void CostBackend::batchnorm_sums(double*, ConstAct inp, long M, int C) {
  count("batchnorm_sums", es(inp) * d(M) * C, 2);
}
void CostBackend::batchnorm_stats(float*, float*, const double*, double, int C) {
  count("batchnorm_stats", 24.0 * C);
}
void CostBackend::batchnorm_normalize(Act out, ConstAct inp, const float*, const float*,
                                      const float*, const float*, long M, int C, float) {
  count("batchnorm_normalize", (es(inp) + es(out)) * d(M) * C);
}
void CostBackend::batchnorm_backward_sums(double*, float*, float*, const float*, ConstAct inp,
                                          const float*, const float*, long M, int C, float) {
  count("batchnorm_backward_sums", (F + es(inp)) * d(M) * C, 2);
}
void CostBackend::batchnorm_backward_input(Act dinp, const double*, const float*, ConstAct inp,
                                           const float*, const float*, const float*, double,
                                           long M, int C, float) {
  count("batchnorm_backward_input", (F + es(inp) + es(dinp)) * d(M) * C);
}
void CostBackend::batchnorm_update_running(float*, float*, const float*, const float*, double,
                                           int C, float) {
  count("batchnorm_update_running", F * 6.0 * C);
}
void CostBackend::maxpool_forward(Act out, int32_t*, ConstAct inp, const Pool2dShape& s) {
  count("maxpool_forward", es(inp) * d(s.in_size()) + (es(out) + I) * d(s.out_size()));
}
// The input gradient zeroed, then each output's gradient added at its argmax.
void CostBackend::maxpool_backward(float*, const float*, const int32_t*, const Pool2dShape& s) {
  count("maxpool_backward", F * 2.0 * d(s.in_size()) + (F + I) * d(s.out_size()), 2);
}
void CostBackend::nchw_to_nhwc(Act out, const float*, int N, int C, int HW) {
  count("nchw_to_nhwc", (F + es(out)) * N * C * HW);
}
void CostBackend::global_avgpool_forward(float*, ConstAct inp, int N, int HW, int C) {
  count("global_avgpool_forward", es(inp) * d(N) * HW * C + F * d(N) * C);
}
void CostBackend::global_avgpool_backward(float*, const float*, int N, int HW, int C) {
  count("global_avgpool_backward", F * (d(N) * HW * C + d(N) * C));
}
void CostBackend::classifier_loss_forward_backward(float*, float*, const float*, const int32_t*,
                                                   float, float, int N, int K) {
  count("classifier_loss_forward_backward", F * (3.0 * N * K + N) + I * N);
}
void CostBackend::classifier_correct(int64_t*, int64_t*, const float*, const int32_t*, int N,
                                     int K) {
  count("classifier_correct", F * d(N) * K + I * N, 2);
}

// --- optimizers ----------------------------------------------------------------------------------

// params, m, v, grads read; params, m, v written.
void CostBackend::adamw_update(float*, float*, float*, const float*, long n, float, float, float,
                               float, float, int, float) {
  count("adamw_update", F * 7.0 * d(n));
}
void CostBackend::sgd_update(float*, float*, const float*, long n, float, float, float, bool,
                             float) {
  count("sgd_update", F * 5.0 * d(n));
}
// Per-block partial sums, then their sum, read by the host (a wait for the stream).
double CostBackend::sum_of_squares(const float*, long n) {
  count("sum_of_squares", F * d(n), 2);
  return 1.0;
}

}  // namespace sg
