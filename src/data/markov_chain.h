#pragma once
// A synthetic language with a known answer: a random Markov chain over `vocab` tokens whose
// next-token law depends on the previous `order` tokens. Used by the quickstart, the benchmarks
// and the tests, with no download. Because the true law is known, optimal_loss() says the best
// validation loss any model can reach, so a training run can be judged against it.
//
// The chain is never tabulated (vocab 50257 would need a 50257^2 table): the law of a state is
// recomputed on the fly from a hash of (seed, state). A state has `branching` successor tokens
// with weights drawn as normalised exponentials (a uniform Dirichlet), sharing 99% of the mass;
// the remaining kFloorMass is spread uniformly over the whole vocabulary so every token has
// nonzero probability and the loss stays finite. For order > 1 the previous `order` tokens are
// hashed to one of `vocab` states, so the number of distinct laws stays learnable.
#include <cstdint>
#include <vector>

namespace sg {

class MarkovChain {
 public:
  static constexpr double kFloorMass = 0.01;

  MarkovChain(int vocab, int order, int branching, uint64_t seed);

  int vocab() const { return vocab_; }
  int order() const { return order_; }
  int branching() const { return branching_; }

  // n tokens from the chain; the first `order` are uniform. The stream seed picks the sample
  // path (train and validation splits use different ones); the chain itself is fixed by seed.
  std::vector<uint16_t> generate(int64_t n, uint64_t stream_seed) const;

  // p(next | context); context points at the `order` tokens before next, oldest first.
  double probability(const uint16_t* context, int next) const;
  double log_prob(const uint16_t* context, int next) const;

  // Mean over positions t >= order of -ln p(tokens[t] | tokens[t-order .. t-1]): the expected
  // loss of the true law on these tokens, i.e. the best loss a model can reach on them.
  double optimal_loss(const std::vector<uint16_t>& tokens) const;

 private:
  struct Law;  // one state's successors and weights
  uint64_t state_of(const uint16_t* context) const;
  void law_of(Law& law, uint64_t state) const;

  int vocab_, order_, branching_;
  uint64_t seed_;
};

}  // namespace sg
