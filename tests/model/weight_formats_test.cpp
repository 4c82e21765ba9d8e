// Hugging Face GPT-2 and torchvision ResNet layouts (model/weight_formats.h): names, the Conv1D
// transposition, the vocabulary padding, num_batches_tracked, and export -> import being the
// identity, bit for bit.
#include "model/weight_formats.h"

#include <doctest/doctest.h>

#include <cstring>

#include "checkpoint/safetensors.h"
#include "error_of.h"
#include "model/resnet_family.h"
#include "temp_dir.h"
#include "util/rng.h"

namespace sg {
namespace {

GPT2Shape tiny_gpt2() {
  GPT2Shape s;
  s.n_layer = 2;
  s.n_head = 2;
  s.n_embd = 8;
  s.context = 6;
  s.vocab = 10;
  s.padded_vocab = 128;
  return s;
}

// Random parameters with wte's padding rows zero, as our initialisation leaves them.
std::vector<float> random_gpt2(const GPT2Shape& s) {
  const ParameterLayout layout(gpt2_description(s));
  std::vector<float> p(layout.total());
  Rng rng(7);
  for (float& x : p) x = static_cast<float>(rng.normal());
  const ParamTensor& wte = layout.find("wte");
  std::fill(p.begin() + static_cast<long>(wte.offset) + s.vocab * s.n_embd,
            p.begin() + static_cast<long>(wte.offset + wte.numel), 0.0f);
  return p;
}

void write(const std::string& path, const std::vector<ForeignTensor>& tensors) {
  std::vector<TensorRef> refs;
  for (const ForeignTensor& t : tensors) refs.push_back(t.ref());
  write_safetensors(path, refs, {{"format", "pt"}});
}

std::string spec_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("GPT-2 exports in Hugging Face's names and Conv1D layout, and imports back bitwise") {
  const GPT2Shape s = tiny_gpt2();
  const std::vector<float> ours = random_gpt2(s);
  const std::vector<ForeignTensor> hf = gpt2_to_hf_tensors(s, ours.data());
  const ParameterLayout layout(gpt2_description(s));
  CHECK(hf.size() == layout.tensors().size());
  for (const ForeignTensor& t : hf) CHECK(t.name.starts_with("transformer."));
  const auto find = [&](const std::string& name) -> const ForeignTensor& {
    for (const ForeignTensor& t : hf) {
      if (t.name == name) return t;
    }
    FAIL("no tensor " << name);
    return hf.front();
  };
  CHECK(find("transformer.wte.weight").shape == std::vector<int64_t>{10, 8});  // unpadded
  const ForeignTensor& c_attn = find("transformer.h.1.attn.c_attn.weight");
  REQUIRE(c_attn.shape == std::vector<int64_t>{8, 24});                    // (in, out)
  const ParamTensor& ours_c_attn = layout.find("h.1.attn.c_attn.weight");  // (24, 8)
  for (int o = 0; o < 24; ++o) {
    for (int i = 0; i < 8; ++i) {
      CHECK(c_attn.f32[static_cast<size_t>(i * 24 + o)] == ours[ours_c_attn.offset + o * 8 + i]);
    }
  }
  CHECK(find("transformer.h.0.mlp.c_proj.weight").shape == std::vector<int64_t>{32, 8});
  CHECK(find("transformer.h.0.attn.c_attn.bias").shape == std::vector<int64_t>{24});

  test::TempDir dir;
  write(dir / "model.safetensors", hf);
  std::vector<float> back(ours.size(), -1.0f);
  hf_to_gpt2(SafetensorsFile(dir / "model.safetensors"), s, back.data());
  CHECK(std::memcmp(back.data(), ours.data(), ours.size() * sizeof(float)) == 0);
}

TEST_CASE("GPT-2 import takes released names: no prefix, mask buffers, a tied lm_head") {
  const GPT2Shape s = tiny_gpt2();
  const std::vector<float> ours = random_gpt2(s);
  std::vector<ForeignTensor> hf = gpt2_to_hf_tensors(s, ours.data());
  for (ForeignTensor& t : hf) t.name = t.name.substr(std::strlen("transformer."));
  ForeignTensor mask{"h.0.attn.bias", {1, 1, 6, 6}, std::vector<float>(36, 1.0f), {}};
  hf.push_back(mask);
  ForeignTensor head{"lm_head.weight", {10, 8}, hf.front().f32, {}};  // wte comes first
  REQUIRE(hf.front().name == "wte.weight");
  hf.push_back(head);
  test::TempDir dir;
  write(dir / "released.safetensors", hf);
  std::vector<float> back(ours.size());
  hf_to_gpt2(SafetensorsFile(dir / "released.safetensors"), s, back.data());
  CHECK(std::memcmp(back.data(), ours.data(), ours.size() * sizeof(float)) == 0);

  hf.back().f32[3] += 1.0f;  // an untied head
  write(dir / "untied.safetensors", hf);
  CHECK(test::error_of([&] {
          hf_to_gpt2(SafetensorsFile(dir / "untied.safetensors"), s, back.data());
        }).find("lm_head.weight differs") != std::string::npos);

  GPT2Shape deeper = s;
  deeper.n_layer = 3;
  std::vector<float> more(ParameterLayout(gpt2_description(deeper)).total());
  CHECK(test::error_of([&] {
          hf_to_gpt2(SafetensorsFile(dir / "released.safetensors"), deeper, more.data());
        }).find("no tensor 'h.2.ln_1.weight'") != std::string::npos);
}

TEST_CASE("a Hugging Face config must match the job's GPT-2, naming the keys") {
  const GPT2Shape s = tiny_gpt2();
  nlohmann::json config = hf_gpt2_config(s);
  CHECK(config["vocab_size"] == 10);
  CHECK(config["n_positions"] == 6);
  CHECK(config["activation_function"] == "gelu_new");
  CHECK(config["architectures"][0] == "GPT2LMHeadModel");
  CHECK(spec_error_of([&] { check_hf_gpt2_config(config, s, "config.json"); }).empty());

  nlohmann::json other = config;
  other["n_layer"] = 12;
  const std::string e = spec_error_of([&] { check_hf_gpt2_config(other, s, "config.json"); });
  CHECK(e.find("n_layer is 12 but the job has model.n_layer 2") != std::string::npos);
  other = config;
  other["vocab_size"] = 50257;
  CHECK(spec_error_of([&] { check_hf_gpt2_config(other, s, "c"); }).find("model.vocab") !=
        std::string::npos);
  other = config;
  other["n_positions"] = 1024;
  CHECK(spec_error_of([&] { check_hf_gpt2_config(other, s, "c"); }).find("model.context") !=
        std::string::npos);
  other = config;
  other["activation_function"] = "relu";
  CHECK(spec_error_of([&] { check_hf_gpt2_config(other, s, "c"); }).find("gelu_new") !=
        std::string::npos);
  other = config;
  other["model_type"] = "llama";
  CHECK(spec_error_of([&] { check_hf_gpt2_config(other, s, "c"); }).find("model_type") !=
        std::string::npos);
}

TEST_CASE("ResNet exports torchvision's state dict with num_batches_tracked and imports back") {
  ResNetShape shape;
  shape.depth = 10;
  shape.width = 4;
  shape.classes = 5;
  shape.image_size = 32;
  const ModelDescription d = resnet_description(shape);
  const ParameterLayout layout(d);
  std::vector<float> params(layout.total()), buffers(layout.buffer_total());
  Rng rng(3);
  for (float& x : params) x = static_cast<float>(rng.normal());
  for (float& x : buffers) x = static_cast<float>(rng.uniform());
  const std::vector<ForeignTensor> tv = resnet_to_torchvision(d, params.data(), buffers.data(), 42);
  int tracked = 0;
  for (const ForeignTensor& t : tv) {
    if (!t.name.ends_with("num_batches_tracked")) continue;
    ++tracked;
    CHECK(t.ref().dtype == DType::I64);
    CHECK(t.shape.empty());
    CHECK(t.i64 == std::vector<int64_t>{42});
  }
  CHECK(tracked == static_cast<int>(layout.buffers().size() / 2));  // one per batch norm

  test::TempDir dir;
  write(dir / "resnet.safetensors", tv);
  std::vector<float> p2(params.size()), b2(buffers.size());
  torchvision_to_resnet(SafetensorsFile(dir / "resnet.safetensors"), d, p2.data(), b2.data());
  CHECK(p2 == params);
  CHECK(b2 == buffers);

  ResNetShape other = shape;
  other.classes = 7;
  const ModelDescription d7 = resnet_description(other);
  std::vector<float> p7(ParameterLayout(d7).total()), b7(b2.size());
  CHECK(test::error_of([&] {
          torchvision_to_resnet(SafetensorsFile(dir / "resnet.safetensors"), d7, p7.data(),
                                b7.data());
        }).find("check model.classes") != std::string::npos);
  other = shape;
  other.width = 8;
  const ModelDescription d8 = resnet_description(other);
  std::vector<float> p8(ParameterLayout(d8).total()), b8(ParameterLayout(d8).buffer_total());
  CHECK(test::error_of([&] {
          torchvision_to_resnet(SafetensorsFile(dir / "resnet.safetensors"), d8, p8.data(),
                                b8.data());
        }).find("model.width") != std::string::npos);
}

}  // namespace sg
