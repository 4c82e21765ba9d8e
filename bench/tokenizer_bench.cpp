// Tokenizer throughput: MB/s of text encoded by one thread and by all threads (OpenMP, one
// document per task, as the dataset writer does), on the shared samples: OpenWebText's first
// 100 documents and tinyshakespeare, each repeated to about 10 MB. Not a test: timings depend on
// the machine. Usage: tokenizer_bench [DATA_DIR] (default $SINGULARITY_TEST_DATA).
#include "backend/blas_core.h"
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/gpt2_tokenizer.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The text cut into ~64 KB documents at newlines and repeated until about 10 MB: documents give
// the threads work units; repetition warms the word cache as a long real corpus would.
std::vector<std::string> documents_of(const std::string& text, size_t total_bytes) {
  std::vector<std::string> docs;
  size_t bytes = 0;
  while (bytes < total_bytes) {
    for (size_t begin = 0; begin < text.size() && bytes < total_bytes;) {
      size_t end = text.find('\n', std::min(text.size(), begin + 65536));
      end = end == std::string::npos ? text.size() : end + 1;
      docs.push_back(text.substr(begin, end - begin));
      bytes += end - begin;
      begin = end;
    }
  }
  return docs;
}

double encode_all(const sg::Gpt2Tokenizer& tok, const std::vector<std::string>& docs, int threads,
                  int64_t* tokens) {
  int64_t count = 0;
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) reduction(+ : count)
  for (size_t i = 0; i < docs.size(); ++i) count += static_cast<int64_t>(tok.encode(docs[i]).size());
  *tokens = count;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  sg::reexec_with_best_blas_core(argv);  // the binary's BLAS kernels and OpenMP waiting
  const char* env = std::getenv("SINGULARITY_TEST_DATA");
  const std::string data = argc > 1 ? argv[1] : (env != nullptr ? env : "");
  if (data.empty()) {
    std::fprintf(stderr, "usage: tokenizer_bench DATA_DIR (the shared sample data; or set SINGULARITY_TEST_DATA)\n");
    return 2;
  }
  const sg::Gpt2Tokenizer tok = sg::Gpt2Tokenizer::load(data + "/gpt2");
  const int all = omp_get_max_threads();
  std::printf("%-32s %8s %10s %12s %12s\n", "corpus", "threads", "MB", "MB/s", "Mtokens/s");
  for (const char* name : {"webtext/openwebtext_first100docs.txt", "webtext/tinyshakespeare.txt"}) {
    const std::string text = read_file(data + "/" + name);
    if (text.empty()) {
      std::fprintf(stderr, "%s/%s: missing or empty\n", data.c_str(), name);
      return 1;
    }
    const auto docs = documents_of(text, 10'000'000);
    size_t bytes = 0;
    for (const auto& d : docs) bytes += d.size();
    std::vector<int> thread_counts{1};
    if (all > 1) thread_counts.push_back(all);
    for (int threads : thread_counts) {
      int64_t tokens = 0;
      // A first pass with this thread count warms each thread's word cache; the second is timed.
      encode_all(tok, docs, threads, &tokens);
      const double s = encode_all(tok, docs, threads, &tokens);
      std::printf("%-32s %8d %10.1f %12.1f %12.2f\n", name, threads, bytes / 1e6, bytes / 1e6 / s,
                  tokens / 1e6 / s);
    }
  }
  return 0;
}
