// Whole-model check of Llama against transformers' LlamaForCausalLM:
// tests/reference/llama_reference.py computes, in float64, a tiny model's logits, loss and every
// parameter gradient from float32 weights (tied and untied head, grouped-query attention), and
// writes llama_tiny_{tied,untied}.safetensors. Our fp32 model must agree to a relative 1e-5 per
// tensor (max|ours - ref| / max|ref|), with and without the loss fused into the forward, and
// under selective and full recompute.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "model/llama.h"
#include "model/llama_family.h"
#include "tests/tolerance.h"

namespace {

constexpr double kRelTolerance = 1e-5;

struct Golden {
  explicit Golden(const std::string& which)
      : file(std::string(SINGULARITY_SOURCE_ROOT) + "/tests/reference/llama_tiny_" + which +
             ".safetensors") {
    shape.n_layer = meta("n_layer");
    shape.n_head = meta("n_head");
    shape.n_kv_head = meta("n_kv_head");
    shape.n_embd = meta("n_embd");
    shape.intermediate = meta("intermediate");
    shape.context = meta("context");
    shape.vocab = meta("vocab");
    shape.padded_vocab = (shape.vocab + 127) / 128 * 128;
    shape.rope_theta = std::stod(file.metadata().at("rope_theta"));
    shape.rms_norm_eps = std::stof(file.metadata().at("rms_norm_eps"));
    shape.tied = meta("tied") == 1;
    B = meta("batch");
    T = shape.context;
    layout = std::make_unique<sg::ParameterLayout>(sg::llama_description(shape));
    inputs.resize(static_cast<size_t>(B) * T);
    targets.resize(inputs.size());
    file.read_exact(inputs.data(), "inputs", sg::DType::I32, {B, T});
    file.read_exact(targets.data(), "targets", sg::DType::I32, {B, T});
  }
  int meta(const char* key) const { return std::stoi(file.metadata().at(key)); }

  // Golden tensors `prefix + name` in our layout (the vocabulary's padding rows left zero).
  std::vector<float> load(const std::string& prefix) const {
    std::vector<float> flat(layout->total(), 0.0f);
    for (const auto& t : layout->tensors()) {
      auto dims = t.shape;
      if (dims[0] == shape.padded_vocab) dims[0] = shape.vocab;
      file.read_f32(flat.data() + t.offset, prefix + t.name, dims);
    }
    return flat;
  }

  sg::SafetensorsFile file;
  sg::LlamaShape shape;
  int B = 0, T = 0;
  std::unique_ptr<sg::ParameterLayout> layout;
  std::vector<int32_t> inputs, targets;
};

double relative_error(const float* ours, const float* ref, size_t n) {
  return sg::test::relative_to_largest(ours, ref, n);
}

// Loss and gradients of one forward and backward, checked against the golden file.
void check_gradients(const Golden& g, sg::Recompute recompute, bool fused) {
  const std::vector<float> params = g.load("param.");
  sg::Llama model(g.shape, *g.layout, g.B, g.T, 1, nullptr, sg::cpu_backend(), recompute);
  const int N = g.B * g.T;
  const float dloss = 1.0f / static_cast<float>(N);
  const float loss =
      model.forward_stage(0, params.data(), g.inputs.data(), g.targets.data(), fused ? dloss : 0);
  float ref_loss = 0;
  g.file.read_f32(&ref_loss, "loss", {1});
  CHECK(std::fabs(loss - ref_loss) <= kRelTolerance * std::fabs(ref_loss));
  std::vector<float> grads(g.layout->total(), 0.0f);
  model.backward_stage(0, grads.data(), params.data(), g.inputs.data(), g.targets.data(), dloss);
  const std::vector<float> ref_grads = g.load("grad.");
  double worst = 0;
  for (const auto& t : g.layout->tensors()) {
    const double e = relative_error(grads.data() + t.offset, ref_grads.data() + t.offset, t.numel);
    CHECK_MESSAGE(e <= kRelTolerance, "gradient of " << t.name << " relative error " << e);
    worst = std::max(worst, e);
  }
  MESSAGE("worst gradient relative error " << worst);
  // The vocabulary's padding rows receive no gradient.
  const auto& embed = g.layout->find("model.embed_tokens.weight");
  for (size_t i = static_cast<size_t>(g.shape.vocab) * g.shape.n_embd; i < embed.numel; ++i)
    REQUIRE(grads[embed.offset + i] == 0.0f);
}

}  // namespace

TEST_CASE("tiny Llama matches transformers' LlamaForCausalLM in float64: logits, loss, gradients") {
  for (const char* which : {"tied", "untied"}) {
    CAPTURE(which);
    Golden g(which);
    const std::vector<float> params = g.load("param.");
    sg::Llama model(g.shape, *g.layout, g.B, g.T);
    model.forward_stage(0, params.data(), g.inputs.data(), nullptr, 0);
    const int N = g.B * g.T, V = g.shape.vocab, Vp = g.shape.padded_vocab;
    std::vector<float> logits(static_cast<size_t>(N) * V), ref(logits.size());
    for (int n = 0; n < N; ++n)
      std::copy_n(model.logits().f32() + static_cast<size_t>(n) * Vp, V, logits.data() + n * V);
    g.file.read_f32(ref.data(), "logits", {g.B, g.T, V});
    const double e = relative_error(logits.data(), ref.data(), logits.size());
    MESSAGE("logits relative error " << e);
    CHECK(e <= kRelTolerance);
    check_gradients(g, sg::Recompute::None, false);
  }
}

TEST_CASE("tiny Llama: the fused loss and both recomputes give the reference gradients") {
  for (const char* which : {"tied", "untied"}) {
    CAPTURE(which);
    Golden g(which);
    check_gradients(g, sg::Recompute::None, true);
    check_gradients(g, sg::Recompute::Selective, false);
    check_gradients(g, sg::Recompute::Full, true);
  }
}
