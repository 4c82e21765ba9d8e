#include "train/flops.h"

namespace sg {

double training_flops_per_token(const ParameterLayout& layout, int seq_len) {
  const GPT2Shape& s = layout.shape();
  const double params = static_cast<double>(layout.real_parameter_count());
  const double attention = 6.0 * s.n_layer * static_cast<double>(seq_len) * s.n_embd;
  return 6.0 * params + attention;
}

}  // namespace sg
