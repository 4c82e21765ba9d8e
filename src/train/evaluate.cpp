#include "train/evaluate.h"

#include <vector>

namespace sg {

SequenceSampler make_validation_sampler(const JobSpec& spec, const TokenSource& val) {
  // Its own seed stream, so validation windows do not follow the training order.
  return SequenceSampler(val.size(), spec.seq_len(), spec.seed ^ 0x5eed0fda7aull);
}

float evaluate_validation(GPT2& model, const float* params, const TokenSource& val,
                          const SequenceSampler& sampler, int eval_steps) {
  const int B = model.batch(), T = model.seq_len();
  std::vector<int32_t> inputs(static_cast<size_t>(B) * T), targets(inputs.size());
  double sum = 0;
  for (int i = 0; i < eval_steps; ++i) {
    fill_batch(inputs.data(), targets.data(), val, sampler, static_cast<uint64_t>(i) * B, B, T);
    sum += model.forward(params, inputs.data(), targets.data());
  }
  return static_cast<float>(sum / eval_steps);
}

float evaluate_validation(PipelineRunner& runner, int B, int T, const float* params,
                          const TokenSource& val, const SequenceSampler& sampler, int eval_steps,
                          Communicator& model_group, bool holds_loss) {
  double sum = runner.forward_only(params, eval_steps, [&](int i, int32_t* in, int32_t* tgt) {
    fill_batch(in, tgt, val, sampler, static_cast<uint64_t>(i) * B, B, T);
  });
  if (!holds_loss) sum = 0;
  model_group.all_reduce_sum(&sum, 1);  // one non-zero term: exact
  return static_cast<float>(sum / eval_steps);
}

}  // namespace sg
