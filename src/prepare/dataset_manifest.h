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

// Makes dst ready for a dataset of `kind` from `source` (an absolute path): creates it if
// needed; if it holds a dataset.json naming another kind or source, or shards without a
// dataset.json, throws SpecError unless `force`. Then removes the old dataset.json and
// train_/val_ shards, so no stale shard of a longer earlier run survives next to the new ones.
void prepare_destination(const std::string& dst, const std::string& kind, const std::string& source,
                         bool force);

// Writes dst/dataset.json atomically.
void write_dataset_manifest(const std::string& dst, const nlohmann::json& manifest);

}  // namespace sg
