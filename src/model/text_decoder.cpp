// Sampling and the generation loop over any TextDecoder (text_decoder.h).
#include "model/text_decoder.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "util/error.h"

namespace sg {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int32_t greedy_token(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::vector<TokenProbability> sampling_candidates(std::span<const float> logits,
                                                  const SamplingOptions& options) {
  if (!(options.temperature > 0)) {
    throw RunError("sampling_candidates needs a temperature > 0 (0 is greedy_token)");
  }
  const int V = static_cast<int>(logits.size());
  const double top = *std::max_element(logits.begin(), logits.end());
  std::vector<TokenProbability> kept(static_cast<size_t>(V));
  for (int t = 0; t < V; ++t) kept[t] = {t, std::exp((logits[t] - top) / options.temperature)};
  // Most likely first; equal ones by token id, so the kept set does not depend on the sort.
  const auto more_likely = [](const TokenProbability& a, const TokenProbability& b) {
    return a.probability > b.probability || (a.probability == b.probability && a.token < b.token);
  };
  const bool nucleus = options.top_p < 1.0;
  if (options.top_k > 0 && options.top_k < V) {
    std::partial_sort(kept.begin(), kept.begin() + options.top_k, kept.end(), more_likely);
    kept.resize(static_cast<size_t>(options.top_k));
  } else if (nucleus) {
    std::sort(kept.begin(), kept.end(), more_likely);
  }
  double sum = 0;
  for (const TokenProbability& c : kept) sum += c.probability;
  for (TokenProbability& c : kept) c.probability /= sum;
  if (nucleus) {
    // The fewest most likely tokens whose mass reaches top_p (at least one), renormalised.
    double mass = 0;
    size_t n = 0;
    while (n < kept.size() && mass < options.top_p) mass += kept[n++].probability;
    kept.resize(std::max<size_t>(n, 1));
    for (TokenProbability& c : kept) c.probability /= mass;
  }
  return kept;
}

int32_t sample_token(std::span<const float> logits, const SamplingOptions& options, Rng& rng) {
  if (!(options.temperature > 0)) return greedy_token(logits);
  const std::vector<TokenProbability> candidates = sampling_candidates(logits, options);
  double u = rng.uniform();
  for (const TokenProbability& c : candidates) {
    if ((u -= c.probability) < 0) return c.token;
  }
  return candidates.back().token;  // u within rounding of 1
}

GenerationTimes generate_tokens(TextDecoder& decoder, std::vector<int32_t>& sequence, int count,
                                const SamplingOptions& options, Rng& rng) {
  const int vocab = decoder.vocab();
  if (sequence.empty()) throw RunError("generate_tokens needs a prompt of at least one token");
  const auto start = std::chrono::steady_clock::now();
  const size_t context = static_cast<size_t>(decoder.context());
  const size_t keep = std::max<size_t>(1, context / 2);
  // The last n tokens of the sequence, as a new window at positions 0 ...
  const auto window = [&](size_t n) {
    return std::span<const int32_t>(sequence).last(std::min(n, sequence.size()));
  };
  std::span<const float> logits =
      decoder.prefill(window(sequence.size() <= context ? context : keep));
  GenerationTimes times;
  times.prefill_seconds = seconds_since(start);
  for (int i = 0; i < count; ++i) {
    const int32_t next = sample_token(logits.first(static_cast<size_t>(vocab)), options, rng);
    sequence.push_back(next);
    if (i + 1 == count) break;  // the last token's logits are not needed
    logits = static_cast<size_t>(decoder.length()) < context ? decoder.step(next)
                                                             : decoder.prefill(window(keep));
  }
  times.total_seconds = seconds_since(start);
  return times;
}

}  // namespace sg
