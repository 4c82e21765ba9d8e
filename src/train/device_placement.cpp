#include "train/device_placement.h"

#include <fmt/format.h>

#include "backend/device.h"
#include "launch/process_world.h"
#include "util/error.h"

namespace sg {

DevicePlacement place_on_device(const JobSpec& spec, Communicator& world) {
  DevicePlacement p;
  if (spec.devices.backend != BackendKind::Cuda) return p;
  const std::vector<CudaDeviceInfo> gpus = cuda_devices();
  if (gpus.empty()) {
    throw RunError("devices.backend is cuda but this process sees no GPU (check the driver with "
                   "nvidia-smi and CUDA_VISIBLE_DEVICES), or set devices.backend: cpu");
  }
  const NodeShare node = node_share(world.size());
  const int local_rank = node.local_rank;
  const int local_size = node.local_size;
  const int count = static_cast<int>(gpus.size());
  if (spec.devices.share_gpus) {
    p.device = local_rank % count;
    p.transport = DeviceTransport::Staged;
    p.note = fmt::format("cuda:{} ({}), shared by {} process(es) on {} GPU(s) of this node "
                         "(devices.share_gpus): tensors cross processes through host memory over "
                         "MPI, slower than NCCL",
                         p.device, gpus[static_cast<size_t>(p.device)].name, local_size, count);
    return p;
  }
  if (local_size > count) {
    throw SpecError(fmt::format(
        "{}: {} processes run on this node but it has {} GPU(s), one per process: run at most {} "
        "process(es) per node, or set devices.share_gpus: true to share them (MPI through host "
        "memory, slower)",
        spec.source, local_size, count, count));
  }
  p.device = local_rank;
  p.transport = DeviceTransport::Native;
  p.note = fmt::format("cuda:{} ({}), NCCL between processes", p.device,
                       gpus[static_cast<size_t>(p.device)].name);
  return p;
}

}  // namespace sg
