#include "train/evaluate.h"

namespace sg {

std::vector<std::pair<std::string, double>> Evaluation::named(const ModelFamily& family) const {
  std::vector<std::pair<std::string, double>> out;
  const auto names = family.metric_names();
  for (size_t i = 0; i < names.size() && i < metrics.size(); ++i) out.emplace_back(names[i], metrics[i]);
  return out;
}

Evaluation evaluate_validation(PipelineRunner& runner, const ModelFamily& family,
                               BatchSource& val, int micro_batch, int steps,
                               const float* params, float* buffers, Communicator& model_group,
                               bool holds_loss) {
  const size_t metric_count = family.metric_names().size();
  std::vector<uint64_t> firsts;
  for (int i = 0; i < steps; ++i) firsts.push_back(static_cast<uint64_t>(i) * micro_batch);
  if (runner.consumes_batches()) val.prefetch(firsts, micro_batch);
  ForwardSums sums = runner.forward_only(
      params, buffers, steps, metric_count,
      [&](int i, MicroBatch& batch) { val.fill(batch, static_cast<uint64_t>(i) * micro_batch); });
  // One shard holds the results; the others add zeros, so the sums are exact.
  std::vector<double> all(1 + metric_count, 0.0);
  if (holds_loss) {
    all[0] = sums.loss;
    for (size_t i = 0; i < metric_count; ++i) all[1 + i] = sums.metrics[i];
  }
  model_group.all_reduce_sum(all.data(), all.size());
  Evaluation e;
  e.loss = static_cast<float>(all[0] / steps);
  for (size_t i = 0; i < metric_count; ++i) {
    e.metrics.push_back(all[1 + i] / (static_cast<double>(steps) * micro_batch));
  }
  return e;
}

}  // namespace sg
