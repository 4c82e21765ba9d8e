// The Llama key/value-cache decoder (model/llama_decoder.h) against the training model: at every
// generated step its logits are the full Llama forward's on the same sequence, to a relative
// 1e-5 (max|ours - ref| / max|ref|), for a tied head with grouped-query attention and for an
// untied head with Llama 3's frequency scaling.
#include <doctest/doctest.h>

#include <algorithm>
#include <span>
#include <vector>

#include "model/llama.h"
#include "model/llama_decoder.h"
#include "model/llama_family.h"
#include "tests/tolerance.h"
#include "util/rng.h"

namespace {

constexpr double kRelTolerance = 1e-5;

sg::LlamaShape tiny_shape(bool tied) {
  sg::LlamaShape s;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_kv_head = tied ? 2 : 1;
  s.n_embd = 32;
  s.intermediate = 40;
  s.context = 16;
  s.vocab = 71;  // padding rows in the embedding
  s.padded_vocab = 128;
  s.rope_theta = 500;
  if (!tied) s.rope_scaling = {8, 1, 4, 8};  // wavelengths of every band at a context of 16
  s.tied = tied;
  return s;
}

}  // namespace

TEST_CASE("Llama decoder: the prompt's and every cached step's logits are the full model's") {
  for (const bool tied : {true, false}) {
    CAPTURE(tied);
    const sg::LlamaShape shape = tiny_shape(tied);
    sg::ParameterLayout layout(sg::llama_description(shape));
    std::vector<float> params(layout.total());
    sg::init_llama_parameters(params.data(), shape, layout, 0.2f, 99);
    sg::Rng rng(5);
    for (const auto& t : layout.tensors())  // norms away from 1 so each matters
      if (t.shape.size() == 1)
        for (size_t i = 0; i < t.numel; ++i) params[t.offset + i] += static_cast<float>(0.1 * rng.normal());
    sg::Llama model(shape, layout, 1, shape.context);
    sg::LlamaDecoder decoder(shape, layout, params.data());
    const auto full_logits = [&](const std::vector<int32_t>& sequence) {
      std::vector<int32_t> window(static_cast<size_t>(shape.context), 0);
      std::copy(sequence.begin(), sequence.end(), window.begin());
      model.forward_stage(0, params.data(), window.data(), nullptr, 0);
      const float* row = model.logits().f32() + (sequence.size() - 1) * shape.padded_vocab;
      return std::vector<float>(row, row + shape.vocab);
    };
    for (const size_t prompt_length : {size_t{1}, size_t{5}}) {
      std::vector<int32_t> sequence;
      for (size_t i = 0; i < prompt_length; ++i) sequence.push_back(static_cast<int32_t>(7 * i + 3));
      std::span<const float> logits = decoder.prefill(sequence);
      while (true) {
        const std::vector<float> ref = full_logits(sequence);
        INFO("prompt of " << prompt_length << ", position " << sequence.size() - 1);
        CHECK(sg::test::relative_to_largest(logits.data(), ref.data(), ref.size()) < kRelTolerance);
        if (sequence.size() == static_cast<size_t>(shape.context)) break;
        const int32_t next = sg::greedy_token(logits.first(static_cast<size_t>(shape.vocab)));
        sequence.push_back(next);
        logits = decoder.step(next);
        CHECK(decoder.length() == static_cast<int>(sequence.size()));
      }
      CHECK_THROWS_AS(decoder.step(0), sg::RunError);
    }
  }
}
