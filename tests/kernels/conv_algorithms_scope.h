#pragma once
// Sets the CPU convolution's algorithm choice (kernels/conv2d.h) for one scope and restores the
// process's choice after it, so a test runs the path it means to whatever SINGULARITY_CONV says.
#include "kernels/conv2d.h"

namespace sg::test {

class ConvAlgorithmsScope {
 public:
  explicit ConvAlgorithmsScope(const cpu::ConvAlgorithms& chosen)
      : saved_(cpu::conv_algorithms()) {
    cpu::set_conv_algorithms(chosen);
  }
  ~ConvAlgorithmsScope() { cpu::set_conv_algorithms(saved_); }
  ConvAlgorithmsScope(const ConvAlgorithmsScope&) = delete;
  ConvAlgorithmsScope& operator=(const ConvAlgorithmsScope&) = delete;

 private:
  cpu::ConvAlgorithms saved_;
};

// oneDNN's direct kernels for every layer.
inline constexpr cpu::ConvAlgorithms kDirect{false, false};

}  // namespace sg::test
