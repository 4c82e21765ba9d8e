#include "data/token_dataset.h"

#include <fmt/format.h>

#include "config/job_spec.h"
#include "data/markov_chain.h"
#include "util/error.h"

namespace sg {
namespace {

// Distinct, fixed stream seeds so train and validation are different sample paths of one chain.
constexpr uint64_t kTrainStream = 0x747261696eULL;  // "train"
constexpr uint64_t kValStream = 0x76616cULL;        // "val"

TokenSplits open_synthetic(const JobSpec& spec) {
  const DataSpec& d = spec.data;
  const int vocab = spec.model.config().data().vocab;
  const MarkovChain chain(vocab, d.synthetic_order, d.synthetic_branching, spec.seed);
  const std::string law = fmt::format("Markov chain (vocab {}, order {}, branching {}, seed {})",
                                      vocab, d.synthetic_order,
                                      d.synthetic_branching, spec.seed);
  TokenSplits splits;
  std::vector<uint16_t> val = chain.generate(d.synthetic_val_tokens, spec.seed ^ kValStream);
  splits.best_val_loss = chain.optimal_loss(val);
  splits.train = std::make_unique<InMemoryTokens>(
      chain.generate(d.synthetic_train_tokens, spec.seed ^ kTrainStream), vocab,
      "synthetic train: " + law);
  splits.val = std::make_unique<InMemoryTokens>(std::move(val), vocab,
                                                "synthetic val: " + law);
  splits.description = fmt::format(
      "synthetic {}: {} train / {} val tokens; best possible val loss {:.4f}", law,
      d.synthetic_train_tokens, d.synthetic_val_tokens, *splits.best_val_loss);
  return splits;
}

}  // namespace

TokenSplits open_token_dataset(const JobSpec& spec) {
  const DataSpec& d = spec.data;
  const int vocab = spec.model.config().data().vocab;
  const std::string where = spec.source.empty() ? "job spec" : spec.source;
  if (d.dataset == DatasetKind::Synthetic) {
    if (vocab > 65536)
      throw SpecError(where + ": model.vocab " + std::to_string(vocab) +
                      " is too large for synthetic data (tokens are uint16, at most 65536)");
    if (d.synthetic_order < 1 || d.synthetic_branching < 1)
      throw SpecError(where + ": data.synthetic_order and data.synthetic_branching must be >= 1");
    return open_synthetic(spec);
  }
  const std::string dataset(to_string(d.dataset));
  if (!is_shard_dataset(d.dataset))
    throw SpecError(where + ": data.dataset " + dataset +
                    " is not a token dataset (use openwebtext, wikipedia, tokens or synthetic)");
  if (d.train.empty() || d.val.empty())
    throw SpecError(where + ": data.dataset " + dataset +
                    " needs data.train and data.val: globs of token shards made by "
                    "`singularity prepare` (e.g. data/" + dataset + "/train_*.bin)");
  TokenSplits splits;
  splits.train = std::make_unique<ShardedTokens>(d.train, vocab);
  splits.val = std::make_unique<ShardedTokens>(d.val, vocab);
  splits.description = dataset + ": train " + splits.train->describe() + ", val " +
                       splits.val->describe();
  return splits;
}

}  // namespace sg
