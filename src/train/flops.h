#pragma once
// Model FLOPs, counted as PaLM / nanoGPT do: 6 per parameter per token for forward + backward
// (matmuls only, embeddings included, at the real vocabulary), plus the attention core
// (QK^T and PV: 4*T*C per layer forward, x3 for forward + backward, halved for causality).
#include <cstdint>

#include "model/parameter_layout.h"

namespace sg {

double training_flops_per_token(const ParameterLayout& layout, int seq_len);

}  // namespace sg
