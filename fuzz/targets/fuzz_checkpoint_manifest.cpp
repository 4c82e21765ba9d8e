// libFuzzer target: a checkpoint's manifest.json, as resuming reads it (docs/faults.md
// "Fuzzing"): src/checkpoint/checkpoint.cpp load_checkpoint, then
// src/train/train_checkpoint.cpp load_training_checkpoint (the trainer's state, the model
// record, the tensors) for a one-tensor model of a stand-in family.
// Input: the manifest's text. It lies in a directory that also holds model.safetensors and
// optimizer.safetensors with the fixed bytes below, so a manifest listing them with their sizes
// and checksums (the seeds fuzz/make_seeds.py writes do) gets past the file checks.
// Contract (src/checkpoint/checkpoint.h, src/train/train_checkpoint.h): a checkpoint is loaded
// or refused with a RunError of one line; nothing else is thrown, nothing crashes, and an
// accepted step lies in 0..kMaxCheckpointStep.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "fuzz_files.h"
#include "stand_in_family.h"
#include "train/train_checkpoint.h"
#include "util/error.h"

namespace {

// A safetensors file of F32 tensors of shape [2], each {1, 2}: 8-byte header length, the JSON
// header padded with spaces to a multiple of 8, the data. fuzz/make_seeds.py writes the same
// bytes (keep them equal) to list the files' sizes and checksums in the seeds.
std::string fixture_safetensors(const std::vector<std::string>& names) {
  std::string header = "{";
  for (size_t i = 0; i < names.size(); ++i)
    header += (i ? "," : "") + ("\"" + names[i] + "\":{\"dtype\":\"F32\",\"shape\":[2],") +
              "\"data_offsets\":[" + std::to_string(8 * i) + "," + std::to_string(8 * i + 8) +
              "]}";
  header += "}";
  header.resize((header.size() + 7) / 8 * 8, ' ');
  std::string file(8, '\0');
  for (size_t i = 0, n = header.size(); i < 8; ++i, n >>= 8) file[i] = static_cast<char>(n & 0xff);
  file += header;
  const float values[2] = {1.0f, 2.0f};
  for (size_t i = 0; i < names.size(); ++i)
    file.append(reinterpret_cast<const char*>(values), sizeof(values));
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool fixtures_written = [] {
    sg::fuzz::write_scratch_file("ck/model.safetensors", fixture_safetensors({"w"}));
    sg::fuzz::write_scratch_file("ck/optimizer.safetensors", fixture_safetensors({"m.w", "v.w"}));
    return true;
  }();
  (void)fixtures_written;
  static const sg::fuzz::StandInFamily family;
  static const sg::ParameterLayout layout(family.description());

  sg::fuzz::write_scratch_file("ck/manifest.json", sg::fuzz::as_text(data, size));
  const std::string dir = sg::fuzz::scratch_dir() + "/ck";
  try {
    const sg::LoadedCheckpoint loaded = sg::load_checkpoint(dir);
    if (loaded.step < 0 || loaded.step > sg::kMaxCheckpointStep)
      sg::fuzz::contract_broken("load_checkpoint accepted step " + std::to_string(loaded.step));
    std::vector<float> params(layout.total()), m(layout.total()), v(layout.total());
    sg::LoadTargets targets;
    targets.params = params.data();
    targets.optimizer = "adamw";
    targets.state_names = {"m", "v"};
    targets.state = {m.data(), v.data()};
    const sg::TrainerState state = sg::load_training_checkpoint(loaded, family, layout, targets);
    if (state.step != loaded.step || state.skipped_steps < 0 || state.skipped_steps > state.step)
      sg::fuzz::contract_broken("load_training_checkpoint accepted step " +
                                std::to_string(state.step) + ", skipped " +
                                std::to_string(state.skipped_steps));
    sg::fuzz::note("accepted: step " + std::to_string(state.step));
  } catch (const sg::RunError& e) {
    const std::string message = e.what();
    sg::fuzz::note("refused: " + message);
    if (message.find('\n') != std::string::npos)
      sg::fuzz::contract_broken("RunError of more than one line: " + message);
  }
  return 0;
}
