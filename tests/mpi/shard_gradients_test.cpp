// Every gradient of a tensor- and pipeline-split GPT-2 against the whole model's, under mpirun:
//   mpirun -np T*S test_shard_gradients T S gpipe|1f1b
// Each rank runs its shard through the pipeline schedule on the same two micro-batches; the
// shards' gradients are assembled into whole tensors (the checkpoint path) and compared, tensor
// by tensor, with one process's whole-model gradients, relative to each tensor's largest
// gradient (the tied embedding's: the first stage's after the last stage's part was added). Also
// checks that replicated tensors get bitwise equal gradients on every tensor rank, and the loss.
// Prints one line per failing tensor and a summary; exits 1 on any failure.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "launch/process_world.h"
#include "model/gpt2.h"
#include "model/gpt2_family.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/process_mesh.h"
#include "parallel/tensor_group.h"
#include "util/rng.h"

namespace {

constexpr int kB = 2, kT = 16, kMicroBatches = 2;
const sg::GPT2Shape kShape{3, 4, 32, 16, 200, 256};

void fill_tokens(int m, int32_t* inputs, int32_t* targets) {
  sg::Rng rng(1000 + static_cast<uint64_t>(m));
  for (int i = 0; i < kB * kT; ++i) {
    inputs[i] = static_cast<int32_t>(rng.next_u64() % kShape.vocab);
    targets[i] = static_cast<int32_t>(rng.next_u64() % kShape.vocab);
  }
}

int run(int tensors, int stages, sg::PipelineSchedule schedule) {
  auto world = sg::open_world(sg::detect_launcher());
  if (world->size() != tensors * stages) {
    std::fprintf(stderr, "run under mpirun -np %d\n", tensors * stages);
    return 2;
  }
  sg::JobSpec spec;
  spec.parallel.tensor = tensors;
  spec.parallel.pipeline = stages;
  const sg::ProcessMesh mesh = sg::make_process_mesh(spec, *world);
  const sg::ParameterLayout whole(sg::gpt2_description(kShape));
  const sg::ParameterLayout layout(sg::gpt2_description(kShape), mesh.shard());

  // Whole parameters, with noise on every element so biases and layernorms are not trivial.
  std::vector<float> whole_params(whole.total());
  sg::init_gpt2_parameters(whole_params.data(), kShape, whole, 0.05f, 42);
  sg::Rng noise(7);
  for (float& p : whole_params) p += 0.05f * static_cast<float>(noise.normal());
  std::vector<float> params(layout.total()), grads(layout.total(), 0.0f);
  sg::slice_from_global(layout, whole_params.data(), params.data());

  const float dloss = 1.0f / (kMicroBatches * kB * kT);
  sg::TensorGroup tensor_group(*mesh.tensor_group, false);
  sg::GPT2 model(kShape, layout, kB, kT,
                 sg::pipeline_slots(schedule, mesh.stage, stages, kMicroBatches), &tensor_group);
  sg::GPT2Family family(kShape, kT, 0.02f);
  sg::PipelineRunner runner(model, family.batch_fields(kB), *mesh.pipeline_group, schedule,
                            kMicroBatches);
  double loss = runner.train(params.data(), nullptr, grads.data(), dloss,
                             [](int m, sg::MicroBatch& batch) {
                               fill_tokens(m, batch.data<int32_t>(0), batch.data<int32_t>(1));
                             },
                             /*update_buffers=*/false);
  sg::Buffer scratch;
  sg::add_tied_grads(layout, grads.data(), *mesh.pipeline_group, scratch, sg::cpu_backend());
  if (!mesh.reports_loss()) loss = 0;
  world->all_reduce_sum(&loss, 1);

  int failures = 0;
  // Replicated tensors: bitwise the same gradient on every tensor rank.
  for (const sg::ParamTensor& t : layout.tensors()) {
    if (t.split != sg::TensorSplit::kWhole) continue;
    std::vector<float> mine(grads.begin() + static_cast<long>(t.offset),
                            grads.begin() + static_cast<long>(t.offset + t.numel));
    std::vector<float> first = mine;
    mesh.tensor_group->broadcast(first.data(), first.size() * sizeof(float), 0);
    if (first != mine) {
      std::printf("rank %d: %s: replicated gradient differs from tensor rank 0\n", world->rank(),
                  t.name.c_str());
      ++failures;
    }
  }
  std::vector<float> assembled;
  sg::gather_whole_model(layout, grads.data(), assembled, *mesh.model_group);

  if (world->rank() == 0) {
    sg::GPT2 reference(kShape, whole, kB, kT);
    std::vector<float> expected(whole.total(), 0.0f);
    std::vector<int32_t> inputs(kB * kT), targets(kB * kT);
    double expected_loss = 0;
    for (int m = 0; m < kMicroBatches; ++m) {
      fill_tokens(m, inputs.data(), targets.data());
      expected_loss += reference.forward(whole_params.data(), inputs.data(), targets.data(), dloss);
      reference.backward(expected.data(), whole_params.data(), inputs.data(), targets.data(), dloss);
    }
    double worst = 0;
    for (const sg::ParamTensor& t : whole.tensors()) {
      double scale = 0, diff = 0;
      for (size_t i = t.offset; i < t.offset + t.numel; ++i) {
        scale = std::max(scale, std::fabs(static_cast<double>(expected[i])));
        diff = std::max(diff, std::fabs(static_cast<double>(assembled[i]) - expected[i]));
      }
      const double relative = scale > 0 ? diff / scale : diff;
      worst = std::max(worst, relative);
      if (!(relative <= 1e-5)) {
        std::printf("%s: gradient differs by %.3g of its largest element\n", t.name.c_str(),
                    relative);
        ++failures;
      }
    }
    const double loss_error = std::fabs(loss - expected_loss) / expected_loss;
    if (!(loss_error <= 1e-6)) {
      std::printf("loss %.9g, whole model %.9g\n", loss, expected_loss);
      ++failures;
    }
    std::printf("tensor %d x pipeline %d (%s): worst relative gradient difference %.3g over %zu "
                "tensors, loss difference %.3g\n",
                tensors, stages, std::string(sg::to_string(schedule)).c_str(), worst, whole.tensors().size(), loss_error);
  }
  double total_failures = failures;
  world->all_reduce_sum(&total_failures, 1);
  return total_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: mpirun -np T*S %s T S gpipe|1f1b\n", argv[0]);
    return 2;
  }
  try {
    const auto schedule = sg::parse_spec_enum<sg::PipelineSchedule>(argv[3]);
    if (!schedule) throw sg::SpecError(std::string("unknown schedule ") + argv[3]);
    return run(std::atoi(argv[1]), std::atoi(argv[2]), *schedule);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%serror: %s\n", sg::rank_prefix().c_str(), e.what());
    sg::abort_job(1);
    return 1;
  }
}
