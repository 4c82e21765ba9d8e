#include "backend/gpu_peak.h"

namespace sg {

double gpu_peak_flops(const CudaDeviceInfo& device, const std::string& precision) {
  const bool reduced = precision == "bf16" || precision == "fp16";
  const auto has = [&](const char* s) { return device.name.find(s) != std::string::npos; };
  // Dense (no sparsity) SXM figures from NVIDIA's data sheets, in TFLOP/s.
  struct Peak {
    double fp32, reduced;
  };
  Peak peak{0, 0};
  if (has("H100") || has("H200") || has("GH200")) {
    peak = has("PCIe") ? Peak{51.2, 756.5} : Peak{66.9, 989.4};
  } else if (has("A100")) {
    peak = {19.5, 312.0};
  } else if (has("L40S")) {
    peak = {91.6, 362.1};
  } else if (device.compute_major == 9 && device.compute_minor == 0) {
    peak = {66.9, 989.4};  // another Hopper: assume the SXM part
  } else if (device.compute_major == 8 && device.compute_minor == 0) {
    peak = {19.5, 312.0};
  }
  return (reduced ? peak.reduced : peak.fp32) * 1e12;
}

}  // namespace sg
