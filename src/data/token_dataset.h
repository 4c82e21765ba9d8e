#pragma once
// Opens the train and validation tokens a job spec names (data.dataset): token shards for
// openwebtext | wikipedia | tokens, or a generated Markov chain for synthetic.
#include <memory>
#include <optional>
#include <string>

#include "data/token_source.h"

namespace sg {

struct JobSpec;

struct TokenSplits {
  std::unique_ptr<TokenSource> train, val;
  // The best validation loss any model can reach, where it is known (synthetic data).
  std::optional<double> best_val_loss;
  std::string description;  // one line for the log
};

// Throws SpecError for a dataset that is not made of tokens or a missing glob, RunError for
// missing or corrupt shards.
TokenSplits open_token_dataset(const JobSpec& spec);

}  // namespace sg
