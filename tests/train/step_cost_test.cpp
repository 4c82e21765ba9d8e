// One training step counted on the cost backend (train/step_cost.h) and priced on a GPU's data
// sheet (backend/gpu_estimate.h): the products' flops are exactly the model's, the memory it
// allocates is what `plan` reports, and the roofline takes the longer of arithmetic and bytes.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "backend/gpu_estimate.h"
#include "config/load_job_spec.h"
#include "model/model_family.h"
#include "parallel/pipeline_schedule.h"
#include "train/step_cost.h"

namespace {

const char* kGptJob = R"(
name: cost
model: {arch: gpt2, n_layer: 2, n_head: 4, n_embd: 64, context: 32, vocab: 200}
data: {dataset: synthetic}
train: {steps: 1, global_batch: 8, micro_batch: 4}
devices: {backend: cuda, processes: 1}
)";

std::map<std::string, sg::OpCost> by_name(const std::vector<sg::OpCost>& ops) {
  std::map<std::string, sg::OpCost> out;
  for (const sg::OpCost& op : ops) out[op.name] = op;
  return out;
}

}  // namespace

TEST_CASE("a GPT-2 step's products count 2 x 3 flops per weight per token, per micro-batch") {
  const sg::JobSpec spec = sg::parse_job_spec(kGptJob, "<job>", {});
  const int micro_batches = spec.grad_accum_steps();
  REQUIRE(micro_batches == 2);
  const sg::CountedStep step = sg::count_training_step(spec, micro_batches);
  auto ops = by_name(step.ops);
  // Per token: the four products of a block (qkv 3C^2, projection C^2, MLP 4C^2 twice) and the
  // head against the padded vocabulary (200 -> 256).
  const double C = 64, L = 2, Vp = 256, tokens = 8.0 * 32;
  const double forward = 2 * tokens * (L * 12 * C * C + C * Vp);
  CHECK(ops["matmul_forward"].flops == doctest::Approx(forward).epsilon(1e-12));
  CHECK(ops["matmul_forward"].calls == micro_batches * (4 * L + 1));
  // The backward: the weight gradient and the input gradient of every product.
  CHECK(ops["matmul_backward"].flops == doctest::Approx(2 * forward).epsilon(1e-12));
  // Attention: T(T+1)/2 causal pairs a head, 4 flops per pair per channel of every head
  // forward; 2.5x that back.
  const double attention = 8.0 * L * 4 * (32.0 * 33 / 2) * C;
  CHECK(ops["attention_forward"].flops == doctest::Approx(attention));
  CHECK(ops["attention_backward"].flops == doctest::Approx(2.5 * attention));
  CHECK(ops["attention_forward"].kind == sg::CostKind::Attention);
  CHECK_FALSE(ops["attention_forward"].reduced);
  // The optimizer reads and writes each parameter's value, m, v and gradient once: 28 bytes.
  const auto family = sg::make_model_family(spec);
  const double params = static_cast<double>(sg::ParameterLayout(family->description()).total());
  CHECK(ops["adamw_update"].bytes == doctest::Approx(28 * params));
  CHECK(ops["sum_of_squares"].bytes == doctest::Approx(4 * params));
  // Everything the step allocates: parameters, gradients, m and v, and the stage's activations
  // (the micro-batches the schedule keeps in flight), as `plan` sizes them, plus the batch.
  const int slots = sg::pipeline_slots(spec.parallel.schedule, 0, 1, micro_batches);
  const size_t activations =
      family->activation_bytes(sg::ParameterLayout(family->description()), 4, slots);
  CHECK(step.device_bytes >= static_cast<size_t>(16 * params) + activations);
  CHECK(step.device_bytes < static_cast<size_t>(16 * params) + activations + (1 << 20));
}

TEST_CASE("bf16 stores activations in 16 bits: no attention copies, 16-bit products") {
  const sg::JobSpec spec = sg::parse_job_spec(kGptJob, "<job>", {"train.precision=bf16"});
  const sg::CountedStep step = sg::count_training_step(spec, 1);
  auto ops = by_name(step.ops);
  CHECK(ops["matmul_forward"].reduced);
  CHECK_FALSE(ops["matmul_forward"].fp32_operands);
  CHECK_FALSE(ops["matmul_backward"].fp32_operands);
  // The weights (fp32 masters) are cast to their bf16 working copy once a step, all of the flat
  // buffer in one call (4 bytes read, 2 written each); the products cast nothing.
  const auto family = sg::make_model_family(spec);
  const sg::ParameterLayout layout(family->description());
  const double params = static_cast<double>(layout.total());
  CHECK(ops["convert"].bytes == doctest::Approx(6 * params));
  CHECK(ops["convert"].calls == 1);
  CHECK(ops.count("matmul_forward: bf16 casts") == 0);
  CHECK(family->weight_copy_bytes(layout) == layout.total() * 2);
  const double C = 64, L = 2;
  CHECK(ops["attention_forward"].reduced);
  // qkv and out are stored in bf16: cuDNN reads and writes them as they are. Its backward's
  // 16-bit gradients are added into the fp32 dqkv (2 bytes read, 4 read and written each).
  CHECK(ops.count("attention_forward: 16-bit copies") == 0);
  const double qkv = 4.0 * 32 * 3 * C * L;  // elements over the layers, one micro-batch of 4
  CHECK(ops["attention_backward: 16-bit copies"].bytes == doctest::Approx(10 * qkv));
  // The backward casts only its fp32 output gradients: the qkv gradient (attention adds into
  // it) and the residual stream's, for the two projections into it.
  const double residual = 4.0 * 32 * C;  // one micro-batch's residual stream
  CHECK(ops["matmul_backward: bf16 casts"].bytes == doctest::Approx(6 * (qkv + 2 * L * residual)));
  CHECK(ops["matmul_backward: bf16 casts"].calls == 3 * L);
  // GELU reads and writes 2 bytes an element: 4C per token per layer.
  CHECK(ops["gelu_forward"].bytes == doctest::Approx(4 * 4.0 * 32 * 4 * C * L));

  // fp16 keeps fp32 tensors: attention on 16-bit copies, products reading fp32 operands, and
  // more activation memory.
  const sg::JobSpec fp16 = sg::parse_job_spec(kGptJob, "<job>", {"train.precision=fp16"});
  const sg::CountedStep step16 = sg::count_training_step(fp16, 1);
  auto ops16 = by_name(step16.ops);
  CHECK(ops16["matmul_forward"].fp32_operands);
  REQUIRE(ops16.count("attention_forward: 16-bit copies") == 1);
  CHECK(ops16["attention_backward: 16-bit copies"].kind == sg::CostKind::Memory);
  CHECK(ops16["gelu_forward"].bytes == doctest::Approx(2 * ops["gelu_forward"].bytes));
  // The classifier reads and writes bf16 logits: about half the bytes (the losses stay fp32).
  CHECK(ops16["crossentropy_forward_backward"].bytes >
        1.9 * ops["crossentropy_forward_backward"].bytes);
  CHECK(step16.device_bytes > step.device_bytes);
  // fp32 has no copies: its attention reads the fp32 qkv itself.
  const sg::JobSpec fp32 = sg::parse_job_spec(kGptJob, "<job>", {});
  CHECK(by_name(sg::count_training_step(fp32, 1).ops).count("attention_forward: 16-bit copies") == 0);
}

// A small ResNet-18 on the CUDA backend: a step's counts.
const char* const kResNetJob = R"(
name: cost
model: {arch: resnet, depth: 18, width: 8, classes: 10, image_size: 32}
data: {dataset: synthetic}
optim: {name: sgd, lr: 0.1, momentum: 0.9}
train: {steps: 1, global_batch: 4, micro_batch: 4}
devices: {backend: cuda, processes: 1}
)";

TEST_CASE("a ResNet step counts its convolutions' products at the model's flops") {
  const sg::JobSpec spec = sg::parse_job_spec(kResNetJob, "<job>", {});
  const auto family = sg::make_model_family(spec);
  auto ops = by_name(sg::count_training_step(spec, 1).ops);
  const double forward = ops["conv2d_forward"].flops + ops["matmul_forward"].flops;
  const double backward = ops["conv2d_backward"].flops + ops["matmul_backward"].flops;
  // The family's training flops are 3 x the forward's products (convolutions and the head)...
  CHECK(3 * forward == doctest::Approx(family->training_flops_per_sample() * 4));
  // ... but the stem (7x7, stride 2, 3 -> 8 channels onto 16 x 16) needs no input gradient.
  const double stem = 2.0 * 4 * 16 * 16 * 8 * 3 * 7 * 7;
  CHECK(backward == doctest::Approx(2 * forward - stem));
  CHECK(ops["sgd_update"].calls > 0);
  CHECK(ops["conv2d_forward"].kind == sg::CostKind::Convolution);
}

TEST_CASE("a bf16 ResNet step: 16-bit convolutions, fused batch norms on 2-byte activations") {
  const sg::JobSpec fp32 = sg::parse_job_spec(kResNetJob, "<job>", {});
  const sg::JobSpec bf16 = sg::parse_job_spec(kResNetJob, "<job>", {"train.precision=bf16"});
  const sg::CountedStep step32 = sg::count_training_step(fp32, 1);
  const sg::CountedStep step16 = sg::count_training_step(bf16, 1);
  auto ops32 = by_name(step32.ops), ops16 = by_name(step16.ops);
  // The convolutions read and write 16-bit tensors (priced as such), with the same products.
  CHECK_FALSE(ops16["conv2d_forward"].fp32_operands);
  CHECK(ops16["conv2d_forward"].flops == ops32["conv2d_forward"].flops);
  CHECK(ops16["conv2d_backward"].flops == ops32["conv2d_backward"].flops);
  CHECK(ops16["conv2d_forward"].bytes < 0.6 * ops32["conv2d_forward"].bytes);
  // Batch norm + ReLU in one pass over 2-byte activations: x read twice, out written once.
  const double rows_channels = ops32["batchnorm_relu_forward_train"].bytes / 12;
  CHECK(ops16["batchnorm_relu_forward_train"].bytes == doctest::Approx(6 * rows_channels));
  // No ReLU or residual pass of its own in training: they ride in the batch norms.
  CHECK(ops16.count("relu_forward") == 0);
  CHECK(ops16.count("add_relu_inplace") == 0);
  CHECK(ops16.count("add_relu_backward") == 0);
  CHECK(ops16.count("batchnorm_add_relu_backward") == 1);
  // Every filter cast to bf16 (and transposed) once a step, 4 bytes read and 2 written a weight,
  // not per call; around cuDNN's backward, the bf16 input gradients widened and the bf16 filter
  // gradients added into the fp32 ones.
  const auto family = sg::make_model_family(bf16);
  // (the convolutions hold all but the batch norms' and the head's few parameters)
  const double params = static_cast<double>(family->parameter_count());
  CHECK(ops16["conv2d_filter"].calls == ops16["conv2d_forward"].calls);
  CHECK(ops16["conv2d_filter"].bytes < 6 * params);
  CHECK(ops16["conv2d_filter"].bytes > 6 * 0.95 * params);
  CHECK(ops16.count("conv2d_forward: filter copies") == 0);
  CHECK(ops16["conv2d_backward: filter copies and casts"].calls == ops16["conv2d_backward"].calls);
  CHECK(ops32.count("conv2d_filter") == 0);
  CHECK(ops32["conv2d_forward: filter copies"].calls < ops32["conv2d_forward"].calls);  // 1x1s
}

TEST_CASE("the roofline: each op the longer of its arithmetic and its bytes, plus launches") {
  sg::GpuSheet gpu{"test", "test GPU", 10, 100, 1, 1};  // 10 / 100 TFLOP/s, 1 TB/s
  sg::GpuEfficiency e;
  e.matrix_reduced = 0.5;
  e.memory = 0.5;
  e.launch_seconds = 1e-6;
  sg::OpCost gemm{"gemm", sg::CostKind::Matrix, 1e12, 1e9, 2, true, false, 1};
  sg::OpCost copy{"copy", sg::CostKind::Memory, 0, 1e10, 1, false, false, 1};
  const sg::StepEstimate step = sg::estimate_step({gemm, copy}, gpu, e);
  // gemm: 1e12 / 50e12 = 20 ms of arithmetic against 1e9 / 0.5e12 = 2 ms of bytes.
  // copy: 1e10 / 0.5e12 = 20 ms of bytes.
  REQUIRE(step.ops.size() == 2);
  CHECK(step.ops[0].cost.name == "gemm");  // longest first: its two launches
  CHECK(step.ops[0].seconds == doctest::Approx(0.020 + 2e-6).epsilon(1e-9));
  CHECK(step.ops[0].compute_bound);
  CHECK(step.ops[1].seconds == doctest::Approx(0.020 + 1e-6).epsilon(1e-9));
  CHECK_FALSE(step.ops[1].compute_bound);
  CHECK(step.seconds == doctest::Approx(0.040 + 3e-6));
  // The same product reading fp32 tensors runs at that efficiency instead.
  gemm.fp32_operands = true;
  e.matrix_fp32_operands = 0.25;
  CHECK(sg::estimate_step({gemm}, gpu, e).seconds == doctest::Approx(0.040 + 2e-6));
  CHECK(sg::find_gpu_sheet("H200") != nullptr);
  CHECK(sg::find_gpu_sheet("h300") == nullptr);
}
