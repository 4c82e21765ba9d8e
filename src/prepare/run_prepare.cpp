#include "prepare/run_prepare.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "data/file_io.h"
#include "prepare/dataset_manifest.h"
#include "prepare/dataset_writer.h"
#include "prepare/openwebtext_source.h"
#include "prepare/problem_log.h"
#include "prepare/progress_meter.h"
#include "prepare/text_source.h"
#include "tokenizer/gpt2_tokenizer.h"
#include "util/error.h"

#if __has_include("prepare/wikipedia_source.h")
#include "prepare/wikipedia_source.h"
#define SG_HAVE_WIKIPEDIA 1
#endif

#ifndef SINGULARITY_VERSION
#define SINGULARITY_VERSION "unknown"
#endif

namespace sg {
namespace {

namespace fs = std::filesystem;

std::string resolve_tokenizer_dir(const std::string& given) {
  if (!given.empty()) return given;
  const char* env = std::getenv("SINGULARITY_TOKENIZER");
  if (env != nullptr && *env != '\0') return env;
  throw SpecError(
      "prepare: no tokenizer; pass --tokenizer DIR or set SINGULARITY_TOKENIZER to a directory "
      "holding GPT-2's encoder.json and vocab.bpe (from "
      "https://openaipublic.blob.core.windows.net/gpt-2/models/124M/ or the Hugging Face model "
      "openai-community/gpt2)");
}

int64_t file_size_or_zero(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

nlohmann::json shard_list(const std::vector<ShardRecord>& shards) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& s : shards) list.push_back({{"file", s.file}, {"tokens", s.tokens}, {"xxh3", s.xxh3}});
  return list;
}

}  // namespace

int run_prepare(const std::string& kind, const std::string& src, const std::string& dst,
                const PrepareOptions& options) {
  if (kind != "text" && kind != "openwebtext" && kind != "wikipedia")
    throw SpecError("prepare: unknown kind \"" + kind + "\"; expected text, openwebtext or wikipedia");
  if (options.shard_size < 1 || options.shard_size > INT32_MAX)
    throw SpecError("prepare: --shard-size " + std::to_string(options.shard_size) +
                    " is outside 1..2147483647");
  std::error_code ec;
  if (!fs::exists(src, ec)) throw RunError(src + ": no such file or directory");
  const std::string source = fs::absolute(src, ec).lexically_normal().string();
  const std::string tokenizer_dir = resolve_tokenizer_dir(options.tokenizer_dir);
  const Gpt2Tokenizer tokenizer = Gpt2Tokenizer::load(tokenizer_dir);  // refuses > 65,536 tokens
  if (!options.emit_text.empty()) check_emit_text_path(options.emit_text);  // before DST is made

  // The input's size for progress and ETA (compressed bytes for archives).
  int64_t input_total = 0;
  if (kind == "text") input_total = total_file_size(list_text_files(src));
  if (kind == "openwebtext") input_total = total_file_size(list_openwebtext_inputs(src));
  if (kind == "wikipedia") input_total = file_size_or_zero(src);

  // The new dataset is written beside the old one and replaces it only when complete, so a
  // prepare that fails (or is killed) leaves the previous dataset as it was.
  const std::string staging = prepare_destination(dst, kind, source, options.force);
  struct Discard {
    const std::string& path;
    bool keep = false;
    ~Discard() {
      if (!keep) discard_staging(path);
    }
  } discard{staging};
  ProblemLog problems(options.progress);
  ProgressMeter progress("prepare " + kind, input_total, options.progress);
  DatasetWriterOptions writer_options;
  writer_options.shard_size = options.shard_size;
  writer_options.val_tokens = options.val_tokens;
  writer_options.emit_text = options.emit_text;
  writer_options.threads = options.threads;
  DatasetWriter writer(tokenizer, staging, writer_options, &progress, &problems);

  nlohmann::json source_stats = nlohmann::json::object();
  if (kind == "text") {
    read_text_documents(src, writer, &progress);
  } else if (kind == "openwebtext") {
    read_openwebtext(src, writer, problems, &progress);
  } else {
#ifdef SG_HAVE_WIKIPEDIA
    WikipediaStats stats;
    try {
      read_wikipedia_dump(src, writer, &stats,
                          [&](const WikipediaStats& s) { progress.set_input_done(s.bytes_in); });
    } catch (const RunError& e) {
      // The articles before the damage were delivered; keep them, say what happened.
      problems.report(std::string(e.what()) + "; the articles before it are kept");
    }
    source_stats = {{"pages", stats.pages},           {"articles", stats.articles},
                    {"redirects", stats.redirects},   {"other_namespaces", stats.other_namespaces},
                    {"empty_articles", stats.empty_articles}, {"xml_bytes", stats.xml_bytes}};
#else
    throw RunError("prepare wikipedia: not built into this binary (src/prepare/wikipedia_source.h missing)");
#endif
  }
  const DatasetSummary summary = writer.finish();
  progress.finish();
  if (summary.documents == 0) {
    std::string cause = problems.first().empty() ? std::string() : problems.first().front();
    const std::string kept = "; the articles before it are kept";  // none were
    if (cause.size() > kept.size() && cause.compare(cause.size() - kept.size(), kept.size(), kept) == 0)
      cause.resize(cause.size() - kept.size());
    throw RunError(
        src + ": the input gave no documents" + (cause.empty() ? std::string() : " (" + cause + ")") +
        "; check that it is " +
        (kind == "wikipedia"     ? "a MediaWiki XML dump (pages-articles .xml or .xml.bz2)"
         : kind == "openwebtext" ? "OpenWebText (a folder or archive of .xz/.txt documents)"
                                 : "a text file or a folder of .txt files with text in them") +
        (dst.empty() ? std::string() : "; " + dst + " is unchanged"));
  }
  if (summary.train_tokens == 0)
    throw RunError(dst + ": the input gave " + std::to_string(summary.tokens) +
                   " tokens and none are left for training; pass a smaller --val-tokens or more "
                   "input; " + dst + " is unchanged");

  nlohmann::json manifest = {
      {"format", "singularity-dataset"},
      {"version", 1},
      {"kind", kind},
      {"source", source},
      {"documents", summary.documents},
      {"empty_documents_skipped", summary.empty_documents},
      {"repaired_utf8_documents", summary.repaired_documents},
      {"text_bytes", summary.text_bytes},
      {"tokens", summary.tokens},
      {"train_tokens", summary.train_tokens},
      {"val_tokens", summary.val_tokens},
      {"eot", {{"id", tokenizer.eot_id()}, {"position", "before each document"}}},
      {"shard_size", options.shard_size},
      {"train_shards", shard_list(summary.train_shards)},
      {"val_shards", shard_list(summary.val_shards)},
      {"tokenizer",
       {{"name", "gpt2"},
        {"dir", fs::absolute(tokenizer_dir, ec).lexically_normal().string()},
        {"encoder.json", {{"xxh3", file_xxh3_hex(tokenizer_dir + "/encoder.json")}}},
        {"vocab.bpe", {{"xxh3", file_xxh3_hex(tokenizer_dir + "/vocab.bpe")}}}}},
      {"source_stats", source_stats},
      {"problems", problems.count()},
      {"first_problems", problems.first()},
      {"emit_text", options.emit_text},
      {"seconds", progress.seconds()},
      {"created_by", std::string("singularity ") + SINGULARITY_VERSION},
  };
  write_dataset_manifest(staging, manifest);
  install_dataset(dst, staging);
  discard.keep = true;
  if (options.progress)
    std::fprintf(stderr, "prepare %s: %lld documents, %lld train + %lld val tokens in %zu + %zu shards -> %s%s\n",
                 kind.c_str(), static_cast<long long>(summary.documents),
                 static_cast<long long>(summary.train_tokens), static_cast<long long>(summary.val_tokens),
                 summary.train_shards.size(), summary.val_shards.size(), dst.c_str(),
                 problems.count() > 0
                     ? (", " + std::to_string(problems.count()) + " problems reported above").c_str()
                     : "");
  return 0;
}

}  // namespace sg
