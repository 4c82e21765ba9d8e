#include <cmath>

#include <fmt/format.h>

#include "cli/checkpoint_lookup.h"
#include "cli/commands.h"
#include "data/token_dataset.h"
#include "model/gpt2.h"
#include "train/evaluate.h"
#include "train/train_checkpoint.h"

namespace sg {

int run_eval_command(const std::string& job_path, const std::vector<std::string>& sets,
                     const std::string& checkpoint) {
  const CheckpointModel loaded = load_checkpoint_model(job_path, sets, checkpoint);
  const JobSpec& spec = loaded.spec;
  TokenSplits data = open_token_dataset(spec);
  GPT2 model(*loaded.layout, spec.train.micro_batch, spec.seq_len());
  const float loss = evaluate_validation(model, loaded.params.data(), *data.val,
                                         make_validation_sampler(spec, *data.val),
                                         spec.eval.steps);
  fmt::print("checkpoint {} (step {})\n", loaded.path, loaded.state.step);
  fmt::print("val loss {:.4f}, perplexity {:.3f} over {} x {} x {} tokens\n", loss,
             std::exp(static_cast<double>(loss)), spec.eval.steps, spec.train.micro_batch,
             spec.seq_len());
  if (data.best_val_loss) fmt::print("best possible val loss {:.4f}\n", *data.best_val_loss);
  return 0;
}

}  // namespace sg
