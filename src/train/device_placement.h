#pragma once
// Which device a training process uses and how device memory crosses processes
// (docs/architecture.md, "Backends and kernels"):
// on the CPU backend, the host and MPI; on CUDA, one GPU per process by local rank with NCCL
// between them, or, with devices.share_gpus, several processes per GPU talking MPI through host
// memory (NCCL refuses two ranks on one device).
#include <string>

#include "comm/communicator.h"
#include "config/job_spec.h"
#include "parallel/process_mesh.h"

namespace sg {

struct DevicePlacement {
  int device = 0;  // CUDA device index
  DeviceTransport transport = DeviceTransport::Staged;
  std::string note;  // one line for the log; empty on the CPU
};

// SpecError when the node has fewer GPUs than processes and the job does not share them;
// RunError when no GPU is visible.
DevicePlacement place_on_device(const JobSpec& spec, Communicator& world);

}  // namespace sg
