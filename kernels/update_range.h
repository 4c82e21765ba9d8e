#pragma once
// One stretch of a flat parameter array that an optimizer update covers, with the weight decay
// its tensors take. The optimizers hand every stretch of a step to one call (kernels/sgd.h,
// kernels/adamw.h): on the CPU one parallel region instead of one per stretch, each a wake-up
// of the OpenMP workers.

namespace sg {

struct UpdateRange {
  long begin = 0, end = 0;  // [begin, end), indices into params, state and grads alike
  float weight_decay = 0;
};

}  // namespace sg
