// Shards of the GPT-2 layout for tensor and pipeline parallelism: which parts of which whole
// tensors a (tensor rank, stage) holds, and that slicing, initialisation, checkpoint assembly
// and the gradient-norm ranges agree with the whole model element for element.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "comm/communicator.h"
#include "model/gpt2_family.h"
#include "model/parameter_layout.h"
#include "parallel/process_mesh.h"

namespace {

const sg::GPT2Shape kShape{3, 4, 32, 16, 200, 256};
const sg::ModelDescription kModel = sg::gpt2_description(kShape);

std::vector<sg::ModelShard> all_shards(int T, int S) {
  std::vector<sg::ModelShard> out;
  for (int s = 0; s < S; ++s) {
    for (int t = 0; t < T; ++t) out.push_back({t, T, s, S});
  }
  return out;
}

}  // namespace

namespace {

double sum_of_squares(const std::vector<int>& firsts, double head_cost) {
  double sum = 0;
  for (size_t s = 0; s + 1 < firsts.size(); ++s) {
    double cost = firsts[s + 1] - firsts[s];
    if (s + 2 == firsts.size()) cost += head_cost;
    sum += cost * cost;
  }
  return sum;
}

// Least sum of squares over every split of `layers` blocks into `stages` non-empty runs.
double brute_force_best(int layers, int stages, double head_cost, std::vector<int>& firsts) {
  if (static_cast<int>(firsts.size()) == stages) {
    firsts.push_back(layers);
    const double v = sum_of_squares(firsts, head_cost);
    firsts.pop_back();
    return v;
  }
  double best = 1e300;
  const int from = firsts.back() + 1, to = layers - (stages - static_cast<int>(firsts.size())) + 1;
  for (int next = from; next < to; ++next) {
    firsts.push_back(next);
    best = std::min(best, brute_force_best(layers, stages, head_cost, firsts));
    firsts.pop_back();
  }
  return best;
}

}  // namespace

TEST_CASE("stages: contiguous, non-empty, even without a head, optimal with one") {
  for (int layers : {1, 3, 7, 8}) {
    for (int stages = 1; stages <= layers; ++stages) {
      for (double head : {0.0, 0.64, 3.0, 40.0}) {
        CAPTURE(layers);
        CAPTURE(stages);
        CAPTURE(head);
        const std::vector<int> firsts = sg::balance_stages(layers, head, stages);
        REQUIRE(firsts.size() == static_cast<size_t>(stages) + 1);
        CHECK(firsts.front() == 0);
        CHECK(firsts.back() == layers);
        int smallest = layers, largest = 0;
        for (int s = 0; s < stages; ++s) {
          smallest = std::min(smallest, firsts[s + 1] - firsts[s]);
          largest = std::max(largest, firsts[s + 1] - firsts[s]);
        }
        CHECK(smallest >= 1);
        if (head == 0.0) CHECK(largest - smallest <= 1);
        std::vector<int> prefix{0};
        CHECK(sum_of_squares(firsts, head) == doctest::Approx(brute_force_best(layers, stages, head, prefix)));
      }
    }
  }
  // The LM head weighs on the last stage: it gets fewer blocks.
  CHECK(sg::balance_stages(6, 33.0, 2) == std::vector<int>{0, 5, 6});
  const sg::GPT2Shape gpt2_124m{12, 12, 768, 1024, 50257, 50304};
  CHECK(sg::head_cost_in_blocks(gpt2_124m) == doctest::Approx(4.91).epsilon(0.01));
  CHECK(sg::stage_layers(gpt2_124m, 0, 2) == std::pair<int, int>{0, 8});
  CHECK(sg::stage_layers(gpt2_124m, 1, 2) == std::pair<int, int>{8, 4});
}

TEST_CASE("a shard holds its stage's tensors with Megatron's split shapes") {
  const sg::ParameterLayout first(kModel, {1, 2, 0, 2});
  const sg::ParameterLayout last(kModel, {1, 2, 1, 2});
  CHECK(first.first_stage());
  CHECK_FALSE(first.last_stage());
  // The head costs 0.64 blocks here, so the first stage takes two of the three blocks.
  CHECK(first.blocks() == 2);
  CHECK(last.first_block() == 2);
  CHECK(last.blocks() == 1);
  CHECK(first.find("wte").shape == std::vector<int64_t>{128, 32});
  CHECK(first.find("h.0.attn.c_attn.weight").shape == std::vector<int64_t>{48, 32});
  CHECK(first.find("h.0.attn.c_attn.bias").shape == std::vector<int64_t>{48});
  CHECK(first.find("h.0.attn.c_proj.weight").shape == std::vector<int64_t>{32, 16});
  CHECK(first.find("h.0.attn.c_proj.bias").shape == std::vector<int64_t>{32});
  CHECK(first.find("h.0.mlp.c_fc.weight").shape == std::vector<int64_t>{64, 32});
  CHECK(first.find("h.0.mlp.c_proj.weight").shape == std::vector<int64_t>{32, 64});
  CHECK(first.find_if("h.2.ln_1.weight") == nullptr);
  CHECK(first.find_if("ln_f.weight") == nullptr);
  // The last stage: its blocks, ln_f, then its own copy of wte for the tied head.
  CHECK(last.find_if("wpe") == nullptr);
  CHECK(last.tensors().back().name == "wte");
  CHECK(last.tensors().back().tied_copy);
  CHECK(sg::gpt2_split(kShape, last.shard()).vocab_begin == 128);
  CHECK(sg::gpt2_split(kShape, last.shard()).local_heads == 2);
  // The whole model is the unsplit layout, in its usual order.
  const sg::ParameterLayout whole(kModel, {});
  CHECK_FALSE(whole.sharded());
  CHECK(whole.tensors().front().name == "wte");
  CHECK(whole.tensors().back().name == "ln_f.bias");
  CHECK(whole.total() == sg::ParameterLayout(kModel).total());
}

TEST_CASE("column-parallel c_attn takes the q, k and v rows of this rank's heads") {
  const sg::ParameterLayout whole(kModel);
  std::vector<float> global(whole.total());
  for (size_t i = 0; i < global.size(); ++i) global[i] = static_cast<float>(i);
  const sg::ParameterLayout shard(kModel, {1, 2, 0, 1});
  std::vector<float> local(shard.total());
  sg::slice_from_global(shard, global.data(), local.data());
  const auto& gw = whole.find("h.0.attn.c_attn.weight");
  const auto& lw = shard.find("h.0.attn.c_attn.weight");
  const size_t C = 32, half = 16;
  for (size_t part = 0; part < 3; ++part) {  // q, k, v
    for (size_t row = 0; row < half; ++row) {
      const size_t global_row = part * C + half + row;  // rank 1: the second half of each
      CHECK(local[lw.offset + (part * half + row) * C] == global[gw.offset + global_row * C]);
    }
  }
  // Row-parallel c_proj: columns [16, 32) of every row.
  const auto& gp = whole.find("h.0.attn.c_proj.weight");
  const auto& lp = shard.find("h.0.attn.c_proj.weight");
  for (size_t row = 0; row < C; ++row) {
    CHECK(local[lp.offset + row * half] == global[gp.offset + row * C + half]);
    CHECK(local[lp.offset + row * half + half - 1] == global[gp.offset + row * C + C - 1]);
  }
  // Vocabulary rows [128, 256) of wte.
  CHECK(local[shard.find("wte").offset] == global[whole.find("wte").offset + 128 * C]);
}

TEST_CASE("shards: init, slicing, assembly and norm ranges agree with the whole model") {
  const sg::ParameterLayout whole(kModel);
  std::vector<float> whole_init(whole.total());
  sg::init_gpt2_parameters(whole_init.data(), kShape, whole, 0.02f, 1234);
  double whole_squares = 0;
  for (float x : whole_init) whole_squares += static_cast<double>(x) * x;
  for (int T : {1, 2, 4}) {
    for (int S : {1, 2, 3}) {
      CAPTURE(T);
      CAPTURE(S);
      std::vector<float> assembled(whole.total(), -0.0f);
      std::vector<int> writes(whole.total(), 0);
      double shard_squares = 0;
      for (const auto& shard : all_shards(T, S)) {
        const sg::ParameterLayout layout(kModel, shard);
        std::vector<float> init(layout.total()), sliced(layout.total());
        sg::init_gpt2_parameters(init.data(), kShape, layout, 0.02f, 1234);
        sg::slice_from_global(layout, whole_init.data(), sliced.data());
        CHECK(init == sliced);  // a shard initialises to exactly its slice
        // This shard's owned elements in a whole-model buffer (-0 elsewhere): its part of the
        // checkpoint assembly.
        auto alone = sg::make_single_process_communicator();
        std::vector<float> mine, marker, ones(layout.total(), 1.0f);
        sg::gather_whole_model(layout, init.data(), mine, *alone);
        sg::gather_whole_model(layout, ones.data(), marker, *alone);
        for (size_t i = 0; i < whole.total(); ++i) {
          assembled[i] += mine[i];
          writes[i] += marker[i] != 0.0f;
        }
        for (const auto& [b, e] : sg::owned_ranges(layout)) {
          for (size_t i = b; i < e; ++i) shard_squares += static_cast<double>(init[i]) * init[i];
        }
      }
      CHECK(assembled == whole_init);  // exact: one owner per element, -0 elsewhere
      int missing = 0, doubled = 0;
      for (int w : writes) {
        missing += w == 0;
        doubled += w > 1;
      }
      CHECK(missing == 0);
      CHECK(doubled == 0);
      CHECK(shard_squares == doctest::Approx(whole_squares).epsilon(1e-12));
    }
  }
}
