#pragma once
// Where this process sits in the virtual mesh data x tensor x pipeline
// (docs/architecture.md, "The virtual mesh") and the communicators of its groups, all splits of the
// world. Process p has tensor rank p % T, pipeline stage (p / T) % S and data index p / (T*S) (the
// order `plan` prints); the data index picks which block of virtual data-parallel replicas it runs.
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "config/job_spec.h"
#include "model/parameter_layout.h"

namespace sg {

struct ProcessMesh {
  int tensor = 0, stage = 0, data = 0;          // this process's coordinates
  int tensors = 1, stages = 1, data_processes = 1;
  std::unique_ptr<Communicator> data_group;      // same (tensor, stage): gradient reduction, ZeRO
  std::unique_ptr<Communicator> model_group;     // same data index: the shards of one replica
  std::unique_ptr<Communicator> tensor_group;    // same data index and stage
  std::unique_ptr<Communicator> pipeline_group;  // same data index and tensor rank; rank = stage

  // The data, tensor and pipeline groups over the backend's memory, for the buffers the ops
  // read and write (gradients, parameters, activations); the groups above carry host memory
  // (losses, norms, checkpoints). On the host backend they are the same communicators.
  Communicator& data_device() const { return data_device_ ? *data_device_ : *data_group; }
  Communicator& tensor_device() const { return tensor_device_ ? *tensor_device_ : *tensor_group; }
  Communicator& pipeline_device() const {
    return pipeline_device_ ? *pipeline_device_ : *pipeline_group;
  }
  std::unique_ptr<Communicator> data_device_, tensor_device_, pipeline_device_;

  ModelShard shard() const { return {tensor, tensors, stage, stages}; }
  // The one shard of a replica that holds the loss (all tensor ranks of the last stage compute
  // it; rank 0 reports it).
  bool reports_loss() const { return tensor == 0 && stage == stages - 1; }
};

// Collective over world.
ProcessMesh make_process_mesh(const JobSpec& spec, Communicator& world);

// How device memory crosses processes: Staged through host memory and the MPI groups (shared
// GPUs, test backends), or Native (NCCL for the data and tensor groups; pipeline stages stay
// staged, whose non-blocking sends keep two stages from waiting on each other).
enum class DeviceTransport { Staged, Native };
// Gives the mesh its device groups for `backend` (nothing to do on the host backend).
// Collective over the world.
void attach_device_groups(ProcessMesh& mesh, Backend& backend, DeviceTransport transport);

// The whole model (unsharded layout) from the shards of one replica, for rank 0 of model_group
// (the others leave `whole` empty): collective over model_group, one tensor at a time, so only
// rank 0 ever holds a whole-model buffer. Exact: each element comes from the one shard that owns
// it and the others add -0.0f. gather_whole_buffers does the same for the buffers (running
// statistics).
void gather_whole_model(const ParameterLayout& layout, const float* local, std::vector<float>& whole,
                        Communicator& model_group);
void gather_whole_buffers(const ParameterLayout& layout, const float* local,
                          std::vector<float>& whole, Communicator& model_group);

}  // namespace sg
