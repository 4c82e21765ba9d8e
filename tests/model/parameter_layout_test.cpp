#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "model/gpt2.h"
#include "model/gpt2_family.h"
#include "model/parameter_layout.h"

TEST_CASE("GPT-2 124M has the published parameter count") {
  const sg::GPT2Shape shape{12, 12, 768, 1024, 50257, 50304};
  sg::ParameterLayout layout(sg::gpt2_description(shape));
  CHECK(sg::gpt2_parameter_count(shape) == 124439808);
  CHECK(layout.total() == 124439808u + (50304u - 50257u) * 768u);
  // Tensors tile the flat buffer without gaps, in order.
  size_t expected = 0;
  for (const auto& t : layout.tensors()) {
    CHECK(t.offset == expected);
    expected += t.numel;
  }
  CHECK(expected == layout.total());
  CHECK(layout.find("h.3.attn.c_attn.weight").shape == std::vector<int64_t>{2304, 768});
  CHECK(layout.find("h.3.attn.c_attn.weight").decay);
  CHECK_FALSE(layout.find("h.3.ln_1.weight").decay);
  CHECK_FALSE(layout.find("ln_f.bias").decay);
}

TEST_CASE("initialisation: GPT-2 statistics, zero padding rows, deterministic in the seed") {
  const sg::GPT2Shape shape{4, 4, 64, 32, 100, 128};
  sg::ParameterLayout layout(sg::gpt2_description(shape));
  std::vector<float> a(layout.total()), b(layout.total()), c(layout.total());
  sg::init_gpt2_parameters(a.data(), shape, layout, 0.02f, 7);
  sg::init_gpt2_parameters(b.data(), shape, layout, 0.02f, 7);
  sg::init_gpt2_parameters(c.data(), shape, layout, 0.02f, 8);
  CHECK(a == b);
  CHECK(a != c);
  const auto& wte = layout.find("wte");
  for (size_t i = 100 * 64; i < wte.numel; ++i) REQUIRE(a[wte.offset + i] == 0.0f);
  auto std_of = [&](const sg::ParamTensor& t) {
    double s = 0;
    for (size_t i = 0; i < t.numel; ++i) s += double(a[t.offset + i]) * a[t.offset + i];
    return std::sqrt(s / t.numel);
  };
  CHECK(std_of(layout.find("h.0.mlp.c_fc.weight")) == doctest::Approx(0.02).epsilon(0.05));
  CHECK(std_of(layout.find("h.0.mlp.c_proj.weight")) ==
        doctest::Approx(0.02 / std::sqrt(8.0)).epsilon(0.05));
  CHECK(a[layout.find("h.1.ln_2.weight").offset] == 1.0f);
  CHECK(a[layout.find("h.1.ln_2.bias").offset] == 0.0f);
}

TEST_CASE("training FLOPs per token follow 6N + 6LTC") {
  const sg::GPT2Shape shape{12, 12, 768, 1024, 50257, 50304};
  const double expected = 6.0 * 124439808 + 6.0 * 12 * 1024 * 768;
  CHECK(sg::training_flops_per_token(shape, 1024) == doctest::Approx(expected));
}
