#pragma once
// Validation: the mean loss (and the family's metrics, e.g. top-1/top-5 accuracy) over
// eval.steps fixed micro-batches of the validation source (its first samples, the same at every
// evaluation, so evaluations are comparable), shared by `train` and `eval`.
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "data/batch_source.h"
#include "model/model_family.h"
#include "parallel/pipeline_schedule.h"

namespace sg {

struct Evaluation {
  float loss = 0;
  std::vector<double> metrics;  // family.metric_names(), each a fraction of the samples
  // (name, value) pairs for the metrics log.
  std::vector<std::pair<std::string, double>> named(const ModelFamily& family) const;
};

// Through this process's stage of the model: collective over `model_group` (the shards of one
// replica); `holds_loss` marks the one shard that reports the loss (tensor rank 0 of the last
// stage). Every process of the group gets the result.
Evaluation evaluate_validation(PipelineRunner& runner, const ModelFamily& family,
                               BatchSource& val, int micro_batch, int steps,
                               const float* params, float* buffers, Communicator& model_group,
                               bool holds_loss);

}  // namespace sg
