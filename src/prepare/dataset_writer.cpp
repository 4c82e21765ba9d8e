#include "prepare/dataset_writer.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <exception>

#include "data/file_io.h"
#include "data/token_shard.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace sg {
namespace {

// A batch is handed to the tokenizer threads when it holds this much text or this many
// documents: large enough to keep every thread busy, small enough to bound memory.
constexpr size_t kBatchBytes = 8 << 20;
constexpr size_t kBatchDocuments = 8192;

std::string shard_name(const char* split, size_t index) {
  char name[32];
  std::snprintf(name, sizeof name, "%s_%06zu.bin", split, index);
  return name;
}

}  // namespace

// The emitted text is written through a temp file renamed over the path: only a regular file
// (or a new path) may be replaced that way, never a symlink (the link would become a file) or a
// device such as /dev/full (it would be replaced by a file). man/singularity.1 documents it.
void check_emit_text_path(const std::string& path) {
  const std::string kind = special_file_kind(path, false);
  if (!kind.empty())
    throw RunError("--emit-text " + path + ": is " + kind + ", left as it is; --emit-text writes " +
                   "only a regular file or a new path, so give one of those");
}

DatasetWriter::DatasetWriter(const Gpt2Tokenizer& tokenizer, std::string dst,
                             DatasetWriterOptions options, ProgressMeter* progress,
                             ProblemLog* problems)
    : tokenizer_(tokenizer),
      dst_(std::move(dst)),
      options_(std::move(options)),
      progress_(progress),
      problems_(problems) {
  if (options_.shard_size < 1 || options_.shard_size > INT32_MAX)
    throw SpecError("shard size " + std::to_string(options_.shard_size) +
                    " is outside 1..2147483647 (the llm.c header's int32 token count)");
  if (options_.threads <= 0) options_.threads = omp_get_max_threads();
  if (options_.val_tokens >= 0) {
    val_decided_ = true;
    val_target_ = options_.val_tokens;
  }
  if (tokenizer_.vocab_size() > kTokenShardMaxVocab)
    throw RunError(dst_ + ": the tokenizer has " + std::to_string(tokenizer_.vocab_size()) +
                   " tokens, but token shards store ids as uint16 (at most " +
                   std::to_string(kTokenShardMaxVocab) + " tokens); use a smaller vocabulary");
  if (!options_.emit_text.empty()) {
    check_emit_text_path(options_.emit_text);
    emit_ = std::make_unique<AtomicFileWriter>(options_.emit_text);
  }
  worker_ = std::thread([this] { work(); });
}

DatasetWriter::~DatasetWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    pending_.reset();  // an error is on its way: do not tokenize a batch nobody will write
  }
  changed_.notify_all();
  worker_.join();
}

void DatasetWriter::work() {
  for (;;) {
    std::vector<Document> batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return pending_.has_value() || stopping_; });
      if (!pending_) return;
      batch = std::move(*pending_);
      pending_.reset();
      busy_ = true;
    }
    changed_.notify_all();
    std::exception_ptr error;
    try {
      process_batch(std::move(batch));
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      busy_ = false;
      if (error && !error_) error_ = error;
    }
    changed_.notify_all();
  }
}

// Waits until the batch thread has nothing queued or running; rethrows its error.
void DatasetWriter::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return (!pending_ && !busy_) || error_; });
  if (error_) std::rethrow_exception(error_);
}

void DatasetWriter::add(std::string text, std::string origin) {
  batch_bytes_ += text.size();
  batch_.push_back(Document{std::move(text), std::move(origin)});
  if (batch_bytes_ >= kBatchBytes || batch_.size() >= kBatchDocuments) submit_batch();
}

// Queues the current batch; waits only while the previous one is still queued, so reading
// the next batch overlaps tokenizing this one.
void DatasetWriter::submit_batch() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !pending_ || error_; });
    if (error_) std::rethrow_exception(error_);
    pending_ = std::move(batch_);
  }
  changed_.notify_all();
  batch_.clear();
  batch_bytes_ = 0;
}

void DatasetWriter::process_batch(std::vector<Document> batch) {
  const int64_t n = static_cast<int64_t>(batch.size());
  std::vector<std::vector<int32_t>> ids(n);
  std::vector<size_t> invalid_at(n, kValidUtf8);
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic, 1) num_threads(options_.threads)
  for (int64_t i = 0; i < n; ++i) {
    try {
      Document& doc = batch[i];
      invalid_at[i] = find_invalid_utf8(doc.text);
      if (invalid_at[i] != kValidUtf8) doc.text = repair_utf8(doc.text);
      ids[i].reserve(doc.text.size() / 4 + 1);
      tokenizer_.encode_into(doc.text, ids[i]);
    } catch (...) {
#pragma omp critical(sg_dataset_writer_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);

  int64_t documents = 0, bytes = 0, tokens = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Document& doc = batch[i];
    if (doc.text.empty()) {
      ++summary_.empty_documents;
      continue;
    }
    if (invalid_at[i] != kValidUtf8) {
      ++summary_.repaired_documents;
      problems_->report(doc.origin + ": invalid UTF-8 at byte " + std::to_string(invalid_at[i]) +
                        "; replaced with U+FFFD");
    }
    if (emit_) {
      if (summary_.documents > 0) emit_->write(kDocumentSeparator.data(), kDocumentSeparator.size());
      emit_->write(doc.text.data(), doc.text.size());
    }
    ids[i].insert(ids[i].begin(), tokenizer_.eot_id());
    append_tokens(ids[i]);
    ++summary_.documents;
    summary_.text_bytes += static_cast<int64_t>(doc.text.size());
    ++documents;
    bytes += static_cast<int64_t>(doc.text.size());
    tokens += static_cast<int64_t>(ids[i].size());
  }
  if (progress_ != nullptr) progress_->add_output(documents, bytes, tokens);
}

void DatasetWriter::append_tokens(const std::vector<int32_t>& ids) {
  // Ids are below the vocabulary size, at most kTokenShardMaxVocab (checked when the writer is
  // made), so uint16 holds them (the llm.c format's token type).
  std::vector<uint16_t> narrow(ids.begin(), ids.end());
  summary_.tokens += static_cast<int64_t>(narrow.size());
  if (!val_decided_) {
    head_.insert(head_.end(), narrow.begin(), narrow.end());
    if (static_cast<int64_t>(head_.size()) >= 10 * kAutoValTokensMax) decide_val_split();
    return;
  }
  route(narrow.data(), narrow.size());
}

// 10% of the held head, at most the cap: called when the head reaches 10x the cap or the input
// ends, so either way the val split is 10% of the tokens or exactly the cap.
void DatasetWriter::decide_val_split() {
  val_target_ = std::min<int64_t>(kAutoValTokensMax, static_cast<int64_t>(head_.size()) / 10);
  val_decided_ = true;
  std::vector<uint16_t> head;
  head.swap(head_);
  route(head.data(), head.size());
}

// Sends tokens to the val split until it holds val_target_ tokens, the rest to train; writes a
// shard whenever a buffer reaches shard_size.
void DatasetWriter::route(const uint16_t* tokens, size_t n) {
  while (n > 0) {
    const bool to_val = summary_.val_tokens < val_target_;
    std::vector<uint16_t>& buffer = to_val ? val_buffer_ : train_buffer_;
    int64_t room = options_.shard_size - static_cast<int64_t>(buffer.size());
    if (to_val) room = std::min(room, val_target_ - summary_.val_tokens);
    const size_t take = std::min<size_t>(n, static_cast<size_t>(room));
    buffer.insert(buffer.end(), tokens, tokens + take);
    (to_val ? summary_.val_tokens : summary_.train_tokens) += static_cast<int64_t>(take);
    tokens += take;
    n -= take;
    if (static_cast<int64_t>(buffer.size()) == options_.shard_size) flush_shard(!to_val);
  }
}

void DatasetWriter::flush_shard(bool train) {
  std::vector<uint16_t>& buffer = train ? train_buffer_ : val_buffer_;
  if (buffer.empty()) return;
  auto& records = train ? summary_.train_shards : summary_.val_shards;
  const std::string name = shard_name(train ? "train" : "val", records.size());
  const std::string path = dst_ + "/" + name;
  write_token_shard(path, buffer.data(), buffer.size());
  records.push_back(ShardRecord{name, static_cast<int64_t>(buffer.size()), file_xxh3_hex(path)});
  buffer.clear();
}

DatasetSummary DatasetWriter::finish() {
  if (finished_) throw std::logic_error("DatasetWriter::finish called twice");
  finished_ = true;
  if (!batch_.empty()) submit_batch();
  wait_idle();
  // The batch thread is idle: its state may be finished here.
  if (!val_decided_) decide_val_split();
  flush_shard(false);
  flush_shard(true);
  if (emit_) {
    check_emit_text_path(options_.emit_text);  // again: it may have been replaced since we began
    emit_->commit();
  }
  return summary_;
}

}  // namespace sg
