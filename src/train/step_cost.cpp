#include "train/step_cost.h"

#include "comm/communicator.h"
#include "config/job_spec.h"
#include "model/model_family.h"
#include "optim/optimizer.h"
#include "parallel/pipeline_schedule.h"
#include "tensor/buffer.h"

namespace sg {

CountedStep count_training_step(const JobSpec& spec, int micro_batches) {
  CostBackend backend;
  backend.set_precision(spec.train.precision);
  auto family = make_model_family(spec);
  family->set_activation_policy({BackendKind::Cuda, spec.train.recompute,
                                 backend.activation_dtype()});
  const ParameterLayout layout(family->description());
  const int micro = spec.train.micro_batch;
  StageContext context;
  context.backend = &backend;
  context.micro_batch = micro;
  context.slots = pipeline_slots(spec.parallel.schedule, 0, 1, micro_batches);
  auto stage = family->make_stage(layout, context);
  auto alone = make_single_process_communicator();
  PipelineRunner runner(*stage, family->batch_fields(micro), *alone, spec.parallel.schedule,
                        micro_batches, backend);
  Buffer params(backend, layout.total() * sizeof(float));
  Buffer grads(backend, layout.total() * sizeof(float));
  Buffer buffers(backend, std::max<size_t>(1, layout.buffer_total()) * sizeof(float));
  auto optimizer = make_optimizer(spec.optim, layout, 0, layout.total(), backend);

  backend.reset_counts();
  backend.zero(grads.as<float>(), layout.total());
  const float dloss = 1.0f / static_cast<float>(micro * micro_batches);
  runner.train(params.as<float>(), buffers.as<float>(), grads.as<float>(), dloss,
               [](int, MicroBatch&) {}, /*update_buffers=*/true);
  optimizer->step(params.as<float>(), grads.as<float>(), spec.optim.lr, /*step=*/1);

  CountedStep counted;
  counted.ops = backend.ops();
  counted.micro_batches = micro_batches;
  counted.device_bytes = backend.device_memory_peak();
  return counted;
}

}  // namespace sg
