#pragma once
// The tokenizing half of `prepare`: documents in (a DocumentSink), llm.c token shards out.
//
// Documents are tokenized in batches, in parallel over the documents of a batch (OpenMP), while
// the reader fills the next batch; the tokens are appended in document order, so the output is
// the same for any thread count. Each document is *preceded* by <|endoftext|> (50256), as in
// llm.c's fineweb.py shards: the stream starts with it and every document begins right after
// one, so a training window that starts at a document boundary is conditioned on "new document".
// Empty documents are skipped. Invalid UTF-8 is repaired (U+FFFD, see tokenizer/utf8.h) and
// reported with the document's origin and the byte offset of the first bad byte.
//
// The token stream is cut into validation then training shards:
//   val_000000.bin ...    the first val_tokens tokens (the cut may fall inside a document);
//   train_000000.bin ...  the rest, shard_size tokens per shard, the last one shorter.
// val_tokens < 0 (the default) means 10% of all tokens, at most 10,000,000: the head of the
// stream is held in memory until 100M tokens have been seen or the input ends, then split.
//
// --emit-text writes every document's text (after repair) in the same order, separated by
// kDocumentSeparator; `prepare text` splits files on it, so an emitted file prepares back into
// the same documents. It is written through a temp file renamed into place, so the path must be
// new or a regular file: a symlink, a device, a FIFO or a directory is refused (RunError).
//
// A tokenizer with more than kTokenShardMaxVocab (65,536) tokens is refused (RunError) when the
// writer is made: the shards store uint16 ids.
#include <cstdint>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "data/file_io.h"
#include "prepare/document_sink.h"
#include "prepare/problem_log.h"
#include "prepare/progress_meter.h"
#include "tokenizer/gpt2_tokenizer.h"

namespace sg {

// Between two documents in an emitted text file: a blank line, a form feed, a newline.
constexpr std::string_view kDocumentSeparator = "\n\n\f\n";

constexpr int64_t kAutoValTokensMax = 10'000'000;

struct DatasetWriterOptions {
  int64_t shard_size = 100'000'000;  // tokens per shard, at most INT32_MAX (the header field)
  int64_t val_tokens = -1;           // < 0: 10% of the tokens, at most kAutoValTokensMax
  std::string emit_text;             // "" = none
  int threads = 0;                   // tokenizer threads; 0 = all cores
};

struct ShardRecord {
  std::string file;  // name inside the destination
  int64_t tokens;
  std::string xxh3;  // of the whole file
};

struct DatasetSummary {
  int64_t documents = 0;          // tokenized (non-empty) documents
  int64_t empty_documents = 0;    // skipped
  int64_t repaired_documents = 0; // had invalid UTF-8
  int64_t text_bytes = 0;
  int64_t tokens = 0, train_tokens = 0, val_tokens = 0;
  std::vector<ShardRecord> train_shards, val_shards;
};

// Throws RunError naming path unless it is missing or a regular file (see --emit-text above).
void check_emit_text_path(const std::string& path);

class DatasetWriter final : public DocumentSink {
 public:
  DatasetWriter(const Gpt2Tokenizer& tokenizer, std::string dst, DatasetWriterOptions options,
                ProgressMeter* progress, ProblemLog* problems);
  ~DatasetWriter() override;

  void add(std::string text, std::string origin) override;
  // Tokenizes what is left, writes the last shards and the emitted text. Call once.
  DatasetSummary finish();

 private:
  struct Document {
    std::string text, origin;
  };
  void submit_batch();
  void wait_idle();
  void work();
  void process_batch(std::vector<Document> batch);
  void append_tokens(const std::vector<int32_t>& ids);
  void route(const uint16_t* tokens, size_t n);
  void decide_val_split();
  void flush_shard(bool train);

  const Gpt2Tokenizer& tokenizer_;
  std::string dst_;
  DatasetWriterOptions options_;
  ProgressMeter* progress_;
  ProblemLog* problems_;
  std::unique_ptr<AtomicFileWriter> emit_;

  std::vector<Document> batch_;
  size_t batch_bytes_ = 0;
  // One long-lived batch thread, so the OpenMP team under it (and the tokenizer's per-thread
  // word caches) persist from batch to batch. It takes one batch at a time from pending_.
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<std::vector<Document>> pending_;
  bool busy_ = false, stopping_ = false;
  std::exception_ptr error_;

  // Owned by the batch thread (one batch at a time).
  DatasetSummary summary_;
  bool val_decided_ = false;
  int64_t val_target_ = 0;      // tokens the val split gets, once decided
  std::vector<uint16_t> head_;  // the undecided head of the stream (auto val split)
  std::vector<uint16_t> val_buffer_, train_buffer_;
  bool finished_ = false;
};

}  // namespace sg
