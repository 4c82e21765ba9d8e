#include "backend/gpu_peak.h"

#include <algorithm>
#include <cctype>

namespace sg {

// Dense (no sparsity) figures from NVIDIA's data sheets: SXM parts unless named otherwise.
const std::vector<GpuSheet>& gpu_sheets() {
  static const std::vector<GpuSheet> sheets = {
      {"h200", "NVIDIA H200 SXM", 66.9, 989.4, 4.8, 141},
      {"h100", "NVIDIA H100 SXM", 66.9, 989.4, 3.35, 80},
      {"h100-pcie", "NVIDIA H100 PCIe", 51.2, 756.5, 2.0, 80},
      {"a100", "NVIDIA A100 SXM 80GB", 19.5, 312.0, 2.039, 80},
      {"l40s", "NVIDIA L40S", 91.6, 362.1, 0.864, 48},
  };
  return sheets;
}

const GpuSheet* find_gpu_sheet(const std::string& key) {
  std::string lower = key;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const GpuSheet& sheet : gpu_sheets()) {
    if (sheet.key == lower) return &sheet;
  }
  return nullptr;
}

double gpu_peak_flops(const CudaDeviceInfo& device, Precision precision) {
  const bool reduced = precision != Precision::FP32;
  const auto has = [&](const char* s) { return device.name.find(s) != std::string::npos; };
  const char* key = nullptr;
  if (has("H100") || has("H200") || has("GH200")) {
    key = has("PCIe") ? "h100-pcie" : "h200";  // H100 SXM and H200 compute alike
  } else if (has("A100")) {
    key = "a100";
  } else if (has("L40S")) {
    key = "l40s";
  } else if (device.compute_major == 9 && device.compute_minor == 0) {
    key = "h100";  // another Hopper: assume the SXM part
  } else if (device.compute_major == 8 && device.compute_minor == 0) {
    key = "a100";
  }
  const GpuSheet* sheet = key != nullptr ? find_gpu_sheet(key) : nullptr;
  if (sheet == nullptr) return 0;
  return (reduced ? sheet->reduced_tflops : sheet->fp32_tflops) * 1e12;
}

}  // namespace sg
