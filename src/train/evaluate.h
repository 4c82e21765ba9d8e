#pragma once
// Validation: the mean loss over eval.steps fixed micro-batches of the validation split (the
// same batches at every evaluation, so evaluations are comparable), shared by `train` and `eval`.
#include "config/job_spec.h"
#include "data/sequence_sampler.h"
#include "data/token_source.h"
#include "model/gpt2.h"

namespace sg {

SequenceSampler make_validation_sampler(const JobSpec& spec, const TokenSource& val);

float evaluate_validation(GPT2& model, const float* params, const TokenSource& val,
                          const SequenceSampler& sampler, int eval_steps);

}  // namespace sg
