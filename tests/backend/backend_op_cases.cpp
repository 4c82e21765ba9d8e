#include "tests/backend/backend_op_cases.h"

#include <vector>

#include "kernels/conv2d.h"
#include "kernels/pool.h"
#include "kernels/rope.h"

namespace sg::test {
namespace {

// Shapes: rows not a multiple of any tile, widths not of 8 or 16.
constexpr int kN = 37, kC = 72, kOC = 52;
constexpr int kB = 2, kT = 13, kNH = 4, kHS = 8;  // attention: C = 32
constexpr int kV = 101, kVp = 128;                // vocabulary, padded

void matmul_forward(OpRun& r) {
  auto out = r.random(kN * kOC), inp = r.random(kN * kC), w = r.random(kOC * kC), b = r.random(kOC);
  r.both([&](Backend& be, int s) { be.matmul_forward(out[s], inp[s], w[s], b[s], kN, kC, kOC); });
  r.expect(out, "out");
}
void matmul_backward(OpRun& r) {
  auto dinp = r.random(kN * kC), dw = r.random(kOC * kC), db = r.random(kOC);
  auto dout = r.random(kN * kOC), inp = r.random(kN * kC), w = r.random(kOC * kC);
  r.both([&](Backend& be, int s) {
    be.matmul_backward(dinp[s], dw[s], db[s], dout[s], inp[s], w[s], kN, kC, kOC);
  });
  r.expect(dinp, "dinp"), r.expect(dw, "dweight (+=)"), r.expect(db, "dbias (+=)");
}
void gelu_forward(OpRun& r) {
  auto out = r.random(kN * kC), inp = r.random(kN * kC, -4, 4);
  r.both([&](Backend& be, int s) { be.gelu_forward(out[s], inp[s], kN * kC); });
  r.expect(out, "out");
}
void gelu_backward(OpRun& r) {
  auto dinp = r.random(kN * kC), inp = r.random(kN * kC, -4, 4), dout = r.random(kN * kC);
  r.both([&](Backend& be, int s) { be.gelu_backward(dinp[s], inp[s], dout[s], kN * kC); });
  r.expect(dinp, "dinp");
}
void relu_forward(OpRun& r) {
  auto out = r.random(kN * kC), inp = r.random(kN * kC);
  r.both([&](Backend& be, int s) { be.relu_forward(out[s], inp[s], kN * kC); });
  r.expect(out, "out");
}
void relu_backward(OpRun& r) {
  auto dinp = r.random(kN * kC), out = r.random(kN * kC, -1, 1), dout = r.random(kN * kC);
  r.both([&](Backend& be, int s) { be.relu_backward(dinp[s], out[s], dout[s], kN * kC); });
  r.expect(dinp, "dinp");
}
void residual_forward(OpRun& r) {
  auto out = r.random(kN * kC), a = r.random(kN * kC), b = r.random(kN * kC);
  r.both([&](Backend& be, int s) { be.residual_forward(out[s], a[s], b[s], kN * kC); });
  r.expect(out, "out");
}
void add_inplace(OpRun& r) {
  auto out = r.random(kN * kC), in = r.random(kN * kC);
  r.both([&](Backend& be, int s) { be.add_inplace(out[s], in[s], kN * kC); });
  r.expect(out, "out");
}
void add_relu_inplace(OpRun& r) {
  auto out = r.random(kN * kC), in = r.random(kN * kC);
  r.both([&](Backend& be, int s) { be.add_relu_inplace(out[s], in[s], kN * kC); });
  r.expect(out, "out");
}
void add_relu_backward(OpRun& r) {
  auto acc = r.random(kN * kC), g = r.random(kN * kC), out = r.random(kN * kC);
  r.both([&](Backend& be, int s) { be.add_relu_backward(acc[s], g[s], out[s], kN * kC); });
  r.expect(acc, "acc");
}
void add_bias(OpRun& r) {
  auto out = r.random(kN * kC), bias = r.random(kC);
  r.both([&](Backend& be, int s) { be.add_bias(out[s], bias[s], kN, kC); });
  r.expect(out, "out");
}
void scale(OpRun& r) {
  auto x = r.random(kN * kC);
  r.both([&](Backend& be, int s) { be.scale(x[s], 0.37f, kN * kC); });
  r.expect(x, "x");
}
void layernorm_forward(OpRun& r) {
  auto out = r.random(kN * kC), mean = r.random(kN), rstd = r.random(kN);
  auto inp = r.random(kN * kC, -3, 3), w = r.random(kC), b = r.random(kC);
  r.both([&](Backend& be, int s) { be.layernorm_forward(out[s], mean[s], rstd[s], inp[s], w[s], b[s], kN, kC); });
  r.expect(out, "out"), r.expect(mean, "mean"), r.expect(rstd, "rstd");
}
void residual_layernorm_forward(OpRun& r) {
  auto res = r.random(kN * kC), out = r.random(kN * kC), mean = r.random(kN), rstd = r.random(kN);
  auto a = r.random(kN * kC), b = r.random(kN * kC), w = r.random(kC), bias = r.random(kC);
  r.both([&](Backend& be, int s) {
    be.residual_layernorm_forward(res[s], out[s], mean[s], rstd[s], a[s], b[s], w[s], bias[s], kN, kC);
  });
  r.expect(res, "residual"), r.expect(out, "out"), r.expect(mean, "mean"), r.expect(rstd, "rstd");
}
void layernorm_backward(OpRun& r) {
  auto dinp = r.random(kN * kC), dw = r.random(kC), db = r.random(kC), dout = r.random(kN * kC);
  auto inp = r.random(kN * kC, -3, 3), w = r.random(kC), mean = r.random(kN), rstd = r.random(kN, 0.5f, 2);
  r.both([&](Backend& be, int s) {
    be.layernorm_backward(dinp[s], dw[s], db[s], dout[s], inp[s], w[s], mean[s], rstd[s], kN, kC);
  });
  r.expect(dinp, "dinp (+=)"), r.expect(dw, "dweight (+=)"), r.expect(db, "dbias (+=)");
}
// The attention ops, with each backend's own state and scratch sizes.
void attention(OpRun& r, bool backward) {
  const int C = kNH * kHS, N = kB * kT;
  auto qkv = r.random(N * 3 * C, -2, 2), out = r.random(N * C);
  auto att = r.per_backend([](Backend& be) { return be.attention_storage(kB, kT, kNH).state; });
  auto scratch = r.per_backend([](Backend& be) { return be.attention_storage(kB, kT, kNH).scratch; });
  r.both([&](Backend& be, int s) { be.attention_forward(out[s], att[s], qkv[s], kB, kT, C, kNH); });
  if (!backward) return r.expect(out, "out");
  auto dqkv = r.random(N * 3 * C), dout = r.random(N * C);
  r.both([&](Backend& be, int s) {
    be.attention_backward(dqkv[s], scratch[s], dout[s], qkv[s], out[s], att[s], kB, kT, C, kNH);
  });
  r.expect(dqkv, "dqkv (+=)");
}
void attention_forward(OpRun& r) { attention(r, false); }
void attention_backward(OpRun& r) { attention(r, true); }
void encoder_forward(OpRun& r) {
  const int C = kC;
  auto out = r.random(kB * kT * C), wte = r.random(kVp * C), wpe = r.random(kT * C);
  auto ids = r.ids(kB * kT, kV);
  r.both([&](Backend& be, int s) { be.encoder_forward(out[s], ids[s], wte[s], wpe[s], kB, kT, C); });
  r.expect(out, "out");
}
void encoder_backward(OpRun& r) {
  const int C = kC;
  auto dwte = r.random(kVp * C), dwpe = r.random(kT * C), dout = r.random(kB * kT * C);
  auto ids = r.input(std::vector<int32_t>(kB * kT, 7));  // every position hits one row
  r.both([&](Backend& be, int s) { be.encoder_backward(dwte[s], dwpe[s], dout[s], ids[s], kB, kT, C); });
  r.expect(dwte, "dwte (+=)"), r.expect(dwpe, "dwpe (+=)");
}
void embedding_forward_vocab_range(OpRun& r) {
  auto out = r.random(kN * kC), wte = r.random(64 * kC);
  auto ids = r.ids(kN, kV);
  r.both([&](Backend& be, int s) { be.embedding_forward_vocab_range(out[s], ids[s], wte[s], kN, kC, 32, 64); });
  r.expect(out, "out");
}
void position_add(OpRun& r) {
  auto out = r.random(kB * kT * kC), wpe = r.random(kT * kC);
  r.both([&](Backend& be, int s) { be.position_add(out[s], wpe[s], kB, kT, kC); });
  r.expect(out, "out");
}
void encoder_backward_vocab_range(OpRun& r) {
  auto dwte = r.random(64 * kC), dwpe = r.random(kT * kC), dout = r.random(kB * kT * kC);
  auto ids = r.ids(kB * kT, kV);
  r.both([&](Backend& be, int s) {
    be.encoder_backward_vocab_range(dwte[s], dwpe[s], dout[s], ids[s], kB, kT, kC, 32, 64);
  });
  r.expect(dwte, "dwte (+=)"), r.expect(dwpe, "dwpe (+=)");
  auto dwte_only = r.random(64 * kC);  // no position table (Llama)
  r.both([&](Backend& be, int s) {
    be.encoder_backward_vocab_range(dwte_only[s], nullptr, dout[s], ids[s], kB, kT, kC, 32, 64);
  });
  r.expect(dwte_only, "dwte, no position table (+=)");
}
void rmsnorm_forward(OpRun& r) {
  auto out = r.random(kN * kC), rstd = r.random(kN), inp = r.random(kN * kC, -3, 3), w = r.random(kC);
  r.both([&](Backend& be, int s) { be.rmsnorm_forward(out[s], rstd[s], inp[s], w[s], kN, kC, 1e-5f); });
  r.expect(out, "out"), r.expect(rstd, "rstd");
}
void rmsnorm_backward(OpRun& r) {
  auto dinp = r.random(kN * kC), dw = r.random(kC), dout = r.random(kN * kC);
  auto inp = r.random(kN * kC, -3, 3), w = r.random(kC), rstd = r.random(kN, 0.5f, 2);
  r.both([&](Backend& be, int s) { be.rmsnorm_backward(dinp[s], dw[s], dout[s], inp[s], w[s], rstd[s], kN, kC); });
  r.expect(dinp, "dinp (+=)"), r.expect(dw, "dweight (+=)");
}
void swiglu_forward(OpRun& r) {
  auto out = r.random(kN * kC), inp = r.random(kN * 2 * kC, -5, 5);
  r.both([&](Backend& be, int s) { be.swiglu_forward(out[s], inp[s], kN, kC); });
  r.expect(out, "out");
}
void swiglu_backward(OpRun& r) {
  auto dinp = r.random(kN * 2 * kC), inp = r.random(kN * 2 * kC, -5, 5), dout = r.random(kN * kC);
  r.both([&](Backend& be, int s) { be.swiglu_backward(dinp[s], inp[s], dout[s], kN, kC); });
  r.expect(dinp, "dinp");
}
// Rotary tables for kT positions of kHS channels (Llama 3 scaling, so every band is used).
std::pair<OpPair<float>, OpPair<float>> rope_tables_of(OpRun& r) {
  std::vector<float> cos(kT * kHS / 2), sin(cos.size());
  rope_tables(cos.data(), sin.data(), kT, rope_inverse_frequencies(kHS, 500.0, {8, 1, 4, 8}));
  return {r.input(cos), r.input(sin)};
}
constexpr int kNKV = 2;
void rope_qkv_forward(OpRun& r) {
  const int N = kB * kT;
  auto [cos, sin] = rope_tables_of(r);
  auto out = r.random(N * 3 * kNH * kHS), qkv = r.random(N * (kNH + 2 * kNKV) * kHS);
  r.both([&](Backend& be, int s) { be.rope_qkv_forward(out[s], qkv[s], cos[s], sin[s], kB, kT, kNH, kNKV, kHS); });
  r.expect(out, "out");
}
void rope_qkv_backward(OpRun& r) {
  const int N = kB * kT;
  auto [cos, sin] = rope_tables_of(r);
  auto dqkv = r.random(N * (kNH + 2 * kNKV) * kHS), dout = r.random(N * 3 * kNH * kHS);
  r.both([&](Backend& be, int s) { be.rope_qkv_backward(dqkv[s], dout[s], cos[s], sin[s], kB, kT, kNH, kNKV, kHS); });
  r.expect(dqkv, "dqkv");
}
void crossentropy_forward(OpRun& r) {
  auto losses = r.random(kN), probs = r.random(kN * kVp), logits = r.random(kN * kVp, -4, 4);
  auto targets = r.ids(kN, kV);
  r.both([&](Backend& be, int s) { be.crossentropy_forward(losses[s], probs[s], logits[s], targets[s], kN, kV, kVp); });
  r.expect(losses, "losses"), r.expect(probs, "probs");
}
void crossentropy_backward(OpRun& r) {
  auto probs = r.random(kN * kVp, 0, 0.02f);
  auto targets = r.ids(kN, kV);
  auto dlogits = r.random(kN * kVp);
  r.both([&](Backend& be, int s) { be.crossentropy_backward(dlogits[s], probs[s], targets[s], 0.25f, kN, kV, kVp); });
  r.expect(dlogits, "dlogits");
}
void crossentropy_forward_backward(OpRun& r) {
  auto losses = r.random(kN), dlogits = r.random(kN * kVp), logits = r.random(kN * kVp, -4, 4);
  auto targets = r.ids(kN, kV);
  r.both([&](Backend& be, int s) {
    be.crossentropy_forward_backward(losses[s], dlogits[s], logits[s], targets[s], 0.25f, kN, kV, kVp);
  });
  r.expect(losses, "losses"), r.expect(dlogits, "dlogits");
}
// The vocabulary-parallel loss on a shard of 48 logit columns from vocabulary row 64 (the last
// shard of a 101-token vocabulary padded to 112: its tail past V is padding).
constexpr int kVl = 48, kV0 = 64;
void crossentropy_vp(OpRun& r, int upto) {
  auto logits = r.random(kN * kVl, -4, 4);
  auto targets = r.ids(kN, kV);
  auto row_max = r.random(kN), sum_exp = r.random(kN), target_logit = r.random(kN), losses = r.random(kN);
  r.both([&](Backend& be, int s) { be.crossentropy_vp_max(row_max[s], logits[s], kN, kVl, kV0, kV); });
  if (upto == 0) return r.expect(row_max, "row max");
  r.both([&](Backend& be, int s) {
    be.crossentropy_vp_sums(sum_exp[s], target_logit[s], logits[s], row_max[s], targets[s], kN, kVl, kV0, kV);
  });
  if (upto == 1) return r.expect(sum_exp, "sum of exp"), r.expect(target_logit, "target logit");
  r.both([&](Backend& be, int s) { be.crossentropy_vp_losses(losses[s], row_max[s], sum_exp[s], target_logit[s], kN); });
  if (upto == 2) return r.expect(losses, "losses");
  auto dlogits = r.random(kN * kVl);
  r.both([&](Backend& be, int s) {
    be.crossentropy_vp_backward(dlogits[s], logits[s], row_max[s], sum_exp[s], targets[s], 0.5f, kN, kVl, kV0, kV);
  });
  r.expect(dlogits, "dlogits");
}
void crossentropy_vp_max(OpRun& r) { crossentropy_vp(r, 0); }
void crossentropy_vp_sums(OpRun& r) { crossentropy_vp(r, 1); }
void crossentropy_vp_losses(OpRun& r) { crossentropy_vp(r, 2); }
void crossentropy_vp_backward(OpRun& r) { crossentropy_vp(r, 3); }
constexpr long kParams = 1000;
void adamw_update(OpRun& r) {
  auto p = r.random(kParams), m = r.random(kParams, -0.1f, 0.1f), v = r.random(kParams, 0, 0.01f);
  auto g = r.random(kParams);
  r.both([&](Backend& be, int s) { be.adamw_update(p[s], m[s], v[s], g[s], kParams, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, 0.5f); });
  r.expect(p, "params"), r.expect(m, "m"), r.expect(v, "v");
}
void adamw_update_ranges(OpRun& r) {
  auto p = r.random(kParams), m = r.random(kParams, -0.1f, 0.1f), v = r.random(kParams, 0, 0.01f);
  auto g = r.random(kParams);
  const std::vector<UpdateRange> ranges{{0, 300, 0.1f}, {300, 301, 0.0f}, {420, 1000, 0.1f}};
  r.both([&](Backend& be, int s) {
    be.adamw_update_ranges(p[s], m[s], v[s], g[s], ranges, 1e-2f, 0.9f, 0.95f, 1e-8f, 3, 1.0f);
  });
  r.expect(p, "params"), r.expect(m, "m"), r.expect(v, "v");
}
void sgd_update(OpRun& r) {
  auto p = r.random(kParams), mom = r.random(kParams), g = r.random(kParams);
  r.both([&](Backend& be, int s) { be.sgd_update(p[s], mom[s], g[s], kParams, 0.1f, 0.9f, 1e-4f, true, 0.5f); });
  r.expect(p, "params"), r.expect(mom, "momentum");
}
void sgd_update_ranges(OpRun& r) {
  auto p = r.random(kParams), mom = r.random(kParams), g = r.random(kParams);
  const std::vector<UpdateRange> ranges{{0, 500, 1e-4f}, {500, 1000, 0.0f}};
  r.both([&](Backend& be, int s) { be.sgd_update_ranges(p[s], mom[s], g[s], ranges, 0.1f, 0.9f, false, 1.0f); });
  r.expect(p, "params"), r.expect(mom, "momentum");
}
void sum_of_squares(OpRun& r) {
  auto x = r.random(100003);
  double got[2];
  r.both([&](Backend& be, int s) { got[s] = be.sum_of_squares(x[s], 100003); });
  r.expect_value(got[0], got[1], "sum of squares");
}
void copy(OpRun& r) {
  auto a = r.random(kParams), b = r.random(kParams);
  r.both([&](Backend& be, int s) { be.copy(b[s], a[s], kParams * sizeof(float)); });
  r.expect(b, "copy");
}
void upload_batch(OpRun& r) {
  const std::vector<int32_t> host{3, 1, 4, 1, 5, 9, 2, 6, 5};
  auto dst = r.input(std::vector<int32_t>(host.size(), 0));
  r.both([&](Backend& be, int s) { be.upload_batch(dst[s], host.data(), host.size() * sizeof(int32_t)); });
  r.both([&](Backend& be, int) { be.synchronize(); });
  r.expect(dst, "uploaded");
}
// fp32 to bf16 (round to nearest even) and back: the bf16 bits must agree exactly.
void convert(OpRun& r) {
  auto x = r.random(kParams, -100, 100), back = r.random(kParams);
  auto half = r.input(std::vector<uint16_t>(kParams, 0));
  r.both([&](Backend& be, int s) {
    be.convert(Act(half[s], DType::BF16), x[s], kParams);
    be.convert(back[s], ConstAct(half[s], DType::BF16), kParams);
  });
  r.expect(half, "bf16 bits"), r.expect(back, "widened back");
}
void fill(OpRun& r) {
  auto a = r.random(kParams);
  r.both([&](Backend& be, int s) {
    be.fill({a[s], 0, DType::F32, be.device(), {kParams}}, -2.5);
  });
  r.expect(a, "filled");
}

// --- convolutional networks: NHWC activations, M = N*H*W rows of C channels ---
constexpr long kM = 150;
constexpr int kCh = 24;
constexpr float kEps = 1e-5f;
// A strided, padded 3x3 convolution with a ragged output size.
constexpr Conv2dShape kConv{2, 7, 6, 6, 5, 3, 3, 2, 1, 1};
void conv2d_forward(OpRun& r) {
  auto out = r.random(kConv.out_size()), inp = r.random(kConv.in_size()), w = r.random(kConv.weight_size());
  r.both([&](Backend& be, int s) { be.conv2d_forward(out[s], inp[s], w[s], kConv); });
  r.expect(out, "out");
}
void conv2d_backward(OpRun& r) {
  auto dinp = r.random(kConv.in_size()), dw = r.random(kConv.weight_size());
  auto dout = r.random(kConv.out_size()), inp = r.random(kConv.in_size()), w = r.random(kConv.weight_size());
  r.both([&](Backend& be, int s) { be.conv2d_backward(dinp[s], dw[s], dout[s], inp[s], w[s], kConv); });
  r.expect(dinp, "dinp"), r.expect(dw, "dweight");
}
// A forward's statistics for the backward cases (the same on both backends).
struct BatchNormForward {
  OpPair<float> out, mean, var, inp, gamma, beta;
};
BatchNormForward batchnorm_forward(OpRun& r, bool relu) {
  BatchNormForward f{r.random(kM * kCh), r.random(kCh), r.random(kCh), r.random(kM * kCh, -2, 3),
                     r.random(kCh, 0.5f, 1.5f), r.random(kCh)};
  r.both([&](Backend& be, int s) {
    if (relu) be.batchnorm_relu_forward_train(f.out[s], f.mean[s], f.var[s], f.inp[s], f.gamma[s], f.beta[s], kM, kCh, kEps);
    else be.batchnorm_forward_train(f.out[s], f.mean[s], f.var[s], f.inp[s], f.gamma[s], f.beta[s], kM, kCh, kEps);
  });
  return f;
}
void batchnorm_forward_train(OpRun& r) {
  const BatchNormForward f = batchnorm_forward(r, false);
  r.expect(f.out, "out"), r.expect(f.mean, "mean"), r.expect(f.var, "var");
}
void batchnorm_relu_forward_train(OpRun& r) {
  const BatchNormForward f = batchnorm_forward(r, true);
  r.expect(f.out, "out"), r.expect(f.mean, "mean"), r.expect(f.var, "var");
}
void batchnorm_add_relu_forward_train(OpRun& r) {
  auto out = r.random(kM * kCh), mean = r.random(kCh), var = r.random(kCh), inp = r.random(kM * kCh, -2, 3);
  auto gamma = r.random(kCh, 0.5f, 1.5f), beta = r.random(kCh), residual = r.random(kM * kCh);
  r.both([&](Backend& be, int s) {
    be.batchnorm_add_relu_forward_train(out[s], mean[s], var[s], inp[s], gamma[s], beta[s], residual[s], kM, kCh, kEps);
  });
  r.expect(out, "out"), r.expect(mean, "mean"), r.expect(var, "var");
}
void batchnorm_backward(OpRun& r) {
  const BatchNormForward f = batchnorm_forward(r, false);
  auto dinp = r.random(kM * kCh), dgamma = r.random(kCh), dbeta = r.random(kCh), dout = r.random(kM * kCh);
  r.both([&](Backend& be, int s) {
    be.batchnorm_backward(dinp[s], dgamma[s], dbeta[s], dout[s], f.inp[s], f.mean[s], f.var[s], f.gamma[s], kM, kCh, kEps);
  });
  r.expect(dinp, "dinp"), r.expect(dgamma, "dgamma"), r.expect(dbeta, "dbeta");
}
void batchnorm_relu_backward(OpRun& r) {
  const BatchNormForward f = batchnorm_forward(r, true);
  auto dinp = r.random(kM * kCh), dgamma = r.random(kCh), dbeta = r.random(kCh), dout = r.random(kM * kCh);
  r.both([&](Backend& be, int s) {
    be.batchnorm_relu_backward(dinp[s], dgamma[s], dbeta[s], dout[s], f.inp[s], f.out[s], f.mean[s], f.var[s],
                               f.gamma[s], f.beta[s], kM, kCh, kEps);
  });
  r.expect(dinp, "dinp"), r.expect(dgamma, "dgamma"), r.expect(dbeta, "dbeta");
}
void batchnorm_add_relu_backward(OpRun& r) {
  const BatchNormForward f = batchnorm_forward(r, false);
  auto dinp = r.random(kM * kCh), dgamma = r.random(kCh), dbeta = r.random(kCh), dout = r.random(kM * kCh);
  auto g = r.random(kM * kCh), out = r.random(kM * kCh);
  r.both([&](Backend& be, int s) {
    be.batchnorm_add_relu_backward(dinp[s], dgamma[s], dbeta[s], dout[s], g[s], out[s], f.inp[s], f.mean[s],
                                   f.var[s], f.gamma[s], kM, kCh, kEps);
  });
  r.expect(dinp, "dinp"), r.expect(dgamma, "dgamma"), r.expect(dbeta, "dbeta"), r.expect(dout, "dout");
}
// The split batch norm, step by step: sums, statistics, normalisation, the backward's sums and
// input gradient, the running statistics.
void batchnorm_split(OpRun& r, int upto) {
  auto inp = r.random(kM * kCh, -2, 3);
  auto sums = r.input(std::vector<double>(2 * kCh, 0.0));
  r.both([&](Backend& be, int s) { be.batchnorm_sums(sums[s], inp[s], kM, kCh); });
  if (upto == 0) return r.expect(sums, "sums");
  auto mean = r.random(kCh), var = r.random(kCh);
  r.both([&](Backend& be, int s) { be.batchnorm_stats(mean[s], var[s], sums[s], static_cast<double>(kM), kCh); });
  if (upto == 1) return r.expect(mean, "mean"), r.expect(var, "var");
  auto out = r.random(kM * kCh), gamma = r.random(kCh, 0.5f, 1.5f), beta = r.random(kCh);
  r.both([&](Backend& be, int s) { be.batchnorm_normalize(out[s], inp[s], mean[s], var[s], gamma[s], beta[s], kM, kCh, kEps); });
  if (upto == 2) return r.expect(out, "out");
  auto bsums = r.input(std::vector<double>(2 * kCh, 0.0));
  auto dgamma = r.random(kCh), dbeta = r.random(kCh);
  auto dout = r.random(kM * kCh), dinp = r.random(kM * kCh);
  r.both([&](Backend& be, int s) {
    be.batchnorm_backward_sums(bsums[s], dgamma[s], dbeta[s], dout[s], inp[s], mean[s], var[s], kM, kCh, kEps);
  });
  if (upto == 3) return r.expect(bsums, "backward sums"), r.expect(dgamma, "dgamma"), r.expect(dbeta, "dbeta");
  r.both([&](Backend& be, int s) {
    be.batchnorm_backward_input(dinp[s], bsums[s], dout[s], inp[s], mean[s], var[s], gamma[s],
                                static_cast<double>(kM), kM, kCh, kEps);
  });
  if (upto == 4) return r.expect(dinp, "dinp");
  auto rmean = r.random(kCh), rvar = r.random(kCh, 0.5f, 2);
  r.both([&](Backend& be, int s) { be.batchnorm_update_running(rmean[s], rvar[s], mean[s], var[s], static_cast<double>(kM), kCh, 0.1f); });
  r.expect(rmean, "running mean"), r.expect(rvar, "running var");
}
void batchnorm_sums(OpRun& r) { batchnorm_split(r, 0); }
void batchnorm_stats(OpRun& r) { batchnorm_split(r, 1); }
void batchnorm_normalize(OpRun& r) { batchnorm_split(r, 2); }
void batchnorm_backward_sums(OpRun& r) { batchnorm_split(r, 3); }
void batchnorm_backward_input(OpRun& r) { batchnorm_split(r, 4); }
void batchnorm_update_running(OpRun& r) { batchnorm_split(r, 5); }
constexpr Pool2dShape kPool{2, 9, 7, 6, 3, 3, 2, 1};
void maxpool(OpRun& r, bool backward) {
  auto out = r.random(kPool.out_size()), inp = r.random(kPool.in_size());
  auto argmax = r.input(std::vector<int32_t>(kPool.out_size(), 0));
  r.both([&](Backend& be, int s) { be.maxpool_forward(out[s], argmax[s], inp[s], kPool); });
  if (!backward) return r.expect(out, "out"), r.expect(argmax, "argmax");
  auto dinp = r.random(kPool.in_size()), dout = r.random(kPool.out_size());
  r.both([&](Backend& be, int s) { be.maxpool_backward(dinp[s], dout[s], argmax[s], kPool); });
  r.expect(dinp, "dinp");
}
void maxpool_forward(OpRun& r) { maxpool(r, false); }
void maxpool_backward(OpRun& r) { maxpool(r, true); }
void nchw_to_nhwc(OpRun& r) {
  auto out = r.random(3 * 5 * 42), inp = r.random(3 * 5 * 42);
  r.both([&](Backend& be, int s) { be.nchw_to_nhwc(out[s], inp[s], 3, 5, 42); });
  r.expect(out, "out");
}
void global_avgpool_forward(OpRun& r) {
  auto out = r.random(3 * kCh), inp = r.random(3 * 49 * kCh);
  r.both([&](Backend& be, int s) { be.global_avgpool_forward(out[s], inp[s], 3, 49, kCh); });
  r.expect(out, "out");
}
void global_avgpool_backward(OpRun& r) {
  auto dinp = r.random(3 * 49 * kCh), dout = r.random(3 * kCh);
  r.both([&](Backend& be, int s) { be.global_avgpool_backward(dinp[s], dout[s], 3, 49, kCh); });
  r.expect(dinp, "dinp");
}
constexpr int kClasses = 11;
void classifier_loss_forward_backward(OpRun& r) {
  auto losses = r.random(kN), dlogits = r.random(kN * kClasses), logits = r.random(kN * kClasses, -4, 4);
  auto labels = r.ids(kN, kClasses);
  r.both([&](Backend& be, int s) {
    be.classifier_loss_forward_backward(losses[s], dlogits[s], logits[s], labels[s], 0.1f, 0.25f, kN, kClasses);
  });
  r.expect(losses, "losses"), r.expect(dlogits, "dlogits");
}
void classifier_correct(OpRun& r) {
  auto logits = r.random(kN * kClasses, -4, 4);
  auto labels = r.ids(kN, kClasses);
  auto top1 = r.input(std::vector<int64_t>(1, -1)), top5 = r.input(std::vector<int64_t>(1, -1));
  r.both([&](Backend& be, int s) { be.classifier_correct(top1[s], top5[s], logits[s], labels[s], kN, kClasses); });
  r.expect(top1, "top1"), r.expect(top5, "top5");
}

constexpr BackendOpCase kCases[] = {
    {"copy", 0, copy},
    {"fill", 0, fill},
    {"upload_batch", 0, upload_batch},
    {"convert", 0, convert},
    {"matmul_forward", 1e-5, matmul_forward},
    {"matmul_backward", 1e-5, matmul_backward},
    {"gelu_forward", 1e-6, gelu_forward},
    {"gelu_backward", 1e-6, gelu_backward},
    {"relu_forward", 0, relu_forward},
    {"relu_backward", 0, relu_backward},
    {"residual_forward", 0, residual_forward},
    {"add_inplace", 0, add_inplace},
    {"add_relu_inplace", 0, add_relu_inplace},
    {"add_relu_backward", 0, add_relu_backward},
    {"add_bias", 0, add_bias},
    {"scale", 0, scale},
    {"layernorm_forward", 1e-5, layernorm_forward},
    {"residual_layernorm_forward", 1e-5, residual_layernorm_forward},
    {"layernorm_backward", 1e-5, layernorm_backward},
    {"attention_forward", 1e-5, attention_forward},
    {"attention_backward", 1e-5, attention_backward},
    {"encoder_forward", 0, encoder_forward},
    {"encoder_backward", 1e-6, encoder_backward},
    {"embedding_forward_vocab_range", 0, embedding_forward_vocab_range},
    {"position_add", 0, position_add},
    {"encoder_backward_vocab_range", 1e-6, encoder_backward_vocab_range},
    {"rmsnorm_forward", 1e-5, rmsnorm_forward},
    {"rmsnorm_backward", 1e-5, rmsnorm_backward},
    {"swiglu_forward", 1e-6, swiglu_forward},
    {"swiglu_backward", 1e-6, swiglu_backward},
    {"rope_qkv_forward", 1e-6, rope_qkv_forward},
    {"rope_qkv_backward", 1e-6, rope_qkv_backward},
    {"crossentropy_forward", 1e-5, crossentropy_forward},
    {"crossentropy_backward", 1e-6, crossentropy_backward},
    {"crossentropy_forward_backward", 1e-5, crossentropy_forward_backward},
    {"crossentropy_vp_max", 0, crossentropy_vp_max},
    {"crossentropy_vp_sums", 1e-5, crossentropy_vp_sums},
    {"crossentropy_vp_losses", 1e-5, crossentropy_vp_losses},
    {"crossentropy_vp_backward", 1e-5, crossentropy_vp_backward},
    {"adamw_update", 1e-6, adamw_update},
    {"adamw_update_ranges", 1e-6, adamw_update_ranges},
    {"sgd_update", 1e-6, sgd_update},
    {"sgd_update_ranges", 1e-6, sgd_update_ranges},
    {"sum_of_squares", 1e-6, sum_of_squares},
    {"conv2d_forward", 1e-5, conv2d_forward},
    {"conv2d_backward", 1e-5, conv2d_backward},
    {"batchnorm_forward_train", 1e-5, batchnorm_forward_train},
    {"batchnorm_relu_forward_train", 1e-5, batchnorm_relu_forward_train},
    {"batchnorm_add_relu_forward_train", 1e-5, batchnorm_add_relu_forward_train},
    {"batchnorm_backward", 1e-5, batchnorm_backward},
    {"batchnorm_relu_backward", 1e-5, batchnorm_relu_backward},
    {"batchnorm_add_relu_backward", 1e-5, batchnorm_add_relu_backward},
    {"batchnorm_sums", 1e-6, batchnorm_sums},
    {"batchnorm_stats", 1e-6, batchnorm_stats},
    {"batchnorm_normalize", 1e-5, batchnorm_normalize},
    {"batchnorm_backward_sums", 1e-5, batchnorm_backward_sums},
    {"batchnorm_backward_input", 1e-5, batchnorm_backward_input},
    {"batchnorm_update_running", 1e-6, batchnorm_update_running},
    {"maxpool_forward", 0, maxpool_forward},
    {"maxpool_backward", 0, maxpool_backward},
    {"nchw_to_nhwc", 0, nchw_to_nhwc},
    {"global_avgpool_forward", 1e-6, global_avgpool_forward},
    {"global_avgpool_backward", 1e-6, global_avgpool_backward},
    {"classifier_loss_forward_backward", 1e-5, classifier_loss_forward_backward},
    {"classifier_correct", 0, classifier_correct},
};

}  // namespace

std::span<const BackendOpCase> backend_op_cases() { return kCases; }

}  // namespace sg::test
