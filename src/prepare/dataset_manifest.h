#pragma once
// DST/dataset.json: what a `prepare` run wrote and from what, so that a later run can tell
// whether DST holds the same dataset (safe to replace) or another one (refused), and so that a
// user can see the counts, the shards and their checksums without reading them.
//
//   {"format": "singularity-dataset", "version": 1, "kind": "openwebtext",
//    "source": "/abs/path", "documents": N, "tokens": N, "train_tokens": N, "val_tokens": N,
//    "eot": {"id": 50256, "position": "before each document"}, "shard_size": N,
//    "train_shards": [{"file": "train_000000.bin", "tokens": N, "xxh3": "..."}], "val_shards": [...],
//    "tokenizer": {"name": "gpt2", "dir": "...", "encoder.json": {"xxh3": ...}, "vocab.bpe": {...}},
//    "problems": N, "first_problems": [...], "emit_text": "...", "seconds": S, "created_by": "..."}
#include <string>

#include <nlohmann/json.hpp>

namespace sg {

constexpr const char* kDatasetManifestName = "dataset.json";

// Checks that dst may receive a dataset of `kind` from `source` (an absolute path): creates it
// if needed; if it holds a dataset.json naming another kind or source, or shards without a
// dataset.json, throws SpecError unless `force`. Returns an empty staging directory inside dst
// (".prepare-<pid>") for the new dataset: the old one stays whole until install_dataset.
std::string prepare_destination(const std::string& dst, const std::string& kind,
                                const std::string& source, bool force);

// Replaces dst's dataset (dataset.json and train_/val_ shards, so no stale shard of a longer
// earlier run survives) with the complete one in `staging`, then removes `staging`. The old
// dataset.json goes first and the new one arrives last, so a directory with a dataset.json
// always holds one complete dataset.
void install_dataset(const std::string& dst, const std::string& staging);

// Removes a staging directory left by a failed prepare (no error if it is gone).
void discard_staging(const std::string& staging);

// Writes dst/dataset.json atomically.
void write_dataset_manifest(const std::string& dst, const nlohmann::json& manifest);

}  // namespace sg
