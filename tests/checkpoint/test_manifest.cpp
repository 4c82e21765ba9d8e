// The checkpoint manifest is checked, not trusted: its own checksum (when it has one; a manifest
// of an older writer has none and still loads), every value's type and range, its nesting; and
// every error is one line naming the manifest and the field. The checksum is computed here
// independently, as docs/design-notes.md ("Checkpoint files") defines it. Only the functions
// that existed before the checks (save/load) are called, so these tests also run against them.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "config/load_job_spec.h"
#include "data/file_io.h"
#include "error_of.h"
#include "model/model_family.h"
#include "model/parameter_layout.h"
#include "temp_dir.h"
#include "train/train_checkpoint.h"
#include "util/error.h"

using namespace sg;
using sg::test::error_of;

namespace {

const std::string kAdvice =
    "; delete this checkpoint or resume from another with checkpoint.resume: PATH";
const std::string kMember = "\n  \"manifest_xxh3_64\": \"";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// The documented checksum: XXH3-64 of the file with the 16 digits of manifest_xxh3_64 as zeros.
std::string sign(std::string text) {
  const size_t at = text.find(kMember);
  REQUIRE(at != std::string::npos);
  const size_t digits = at + kMember.size();
  text.replace(digits, 16, 16, '0');
  text.replace(digits, 16, xxh3_hex(text.data(), text.size()));
  return text;
}

// A manifest with a correct checksum, as singularity writes one, and as an older writer did.
std::string signed_text(nlohmann::json m) {
  m["manifest_xxh3_64"] = std::string(16, '0');
  return sign(m.dump(2) + "\n");
}
std::string unsigned_text(nlohmann::json m) {
  m.erase("manifest_xxh3_64");
  return m.dump(2) + "\n";
}

std::string save_step(const std::string& dir, int64_t step) {
  std::vector<float> w(16, 0.5f);
  return save_checkpoint(dir, step, {{"model.safetensors", {{"w", DType::F32, {4, 4}, w.data()}}}},
                         {{"step", step}}, "name: test\n", 0);
}

// One error line: the manifest first, the field named, what to do last, short.
void check_error_line(const std::string& e, const std::string& manifest,
                      const std::string& expected, const std::string& advice = kAdvice) {
  INFO(e);
  CHECK(e.rfind(manifest + ": ", 0) == 0);
  CHECK(e.find(expected) != std::string::npos);
  CHECK(e.size() >= advice.size());
  CHECK(e.compare(e.size() - advice.size(), advice.size(), advice) == 0);
  CHECK(e.find('\n') == std::string::npos);
  CHECK(e.size() < 400);
}

}  // namespace

TEST_CASE("save writes the manifest's own checksum as documented") {
  test::TempDir dir;
  const std::string text = read_text(save_step(dir.path(), 10) + "/manifest.json");
  const nlohmann::json m = nlohmann::json::parse(text);
  REQUIRE(m.contains("manifest_xxh3_64"));
  CHECK(m["manifest_xxh3_64"].get<std::string>().size() == 16);
  CHECK(text.find(kMember) != std::string::npos);
  CHECK(sign(text) == text);  // the writer's checksum is the documented one
}

TEST_CASE("a manifest changed after it was written is refused; one without a checksum loads") {
  test::TempDir dir;
  const std::string path = save_step(dir.path(), 10), manifest = path + "/manifest.json";
  const std::string text = read_text(manifest);
  const nlohmann::json m = nlohmann::json::parse(text);
  REQUIRE(error_of([&] { load_checkpoint(path); }).empty());

  SUBCASE("a value changed, the checksum kept") {
    std::string changed = text;
    const size_t at = changed.find("\n  \"step\": 10");
    REQUIRE(at != std::string::npos);
    changed.replace(at, 13, "\n  \"step\": 11");
    write_text(manifest, changed);
    check_error_line(error_of([&] { load_checkpoint(path); }), manifest,
                     "field manifest_xxh3_64 does not match the manifest's content");
  }
  SUBCASE("rewritten by another program, the checksum kept") {
    write_text(manifest, m.dump(4));
    check_error_line(error_of([&] { load_checkpoint(path); }), manifest,
                     "field manifest_xxh3_64 is not on a line of its own");
  }
  SUBCASE("a checksum that is not 16 hex digits") {
    nlohmann::json bad = m;
    bad["manifest_xxh3_64"] = 12;
    write_text(manifest, bad.dump(2));
    check_error_line(error_of([&] { load_checkpoint(path); }), manifest,
                     "field manifest_xxh3_64 is 12 but must be a string of 16 lower-case hex digits");
  }
  SUBCASE("written before manifests had a checksum: loads unchecked") {
    write_text(manifest, unsigned_text(m));
    const std::string e = error_of([&] { load_checkpoint(path); });
    CHECK(e.empty());
    if (e.empty()) CHECK(load_checkpoint(path).step == 10);
  }
}

TEST_CASE("every manifest value is checked, naming the manifest and the field") {
  test::TempDir dir;
  const std::string path = save_step(dir.path(), 10), manifest = path + "/manifest.json";
  const nlohmann::json original = nlohmann::json::parse(read_text(manifest));
  const nlohmann::json::json_pointer model("/files/model.safetensors");
  struct Case {
    std::string pointer;
    nlohmann::json value;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"/version", 4294967297ULL, "field version is 4294967297 but must be 1"},
      {"/version", "1", "field version is \"1\" but must be 1"},
      {"/version", 1.0, "field version is 1.0 but must be 1"},
      {"/step", -5, "field step is -5 but must be an integer from 0 to 2147483647"},
      {"/step", 9223372036854775807LL, "field step is 9223372036854775807 but must be"},
      {"/step", 1e300, "field step is 1e+300 but must be an integer"},
      {"/step", 12, "field step is 12 but the directory is step_00000010"},
      {"/job_yaml", 5, "field job_yaml is 5 but must be a string"},
      {"/state", 7, "field state is 7 but must be an object"},
      {"/files", "x", "field files is \"x\" but must be a JSON object"},
      {"/files/model.safetensors/bytes", -1, "field files.model.safetensors.bytes is -1 but"},
      {"/files/model.safetensors/bytes", 1.5, "field files.model.safetensors.bytes is 1.5 but"},
      {"/files/model.safetensors/xxh3_64", "XYZ",
       "field files.model.safetensors.xxh3_64 is \"XYZ\" but must be a string of 16 "
       "lower-case hex digits"},
      {"/files/model.safetensors", 3, "field files.model.safetensors is 3 but must be a JSON"},
      {"/step", std::string(10000, '7'), "field step is \"777"},
  };
  for (const bool with_checksum : {true, false}) {
    for (const Case& c : cases) {
      CAPTURE(c.pointer);
      CAPTURE(with_checksum);
      nlohmann::json m = original;
      m[nlohmann::json::json_pointer(c.pointer)] = c.value;
      write_text(manifest, with_checksum ? signed_text(m) : unsigned_text(m));
      const std::string e = error_of([&] { load_checkpoint(path); });
      check_error_line(e, manifest, c.expected);
    }
  }
  // The long value is echoed in part only.
  nlohmann::json m = original;
  m["step"] = std::string(10000, '7');
  write_text(manifest, signed_text(m));
  CHECK(error_of([&] { load_checkpoint(path); }).find("777\xE2\x80\xA6") != std::string::npos);
}

TEST_CASE("deeply nested JSON in a manifest with a correct checksum is refused, not a crash") {
  test::TempDir dir;
  const std::string path = save_step(dir.path(), 10), manifest = path + "/manifest.json";
  nlohmann::json m = nlohmann::json::parse(read_text(manifest));
  m["state"] = {{"deep", "DEEP"}};
  const std::string with_placeholder = signed_text(m);
  // state.deep nested `levels` arrays deep (the manifest and state objects are 2 levels more).
  const auto nested = [&](size_t levels) {
    std::string text = with_placeholder;
    text.replace(text.find("\"DEEP\""), 6, std::string(levels, '[') + std::string(levels, ']'));
    return sign(text);
  };
  write_text(manifest, nested(200000));
  check_error_line(error_of([&] { load_checkpoint(path); }), manifest,
                   "nested deeper than 64 levels");
  write_text(manifest, nested(63));
  check_error_line(error_of([&] { load_checkpoint(path); }), manifest,
                   "nested deeper than 64 levels (at byte ");
  write_text(manifest, nested(62));  // 64 levels in all: the limit, read
  CHECK(error_of([&] { load_checkpoint(path); }).empty());
}

TEST_CASE("trainer state: every value is checked, naming the manifest and state.<field>") {
  test::TempDir dir;
  const JobSpec spec = parse_job_spec(
      "name: t\nseed: 11\nmodel: {arch: gpt2, n_layer: 1, n_head: 2, n_embd: 16, context: 8, "
      "vocab: 32}\ndata: {dataset: synthetic}\ntrain: {steps: 20, global_batch: 2, "
      "micro_batch: 2}\ndevices: {backend: cpu, processes: 1, threads: 1}\n",
      "t.yaml", {"log.dir=" + dir.path()});
  const auto family = make_model_family(spec);
  const ParameterLayout layout(family->description());
  std::vector<float> params(layout.total(), 0.25f), m(layout.total()), v(layout.total());
  std::vector<float> buffers(std::max<size_t>(1, layout.buffer_total()));
  WholeTensors whole{params.data(), buffers.data(), "adamw", {"m", "v"}, {m.data(), v.data()}};
  TrainerState saved;
  saved.step = 10;
  saved.train_samples = 20;
  saved.seed = 11;
  const std::string path = save_training_checkpoint(dir / "checkpoints", spec, *family, whole,
                                                    saved);
  const std::string manifest = path + "/manifest.json";
  const nlohmann::json original = nlohmann::json::parse(read_text(manifest));
  const auto load = [&] {
    const LoadedCheckpoint ck = load_checkpoint(path);
    LoadTargets targets{params.data(), buffers.data(), "adamw", {"m", "v"}, {m.data(), v.data()}};
    return load_training_checkpoint(ck, *family, layout, targets);
  };
  REQUIRE(error_of([&] { load(); }).empty());
  CHECK(load().step == 10);

  struct Case {
    std::string key;
    nlohmann::json value;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"step", -5, "field state.step is -5 but must be an integer from 0 to 2147483647"},
      {"step", 9223372036854775807LL, "field state.step is 9223372036854775807 but must be"},
      {"step", 11, "field state.step is 11 but the manifest's step is 10"},
      {"step", 10.0, "field state.step is 10.0 but must be an integer"},
      {"seed", "x", "field state.seed is \"x\" but must be an integer from 0 to"},
      {"seed", -1, "field state.seed is -1 but must be an integer from 0 to"},
      {"train_sequences", 1e300, "field state.train_sequences is 1e+300 but must be an integer"},
      {"loss_scale", 3, "field state.loss_scale is 3 but must be 0 (not scaling) or a power"},
      {"loss_scale", -65536.0, "field state.loss_scale is -65536.0 but must be a number"},
      {"skipped_steps", 11, "field state.skipped_steps is 11 but must be an integer from 0 to 10"},
      {"skipped_in_row", 1, "field state.skipped_in_row is 1 but must be an integer from 0 to 0"},
      {"loss_scale_clean_steps", "9", "field state.loss_scale_clean_steps is \"9\" but must"},
      {"optimizer", 5, "field state.optimizer is 5 but must be a string"},
      {"model", "gpt2", "field state.model is \"gpt2\" but must be a JSON object"},
  };
  for (const bool with_checksum : {true, false}) {
    for (const Case& c : cases) {
      CAPTURE(c.key);
      CAPTURE(with_checksum);
      nlohmann::json j = original;
      j["state"][c.key] = c.value;
      write_text(manifest, with_checksum ? signed_text(j) : unsigned_text(j));
      check_error_line(error_of([&] { load(); }), manifest, c.expected);
    }
  }
  nlohmann::json j = original;
  j["state"].erase("seed");
  write_text(manifest, signed_text(j));
  check_error_line(error_of([&] { load(); }), manifest, "field state.seed is missing");
}
