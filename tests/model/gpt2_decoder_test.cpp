// The key/value-cache decoder (model/gpt2_decoder.h) against the training model: at every
// generated step its logits are the full GPT2 forward's on the same sequence, to a relative 1e-5
// (max|ours - ref| / max|ref|: the same fp32 ops, the cached attention step summed in another
// order). And the sampling filters: top-k 1 is greedy, top-p keeps the fewest most likely tokens
// whose probability reaches p.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "model/gpt2.h"
#include "model/gpt2_decoder.h"
#include "model/gpt2_family.h"
#include "tests/tolerance.h"
#include "util/rng.h"

namespace {

constexpr double kRelTolerance = 1e-5;
// Vocabulary not a multiple of 128 (padding rows in wte), heads of 8.
const sg::GPT2Shape kShape{2, 3, 24, 16, 71, 128};

// A random tiny GPT-2: the usual initialisation, then every value (biases, layer norms) moved by
// N(0, 0.1) so that each tensor matters and the logits are far from ties.
struct TinyModel {
  sg::ParameterLayout layout{sg::gpt2_description(kShape)};
  std::vector<float> params = std::vector<float>(layout.total());
  TinyModel() {
    sg::init_gpt2_parameters(params.data(), kShape, layout, 0.2f, 99);
    sg::Rng rng(5);
    const size_t wte_rows = static_cast<size_t>(kShape.vocab) * kShape.n_embd;
    for (size_t i = 0; i < params.size(); ++i) {
      if (i >= wte_rows && i < static_cast<size_t>(kShape.padded_vocab) * kShape.n_embd) continue;
      params[i] += static_cast<float>(0.1 * rng.normal());  // wte's padding rows stay 0
    }
  }
};

// The training model's logits (V) at the last position of `sequence` (1 .. context tokens).
std::vector<float> full_forward_logits(sg::GPT2& model, const TinyModel& m,
                                       std::span<const int32_t> sequence) {
  std::vector<int32_t> window(static_cast<size_t>(kShape.context), 0);  // causal: tail unused
  std::copy(sequence.begin(), sequence.end(), window.begin());
  model.forward(m.params.data(), window.data(), nullptr);
  const float* row = model.logits().f32() + (sequence.size() - 1) * kShape.padded_vocab;
  return {row, row + kShape.vocab};
}

double relative_error(std::span<const float> ours, const std::vector<float>& ref) {
  return sg::test::relative_to_largest(ours.data(), ref.data(), ref.size());
}

}  // namespace

TEST_CASE("decoder: the prompt's and every cached step's logits are the full model's") {
  TinyModel m;
  sg::GPT2 model(kShape, m.layout, 1, kShape.context);
  sg::GPT2Decoder decoder(kShape, m.layout, m.params.data());
  for (const size_t prompt_length : {size_t{1}, size_t{5}}) {
    std::vector<int32_t> sequence;
    for (size_t i = 0; i < prompt_length; ++i) sequence.push_back(static_cast<int32_t>(7 * i + 3));
    std::span<const float> logits = decoder.prefill(sequence);
    CHECK(decoder.length() == static_cast<int>(prompt_length));
    // Up to the last position of the context, each step one position.
    while (true) {
      const std::vector<float> ref = full_forward_logits(model, m, sequence);
      const double error = relative_error(logits.first(kShape.vocab), ref);
      INFO("prompt of " << prompt_length << ", position " << sequence.size() - 1);
      CHECK(error < kRelTolerance);
      if (sequence.size() == static_cast<size_t>(kShape.context)) break;
      const int32_t next = sg::greedy_token(logits.first(kShape.vocab));
      CHECK(next == sg::greedy_token(ref));
      sequence.push_back(next);
      logits = decoder.step(next);
      CHECK(decoder.length() == static_cast<int>(sequence.size()));
    }
    CHECK_THROWS_AS(decoder.step(0), sg::RunError);  // a full cache is refused, not overrun
  }
}

TEST_CASE("decoder: generation past the context rebuilds the cache from the last context/2") {
  TinyModel m;
  sg::GPT2 model(kShape, m.layout, 1, kShape.context);
  sg::GPT2Decoder decoder(kShape, m.layout, m.params.data());
  const std::vector<int32_t> prompt{1, 2, 3, 4, 5, 6};
  const int count = 3 * kShape.context;
  std::vector<int32_t> ours = prompt;
  sg::Rng rng(1);
  sg::generate_tokens(decoder, ours, count, {0.0, 0, 1.0}, rng);
  REQUIRE(ours.size() == prompt.size() + count);
  // The documented rule on the full model: the window starts at w; when a new token would make it
  // longer than the context, it restarts at the last context/2 tokens.
  std::vector<int32_t> ref = prompt;
  size_t w = 0;
  const size_t keep = kShape.context / 2;
  for (int i = 0; i < count; ++i) {
    const auto window = std::span<const int32_t>(ref).subspan(w);
    ref.push_back(sg::greedy_token(full_forward_logits(model, m, window)));
    if (ref.size() - w > static_cast<size_t>(kShape.context)) w = ref.size() - keep;
  }
  CHECK(ours == ref);
}

TEST_CASE("sampling: top-k 1 is greedy, whatever the temperature and the draw") {
  sg::Rng rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> logits(50);
    for (float& l : logits) l = static_cast<float>(rng.normal());
    const int32_t greedy = sg::greedy_token(logits);
    CHECK(sg::sample_token(logits, {0.0, 0, 1.0}, rng) == greedy);  // temperature 0
    for (const double temperature : {0.5, 1.0, 5.0}) {
      CHECK(sg::sample_token(logits, {temperature, 1, 1.0}, rng) == greedy);
    }
  }
}

TEST_CASE("sampling: top-p keeps the fewest most likely tokens whose probability reaches p") {
  // Probabilities 0.1, 0.5, 0.15, 0.25 at temperature 1 (order shuffled by token id).
  const std::vector<double> probs{0.1, 0.5, 0.15, 0.25};
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  const auto kept = [&](double top_p, int top_k = 0) {
    std::vector<int32_t> tokens;
    double sum = 0;
    for (const sg::TokenProbability& c : sg::sampling_candidates(logits, {1.0, top_k, top_p})) {
      tokens.push_back(c.token);
      sum += c.probability;
    }
    CHECK(sum == doctest::Approx(1.0));  // renormalised over the kept set
    return tokens;
  };
  CHECK(kept(0.3) == std::vector<int32_t>{1});           // 0.5 reaches 0.3
  CHECK(kept(0.7) == std::vector<int32_t>{1, 3});        // 0.5 < 0.7 <= 0.75
  CHECK(kept(0.8) == std::vector<int32_t>{1, 3, 2});     // 0.75 < 0.8 <= 0.9
  CHECK(kept(0.95) == std::vector<int32_t>{1, 3, 2, 0});
  CHECK(kept(1.0).size() == 4);                          // off
  CHECK(kept(0.8, 2) == std::vector<int32_t>{1, 3});     // top-k first, then top-p of the rest
  CHECK(kept(0.6, 2) == std::vector<int32_t>{1});        // 0.5/0.75 = 0.67 reaches 0.6
  CHECK(kept(0.6, 3) == std::vector<int32_t>{1, 3});     // 0.5/0.9 = 0.56 does not
  // The renormalised probabilities of the kept set.
  const auto candidates = sg::sampling_candidates(logits, {1.0, 0, 0.7});
  REQUIRE(candidates.size() == 2);
  CHECK(candidates[0].probability == doctest::Approx(0.5 / 0.75));
  CHECK(candidates[1].probability == doctest::Approx(0.25 / 0.75));

  // Draws follow the kept distribution: token 1 about 2/3 of the time, never tokens 0 or 2.
  sg::Rng rng(11);
  int ones = 0;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) {
    const int32_t t = sg::sample_token(logits, {1.0, 0, 0.7}, rng);
    REQUIRE((t == 1 || t == 3));
    ones += t == 1;
  }
  CHECK(ones / static_cast<double>(draws) == doctest::Approx(2.0 / 3.0).epsilon(0.03));
}
