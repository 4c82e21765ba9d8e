#pragma once
// The denominator of MFU on a GPU (devices.peak_tflops = 0): the vendor's dense peak for the
// precision the job computes in (fp32 without TF32, or bf16/fp16 tensor cores), from the
// device's name and compute capability. 0 when the device is not in the table: the job then
// says to set devices.peak_tflops.
#include <string>

#include "backend/device.h"

namespace sg {

double gpu_peak_flops(const CudaDeviceInfo& device, const std::string& precision);

}  // namespace sg
