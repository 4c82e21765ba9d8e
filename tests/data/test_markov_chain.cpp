// MarkovChain: the sampled frequencies follow the stated law, optimal_loss is its conditional
// entropy, and everything is fixed by the seeds.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <vector>

#include "data/markov_chain.h"
#include "util/error.h"

using namespace sg;

TEST_CASE("probabilities of a state sum to one and are all positive") {
  for (int order : {1, 3}) {
    MarkovChain chain(50, order, 4, 9);
    const uint16_t context[3] = {7, 3, 11};
    double total = 0, smallest = 1;
    for (int x = 0; x < 50; ++x) {
      const double p = chain.probability(context, x);
      total += p;
      smallest = std::min(smallest, p);
    }
    CHECK(total == doctest::Approx(1.0).epsilon(1e-12));
    CHECK(smallest >= MarkovChain::kFloorMass / 50 * (1 - 1e-12));
    CHECK(chain.log_prob(context, 5) == doctest::Approx(std::log(chain.probability(context, 5))));
  }
}

TEST_CASE("empirical next-token frequencies match the law") {
  const int vocab = 8;
  MarkovChain chain(vocab, 1, 3, 5);
  const auto tokens = chain.generate(400000, 1);
  std::map<int, std::vector<int64_t>> counts;  // previous token -> next-token counts
  for (size_t t = 1; t < tokens.size(); ++t) {
    auto& row = counts[tokens[t - 1]];
    row.resize(vocab);
    ++row[tokens[t]];
  }
  int checked = 0;
  for (const auto& [prev, row] : counts) {
    int64_t n = 0;
    for (int64_t c : row) n += c;
    if (n < 20000) continue;
    const uint16_t context = static_cast<uint16_t>(prev);
    for (int x = 0; x < vocab; ++x) {
      const double p = chain.probability(&context, x);
      const double sigma = std::sqrt(p * (1 - p) / static_cast<double>(n));
      CHECK(std::abs(static_cast<double>(row[x]) / n - p) < 5 * sigma + 1e-4);
    }
    ++checked;
  }
  CHECK(checked >= 2);
}

TEST_CASE("optimal_loss is the empirical conditional entropy") {
  for (int order : {1, 2}) {
    const int vocab = 16;
    MarkovChain chain(vocab, order, 4, 21);
    const auto tokens = chain.generate(300000, 2);
    // Plug-in estimate of H(next | context) from counts over the full context.
    std::map<uint32_t, std::map<int, int64_t>> counts;
    for (size_t t = order; t < tokens.size(); ++t) {
      uint32_t ctx = 0;
      for (int k = order; k >= 1; --k) ctx = ctx * vocab + tokens[t - k];
      ++counts[ctx][tokens[t]];
    }
    double entropy = 0;
    const double total = static_cast<double>(tokens.size() - order);
    for (const auto& [ctx, row] : counts) {
      int64_t n = 0;
      for (const auto& [x, c] : row) n += c;
      for (const auto& [x, c] : row) entropy -= c / total * std::log(static_cast<double>(c) / n);
    }
    const double loss = chain.optimal_loss(tokens);
    CHECK(loss == doctest::Approx(entropy).epsilon(0.02));
    CHECK(loss < std::log(vocab) - 0.5);  // far from uniform: there is something to learn
  }
}

TEST_CASE("deterministic by seed; streams differ") {
  MarkovChain a(1000, 2, 4, 1), b(1000, 2, 4, 1), c(1000, 2, 4, 2);
  CHECK(a.generate(5000, 3) == b.generate(5000, 3));
  CHECK(a.generate(5000, 3) != a.generate(5000, 4));
  CHECK(a.generate(5000, 3) != c.generate(5000, 3));
  const uint16_t context[2] = {10, 20};
  CHECK(a.probability(context, 30) == b.probability(context, 30));
}

TEST_CASE("GPT-2 sized vocabulary: a million tokens, all in range") {
  MarkovChain chain(50257, 1, 4, 1337);
  const auto tokens = chain.generate(1 << 20, 1);
  REQUIRE(tokens.size() == (1u << 20));
  uint16_t largest = 0;
  for (uint16_t t : tokens) largest = std::max(largest, t);
  CHECK(largest < 50257);
  CHECK(largest > 40000);  // the floor reaches the whole vocabulary
  const double loss = chain.optimal_loss(tokens);
  CHECK(loss > 0.5);
  CHECK(loss < 2.5);  // ~H(Dirichlet(1,1,1,1) weights) plus the floor's share
}

TEST_CASE("invalid parameters") {
  CHECK_THROWS_AS(MarkovChain(70000, 1, 4, 1), RunError);
  CHECK_THROWS_AS(MarkovChain(100, 0, 4, 1), RunError);
  CHECK_THROWS_AS(MarkovChain(100, 1, 0, 1), RunError);
  CHECK_THROWS_AS(MarkovChain(100, 1, 4, 1).optimal_loss({1}), RunError);
}
