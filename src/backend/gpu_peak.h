#pragma once
// NVIDIA's data sheets for the GPUs we name: the denominator of MFU on a GPU
// (devices.peak_tflops = 0) and what `plan --gpu` prices a step with (gpu_estimate.h).
#include <string>
#include <vector>

#include "backend/device.h"
#include "config/spec_enums.h"

namespace sg {

struct GpuSheet {
  std::string key;           // what `plan --gpu` takes: "h200"
  std::string name;          // "NVIDIA H200 SXM"
  double fp32_tflops = 0;    // dense fp32 on the CUDA cores (no TF32)
  double reduced_tflops = 0; // dense bf16 / fp16 on the tensor cores
  double memory_tbs = 0;     // device memory bandwidth, TB/s
  double memory_gib = 0;
};

// The GPUs `plan --gpu` knows, in the order it lists them.
const std::vector<GpuSheet>& gpu_sheets();
// The sheet for `key` (case-insensitive), or null.
const GpuSheet* find_gpu_sheet(const std::string& key);

// The dense peak in FLOP/s for the precision the job computes in (fp32 without TF32, or
// bf16/fp16 tensor cores), from the device's name and compute capability. 0 when the device is
// not in the table: the job then says to set devices.peak_tflops.
double gpu_peak_flops(const CudaDeviceInfo& device, Precision precision);

}  // namespace sg
