#pragma once
// The communicator over device memory (docs/architecture.md, "The virtual mesh"): NCCL between the
// GPUs of a host group's processes (kernels/cuda/nccl_communicator.cu), one GPU per process,
// reached through the CUDA module (src/backend/cuda_loader.cpp), which throws where the build has
// none.
#include <memory>

#include "backend/backend.h"
#include "comm/communicator.h"

namespace sg {

// A communicator over `backend`'s device memory for the processes of `host_group` (every one of
// them calls this, collectively): rank r of the host group is rank r here. `backend` must be
// the cuda backend; RunError otherwise, or when NCCL cannot set the group up.
std::unique_ptr<Communicator> make_device_communicator(Communicator& host_group, Backend& backend);

}  // namespace sg
