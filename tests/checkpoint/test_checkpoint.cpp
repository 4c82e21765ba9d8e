// Checkpoint directories: bit-exact round trip, corruption detected and named, resume: auto
// falls back past corrupt checkpoints, keep prunes the oldest, temporary directories ignored.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "error_of.h"
#include "temp_dir.h"
#include "util/error.h"

using namespace sg;
namespace fs = std::filesystem;

namespace {

using sg::test::error_of;

// Saves a small checkpoint whose weights encode the step, so tests can tell them apart.
std::string save_step(const std::string& dir, int64_t step, int keep = 0) {
  std::vector<float> weights(64);
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<float>(step) + 0.25f * i;
  return save_checkpoint(dir, step, {{"model.safetensors", {{"w", DType::F32, {8, 8},
                                                             weights.data()}}}},
                         {{"step", step}}, "name: test\n", keep);
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void flip_byte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x10));
}

}  // namespace

TEST_CASE("save and load round trip tensors, metadata, state and job spec bit-exactly") {
  test::TempDir dir;
  std::vector<float> params(1000), m(1000);
  for (size_t i = 0; i < params.size(); ++i) {
    params[i] = std::sin(0.37f * i) * 1e-3f;
    m[i] = std::nextafter(static_cast<float>(i), 0.0f);
  }
  const std::vector<int64_t> positions = {123456789012345, -1};
  const nlohmann::json state = {{"data_position", 987654321987654321ULL},
                                {"loss", 0.1},
                                {"tiny", 4.9e-324},
                                {"lr", 5.999999999999999e-4},
                                {"rng", {1, 2, 3}},
                                {"mesh", {{"data", 2}, {"tensor", 1}}}};
  const std::string yaml = "name: round-trip\nmodel: {vocab: 50257}  # ünïcödé\n";
  const std::string path = save_checkpoint(
      dir.path(), 10,
      {{"model.safetensors", {{"params", DType::F32, {10, 100}, params.data()}}},
       {"optim.safetensors",
        {{"m", DType::F32, {1000}, m.data()}, {"pos", DType::I64, {2}, positions.data()}}}},
      state, yaml, 0);
  CHECK(path == dir / "step_00000010");
  CHECK(names_in(dir.path()) == std::vector<std::string>{"step_00000010"});  // no temp left
  CHECK(names_in(path) ==
        std::vector<std::string>{"manifest.json", "model.safetensors", "optim.safetensors"});

  LoadedCheckpoint loaded = load_checkpoint(path);
  CHECK(loaded.path == path);
  CHECK(loaded.step == 10);
  CHECK(loaded.state == state);
  CHECK(loaded.state["tiny"].get<double>() == 4.9e-324);
  CHECK(loaded.job_yaml == yaml);
  REQUIRE(loaded.files.size() == 2);
  std::vector<float> params_back(1000), m_back(1000);
  loaded.files.at("model.safetensors").read_f32(params_back.data(), "params", {10, 100});
  loaded.files.at("optim.safetensors").read_f32(m_back.data(), "m", {1000});
  CHECK(std::memcmp(params_back.data(), params.data(), 4000) == 0);
  CHECK(std::memcmp(m_back.data(), m.data(), 4000) == 0);
  std::vector<int64_t> positions_back(2);
  loaded.files.at("optim.safetensors").read_exact(positions_back.data(), "pos", DType::I64, {2});
  CHECK(positions_back == positions);
}

TEST_CASE("saving a step again replaces it") {
  test::TempDir dir;
  std::vector<float> a(4, 1.0f), b(4, 2.0f);
  save_checkpoint(dir.path(), 5, {{"model.safetensors", {{"w", DType::F32, {4}, a.data()}}}}, {},
                  "", 0);
  save_checkpoint(dir.path(), 5, {{"model.safetensors", {{"w", DType::F32, {4}, b.data()}}}}, {},
                  "", 0);
  CHECK(names_in(dir.path()) == std::vector<std::string>{"step_00000005"});
  std::vector<float> out(4);
  load_checkpoint(dir / "step_00000005").files.at("model.safetensors").read_f32(out.data(), "w",
                                                                               {4});
  CHECK(out == b);
}

TEST_CASE("corruption is detected and names the checkpoint file") {
  test::TempDir dir;
  const std::string path = save_step(dir.path(), 10);
  const std::string model = path + "/model.safetensors", manifest = path + "/manifest.json";
  const std::string advice = "delete this checkpoint or resume from another with "
                             "checkpoint.resume: PATH";
  CHECK(error_of([&] { load_checkpoint(path); }).empty());  // intact before we break it

  SUBCASE("flipped byte") {
    flip_byte(model, fs::file_size(model) - 3);
    const std::string e = error_of([&] { load_checkpoint(path); });
    CHECK(e == model + ": checksum mismatch (file corrupt); " + advice);
  }
  SUBCASE("flipped byte in the header") {
    flip_byte(model, 12);
    CHECK(error_of([&] { load_checkpoint(path); }).find(model + ": checksum mismatch") == 0);
  }
  SUBCASE("truncated") {
    fs::resize_file(model, fs::file_size(model) - 10);
    const std::string e = error_of([&] { load_checkpoint(path); });
    CHECK(e.find(model + ": file is") == 0);
    CHECK(e.find("(file truncated)") != std::string::npos);
    CHECK(e.find(advice) != std::string::npos);
  }
  SUBCASE("missing file") {
    fs::remove(model);
    CHECK(error_of([&] { load_checkpoint(path); }) ==
          model + ": missing (listed in the manifest); " + advice);
  }
  SUBCASE("bad manifest JSON") {
    std::ofstream(manifest, std::ios::app) << "}}";
    const std::string e = error_of([&] { load_checkpoint(path); });
    CHECK(e.find(manifest + ": not valid JSON") == 0);
    CHECK(e.find(advice) != std::string::npos);
  }
  SUBCASE("manifest field of the wrong type") {
    std::ifstream in(manifest);
    nlohmann::json j = nlohmann::json::parse(in);
    j.erase("manifest_xxh3_64");  // as an older writer left it: edits go unnoticed but checked
    j["format"] = 3;
    std::ofstream(manifest, std::ios::trunc) << j.dump();
    CHECK(error_of([&] { load_checkpoint(path); }).find(manifest + ": not a singularity") == 0);
    j["format"] = "singularity-checkpoint";
    j["files"]["model.safetensors"]["xxh3_64"] = 17;
    std::ofstream(manifest, std::ios::trunc) << j.dump();
    CHECK(error_of([&] { load_checkpoint(path); }) ==
          manifest + ": field files.model.safetensors.xxh3_64 is 17 but must be a string of 16 "
                     "lower-case hex digits; " +
              advice);
    j["files"]["../../etc/passwd"] = j["files"]["model.safetensors"];
    std::ofstream(manifest, std::ios::trunc) << j.dump();
    CHECK(error_of([&] { load_checkpoint(path); }).find("invalid checkpoint file name") !=
          std::string::npos);
  }
  SUBCASE("missing manifest") {
    fs::remove(manifest);
    CHECK(error_of([&] { load_checkpoint(path); }).find(manifest + ": missing") == 0);
  }
  SUBCASE("not a directory") {
    CHECK(error_of([&] { load_checkpoint(dir / "step_00000099"); })
              .find("no such checkpoint directory") != std::string::npos);
  }
}

TEST_CASE("resume: auto takes the newest intact checkpoint, warning about corrupt ones") {
  test::TempDir dir;
  std::vector<std::string> warnings;
  const std::string ckpts = dir / "checkpoints";
  CHECK_FALSE(find_resume_checkpoint(ckpts, "auto", &warnings).has_value());  // no directory yet
  save_step(ckpts, 10);
  const std::string step20 = save_step(ckpts, 20);
  const std::string step30 = save_step(ckpts, 30);
  CHECK(find_resume_checkpoint(ckpts, "auto", &warnings) == step30);
  CHECK(warnings.empty());

  flip_byte(step30 + "/model.safetensors", 200);
  fs::create_directory(ckpts + "/step_00000040");  // a step directory with nothing in it
  fs::create_directory(ckpts + "/step_00000050.tmp-999");  // a save in progress (or crashed)
  std::ofstream(ckpts + "/step_00000050.tmp-999/manifest.json") << "{";
  CHECK(find_resume_checkpoint(ckpts, "auto", &warnings) == step20);
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0].find("step_00000040") != std::string::npos);
  CHECK(warnings[0].find("missing") != std::string::npos);
  CHECK(warnings[1].find(step30 + "/model.safetensors: checksum mismatch") != std::string::npos);

  CHECK_FALSE(find_resume_checkpoint(ckpts, "never", &warnings).has_value());
  CHECK(find_resume_checkpoint(ckpts, step20, nullptr) == step20);
  CHECK_THROWS_AS(find_resume_checkpoint(ckpts, step30, nullptr), RunError);

  flip_byte(step20 + "/model.safetensors", 200);
  flip_byte(ckpts + "/step_00000010/model.safetensors", 200);
  warnings.clear();
  CHECK_FALSE(find_resume_checkpoint(ckpts, "auto", &warnings).has_value());
  CHECK(warnings.size() == 4);
}

TEST_CASE("checkpoint.resume: a directory that is no checkpoint is named so, never to delete") {
  test::TempDir dir;
  const std::string ckpts = dir / "run/checkpoints";
  const std::string step10 = save_step(ckpts, 10);
  fs::create_directory(dir / "etc");
  std::ofstream(dir / "etc/passwd") << "root:x:0:0\n";
  const auto resume_error = [&](const std::string& path) {
    const std::string e = error_of([&] { find_resume_checkpoint(ckpts, path, nullptr); });
    INFO(e);
    CHECK(e.rfind("checkpoint.resume " + path + ": ", 0) == 0);
    CHECK(e.find("delete") == std::string::npos);
    CHECK(e.find("set checkpoint.resume to a step_* directory that train wrote") !=
          std::string::npos);
    return e;
  };
  CHECK(resume_error(dir / "etc").find(": not a checkpoint (it has no manifest.json) nor a run "
                                       "directory holding checkpoints;") != std::string::npos);
  CHECK(resume_error(dir / "run").find("; it holds checkpoints, the newest is " + step10) !=
        std::string::npos);
  CHECK(resume_error(ckpts).find("the newest is " + step10) != std::string::npos);
  CHECK(resume_error(dir / "etc/passwd").find(": not a directory, so not a checkpoint") !=
        std::string::npos);
  CHECK(resume_error(dir / "nowhere").find(": no such directory") != std::string::npos);
  CHECK(find_resume_checkpoint(ckpts, step10, nullptr) == step10);  // a checkpoint: taken
}

TEST_CASE("keep prunes the oldest complete checkpoints and ignores temporary directories") {
  test::TempDir dir;
  fs::create_directory(dir / "step_00000000.tmp-1");  // must survive and not count
  for (int step = 1; step <= 4; ++step) save_step(dir.path(), step, 2);
  CHECK(names_in(dir.path()) == std::vector<std::string>{"step_00000000.tmp-1", "step_00000003",
                                                         "step_00000004"});
  auto listed = list_checkpoints(dir.path());
  REQUIRE(listed.size() == 2);
  CHECK(listed[0].first == 3);
  CHECK(listed[1].second == dir / "step_00000004");

  // Rewound to an older step: the checkpoint just written is kept, the oldest other goes.
  save_step(dir.path(), 2, 2);
  CHECK(names_in(dir.path()) == std::vector<std::string>{"step_00000000.tmp-1", "step_00000002",
                                                         "step_00000004"});
  // keep = 0 keeps everything
  for (int step = 5; step <= 7; ++step) save_step(dir.path(), step, 0);
  CHECK(list_checkpoints(dir.path()).size() == 5);
}
