#include <fmt/format.h>

#include "backend/backend.h"
#include "cli/checkpoint_lookup.h"
#include "cli/commands.h"
#include "comm/communicator.h"
#include "data/batch_source.h"
#include "parallel/pipeline_schedule.h"
#include "train/evaluate.h"

namespace sg {

int run_eval_command(const std::string& job_path, const std::vector<std::string>& sets,
                     const std::string& checkpoint) {
  CheckpointModel loaded = load_checkpoint_model(job_path, sets, checkpoint);
  const JobSpec& spec = loaded.spec;
  const ModelFamily& family = *loaded.family;
  const int micro = spec.train.micro_batch;
  const std::vector<BatchField> fields = family.batch_fields(micro);
  Dataset data = open_dataset(spec, fields);
  StageContext context;
  context.backend = &cpu_backend();
  context.micro_batch = micro;
  auto stage = family.make_stage(*loaded.layout, context);
  auto alone = make_single_process_communicator();
  PipelineRunner runner(*stage, fields, *alone, spec.parallel.schedule, 1);
  const Evaluation e = evaluate_validation(runner, family, *data.val, micro, spec.eval.steps,
                                           loaded.params.data(), loaded.buffers.data(), *alone,
                                           /*holds_loss=*/true);
  fmt::print("checkpoint {} (step {})\n", loaded.path, loaded.state.step);
  const int units = family.units_per_sample();
  fmt::print("{} over {} x {}{} {}\n", family.evaluation_summary(e.loss, e.metrics),
             spec.eval.steps, micro, units > 1 ? fmt::format(" x {}", units) : std::string(),
             family.sample_unit());
  if (data.best_val_loss) fmt::print("best possible val loss {:.4f}\n", *data.best_val_loss);
  return 0;
}

}  // namespace sg
