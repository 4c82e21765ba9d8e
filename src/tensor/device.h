#pragma once
// Where a tensor lives (docs/architecture.md, "Tensors, models and optimizers"): the host, or one
// CUDA device. Spelled "cpu" and "cuda:N".
#include <string>

namespace sg {

enum class DeviceKind : unsigned char { Cpu, Cuda };

struct Device {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;  // which CUDA device; always 0 for the host

  static Device cpu() { return {}; }
  static Device cuda(int index) { return {DeviceKind::Cuda, index}; }
  bool is_cpu() const { return kind == DeviceKind::Cpu; }
  bool operator==(const Device&) const = default;
  std::string str() const;
};

// "cpu", "cuda" (device 0) or "cuda:N"; SpecError naming the text otherwise.
Device parse_device(const std::string& text);

}  // namespace sg
