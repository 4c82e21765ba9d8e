#include "parallel/process_mesh.h"

#include <algorithm>

#include "comm/nccl_factory.h"
#include "comm/staged_communicator.h"

namespace sg {

ProcessMesh make_process_mesh(const JobSpec& spec, Communicator& world) {
  ProcessMesh m;
  m.tensors = spec.parallel.tensor;
  m.stages = spec.parallel.pipeline;
  const int model_parallel = m.tensors * m.stages;
  const int p = world.rank();
  m.tensor = p % m.tensors;
  m.stage = (p / m.tensors) % m.stages;
  m.data = p / model_parallel;
  m.data_processes = world.size() / model_parallel;
  const int coordinate = m.tensor + m.tensors * m.stage;
  m.data_group = world.split(coordinate, m.data);
  m.model_group = world.split(m.data, coordinate);
  m.tensor_group = world.split(m.data * m.stages + m.stage, m.tensor);
  m.pipeline_group = world.split(m.data * m.tensors + m.tensor, m.stage);
  return m;
}

void attach_device_groups(ProcessMesh& mesh, Backend& backend, DeviceTransport transport) {
  if (backend.device().is_cpu()) return;
  // A group of one never makes an NCCL communicator (no unique id, no network set-up): the
  // staged communicator over it moves nothing, so a one-GPU job does not depend on NCCL.
  auto device_group = [&](Communicator& host) -> std::unique_ptr<Communicator> {
    if (transport == DeviceTransport::Native && host.size() > 1) {
      return make_device_communicator(host, backend);
    }
    return std::make_unique<StagedCommunicator>(host, backend);
  };
  mesh.data_device_ = device_group(*mesh.data_group);
  mesh.tensor_device_ = device_group(*mesh.tensor_group);
  mesh.pipeline_device_ = std::make_unique<StagedCommunicator>(*mesh.pipeline_group, backend);
}

namespace {

// Whole tensors of `whole_list` assembled from the local tensors of `local_list`.
void gather_whole(const ParameterLayout& layout, const std::vector<ParamTensor>& local_list,
                  const std::vector<ParamTensor>& whole_list, const float* local,
                  std::vector<float>& whole, size_t whole_total, Communicator& model_group) {
  const bool root = model_group.rank() == 0;
  if (root) whole.resize(whole_total);
  std::vector<const ParamTensor*> held(layout.model().tensors.size(), nullptr);
  for (const ParamTensor& t : local_list) {
    if (owns_tensor(t, layout.shard())) held[t.global_index] = &t;
  }
  std::vector<float> piece;
  for (const ParamTensor& w : whole_list) {
    piece.assign(w.numel, -0.0f);  // x + -0 == x for every x, including +0 and -0
    const ParamTensor* t = held[w.global_index];
    if (t != nullptr) {
      for_each_run(*t, layout.shard(), [&](size_t l, size_t g, size_t n) {
        std::copy_n(local + t->offset + l, n, piece.data() + g);
      });
    }
    model_group.all_reduce_sum(piece.data(), piece.size());
    if (root) std::copy(piece.begin(), piece.end(), whole.begin() + static_cast<long>(w.offset));
  }
}

}  // namespace

void gather_whole_model(const ParameterLayout& layout, const float* local, std::vector<float>& whole,
                        Communicator& model_group) {
  const ParameterLayout whole_layout(layout.model());
  gather_whole(layout, layout.tensors(), whole_layout.tensors(), local, whole,
               whole_layout.total(), model_group);
}

void gather_whole_buffers(const ParameterLayout& layout, const float* local,
                          std::vector<float>& whole, Communicator& model_group) {
  const ParameterLayout whole_layout(layout.model());
  gather_whole(layout, layout.buffers(), whole_layout.buffers(), local, whole,
               whole_layout.buffer_total(), model_group);
}

}  // namespace sg
