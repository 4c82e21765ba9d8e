#pragma once
// Validation: the mean loss over eval.steps fixed micro-batches of the validation split (the
// same batches at every evaluation, so evaluations are comparable), shared by `train` and `eval`.
#include "config/job_spec.h"
#include "data/sequence_sampler.h"
#include "data/token_source.h"
#include "comm/communicator.h"
#include "model/gpt2.h"
#include "parallel/pipeline_schedule.h"

namespace sg {

SequenceSampler make_validation_sampler(const JobSpec& spec, const TokenSource& val);

float evaluate_validation(GPT2& model, const float* params, const TokenSource& val,
                          const SequenceSampler& sampler, int eval_steps);

// The same batches through a tensor/pipeline-split model: collective over `model_group` (the
// shards of one replica); `holds_loss` marks the one shard that reports the loss (tensor rank
// 0 of the last stage). Every process of the group gets the result.
float evaluate_validation(PipelineRunner& runner, int B, int T, const float* params,
                          const TokenSource& val, const SequenceSampler& sampler, int eval_steps,
                          Communicator& model_group, bool holds_loss);

}  // namespace sg
