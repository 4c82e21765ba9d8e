#include "data/markov_chain.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "util/error.h"

namespace sg {
namespace {

uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in (0, 1): 53 random bits, offset by half a step so log() never sees 0.
double unit_open(uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }

// A small counter-based generator: deterministic on every platform (unlike std distributions).
struct SplitMix {
  uint64_t state;
  uint64_t next() { return mix64(state++ * 0x9e3779b97f4a7c15ULL); }
};

constexpr int kMaxBranching = 64;  // keeps a state's law on the stack

}  // namespace

struct MarkovChain::Law {
  int successors[kMaxBranching];
  double weights[kMaxBranching];  // sum to 1 - kFloorMass
};

MarkovChain::MarkovChain(int vocab, int order, int branching, uint64_t seed)
    : vocab_(vocab), order_(order), branching_(branching), seed_(mix64(seed ^ 0x6d61726b6f76ULL)) {
  if (vocab < 2 || vocab > 65536)
    throw RunError("synthetic data: vocab " + std::to_string(vocab) +
                   " must be in [2, 65536] (tokens are uint16)");
  if (order < 1 || order > 16)
    throw RunError("synthetic data: order " + std::to_string(order) + " must be in [1, 16]");
  if (branching < 1 || branching > kMaxBranching || branching > vocab)
    throw RunError("synthetic data: branching " + std::to_string(branching) + " must be in [1, " +
                   std::to_string(std::min(kMaxBranching, vocab)) + "]");
}

uint64_t MarkovChain::state_of(const uint16_t* context) const {
  if (order_ == 1) return context[0];
  uint64_t h = seed_;
  for (int i = 0; i < order_; ++i) h = mix64(h ^ context[i]);
  return h % static_cast<uint64_t>(vocab_);
}

void MarkovChain::law_of(Law& law, uint64_t state) const {
  const uint64_t base = mix64(seed_ ^ mix64(state));
  double total = 0;
  for (int j = 0; j < branching_; ++j) {
    const uint64_t bits = mix64(base + static_cast<uint64_t>(j));
    law.successors[j] = static_cast<int>((bits >> 32) % static_cast<uint64_t>(vocab_));
    law.weights[j] = -std::log(unit_open(mix64(bits)));  // Exp(1)
    total += law.weights[j];
  }
  const double scale = (1.0 - kFloorMass) / total;
  for (int j = 0; j < branching_; ++j) law.weights[j] *= scale;
}

std::vector<uint16_t> MarkovChain::generate(int64_t n, uint64_t stream_seed) const {
  std::vector<uint16_t> tokens(static_cast<size_t>(std::max<int64_t>(n, 0)));
  SplitMix rng{mix64(stream_seed ^ seed_)};
  const uint64_t v = static_cast<uint64_t>(vocab_);
  Law law;
  for (int64_t t = 0; t < n; ++t) {
    uint16_t next;
    if (t < order_) {
      next = static_cast<uint16_t>(rng.next() % v);
    } else {
      law_of(law, state_of(&tokens[t - order_]));
      double u = unit_open(rng.next());
      if (u < kFloorMass) {
        next = static_cast<uint16_t>(rng.next() % v);  // the uniform floor
      } else {
        u -= kFloorMass;
        int j = 0;
        while (j < branching_ - 1 && u >= law.weights[j]) u -= law.weights[j++];
        next = static_cast<uint16_t>(law.successors[j]);
      }
    }
    tokens[t] = next;
  }
  return tokens;
}

double MarkovChain::probability(const uint16_t* context, int next) const {
  Law law;
  law_of(law, state_of(context));
  double p = kFloorMass / vocab_;
  for (int j = 0; j < branching_; ++j)
    if (law.successors[j] == next) p += law.weights[j];  // duplicate successors add up
  return p;
}

double MarkovChain::log_prob(const uint16_t* context, int next) const {
  return std::log(probability(context, next));
}

double MarkovChain::optimal_loss(const std::vector<uint16_t>& tokens) const {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n <= order_)
    throw RunError("synthetic data: optimal_loss needs more than " + std::to_string(order_) +
                   " tokens, got " + std::to_string(n));
  double sum = 0;
  for (int64_t t = order_; t < n; ++t) sum -= log_prob(&tokens[t - order_], tokens[t]);
  return sum / static_cast<double>(n - order_);
}

}  // namespace sg
