#include "parallel/process_mesh.h"

#include <algorithm>

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

void gather_whole_model(const ParameterLayout& layout, const float* local, std::vector<float>& whole,
                        Communicator& model_group) {
  const ParameterLayout whole_layout(layout.shape());
  whole.assign(whole_layout.total(), -0.0f);  // x + -0 == x for every x, including +0 and -0
  write_owned_to_global(layout, local, whole.data());
  model_group.all_reduce_sum(whole.data(), whole.size());
}

}  // namespace sg
