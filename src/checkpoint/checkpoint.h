#pragma once
// Checkpoints (docs/architecture.md, "Checkpoints"; docs/design-notes.md, "Checkpoint files"): a
// directory <checkpoints_dir>/step_%08d/ holding manifest.json and one or more safetensors files.
// The manifest records the format version, the step, the trainer's state (opaque JSON: step,
// samples consumed, seed, loss scale, skipped steps), the job spec, each file's size and XXH3-64 checksum, and a
// checksum of its own (manifest_xxh3_64). A checkpoint is written under a temporary name and
// renamed when complete, so a crash mid-save never leaves a directory that looks finished.
#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"

namespace sg {

constexpr int kCheckpointFormatVersion = 1;
// The manifest member holding the manifest's own checksum. Optional, so version 1 still
// describes both: older writers leave it out (and their checkpoints load unchecked), older
// readers ignore it.
constexpr const char* kManifestChecksumKey = "manifest_xxh3_64";
// What to do about a checkpoint that is corrupt, the end of every such error.
constexpr const char* kCorruptCheckpointAdvice =
    "delete this checkpoint or resume from another with checkpoint.resume: PATH";
// The last step a checkpoint can be of: train.steps is an int, so no run gets further.
constexpr int64_t kMaxCheckpointStep = std::numeric_limits<int32_t>::max();

// "step_00001000"
std::string checkpoint_dir_name(int64_t step);

// Writes step_%08d (replacing one of the same step) and returns its path; then deletes the
// oldest complete checkpoints beyond `keep` (0 keeps all; the one just written is never
// deleted). files maps a file name ("model.safetensors") to its tensors.
std::string save_checkpoint(const std::string& checkpoints_dir, int64_t step,
                            const std::map<std::string, std::vector<TensorRef>>& files,
                            const nlohmann::json& state, const std::string& job_yaml, int keep);

// The text of manifest.json for `manifest` (a JSON object): indented JSON with the member
// manifest_xxh3_64 added, the XXH3-64 of the text with those 16 digits read as zeros.
std::string manifest_text(nlohmann::json manifest);

struct LoadedCheckpoint {
  std::string path;
  int64_t step = 0;
  nlohmann::json state;
  std::string job_yaml;
  std::map<std::string, SafetensorsFile> files;  // file name -> mapped, validated file
};

// Verifies the manifest (nesting, its checksum when it has one, every field's type and range),
// then every file's presence, size and checksum, then maps the files. Any failure is a RunError
// of one line naming the checkpoint file, the field, and what to do.
LoadedCheckpoint load_checkpoint(const std::string& path);

// The checkpoint to resume from, given checkpoint.resume:
//   never -> nullopt;
//   auto  -> the newest step_* directory (ignoring *.tmp-*) that loads intact; each newer one
//            that does not is skipped with a line in *warnings saying why; none -> nullopt;
//   PATH  -> PATH, after load_checkpoint(PATH) succeeds (its errors propagate); a directory that
//            is no checkpoint (no manifest.json, not named step_*) is refused as such.
std::optional<std::string> find_resume_checkpoint(const std::string& checkpoints_dir,
                                                  const std::string& resume,
                                                  std::vector<std::string>* warnings);

// Complete checkpoint directories (step_%08d with a manifest.json) in checkpoints_dir, oldest
// first, as (step, path). A missing directory has none.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& checkpoints_dir);

}  // namespace sg
