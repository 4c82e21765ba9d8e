#pragma once
// `singularity prepare KIND SRC DST`: raw text in, GPT-2 token shards out
// (docs/architecture.md, "Data").
//   KIND text         SRC: a .txt file or a directory of them (prepare/text_source.h)
//   KIND openwebtext  SRC: openwebtext.tar.xz, its subsets, .txt files or .jsonl(.gz|.zst)
//                     (prepare/openwebtext_source.h)
//   KIND wikipedia    SRC: a pages-articles*.xml.bz2 dump (prepare/wikipedia_source.h)
// DST receives val_*.bin and train_*.bin (llm.c format) and dataset.json; see
// prepare/dataset_writer.h for the token layout and split, prepare/dataset_manifest.h for
// dataset.json and when an existing DST is replaced.
#include <cstdint>
#include <string>

namespace sg {

struct PrepareOptions {
  // Directory with GPT-2's encoder.json and vocab.bpe; "" = $SINGULARITY_TOKENIZER, and if
  // that is unset too, a SpecError says where to get them.
  std::string tokenizer_dir;
  int64_t shard_size = 100'000'000;  // tokens per train shard
  int64_t val_tokens = -1;           // < 0: 10% of the tokens, at most 10,000,000
  std::string emit_text;             // also write the cleaned text here ("" = no)
  int threads = 0;                   // tokenizer threads; 0 = all cores
  bool force = false;                // replace a DST that holds another dataset
  bool progress = true;              // progress lines on stderr
};

// Returns the exit code (0; problems in the input are reported and skipped, see the summary
// line). Throws SpecError for bad usage (unknown kind, no tokenizer, DST holds another
// dataset) and RunError for unreadable input or output.
int run_prepare(const std::string& kind, const std::string& src, const std::string& dst,
                const PrepareOptions& options);

}  // namespace sg
