// Single-thread throughput of `prepare wikipedia`'s reader on a real dump:
//   wikipedia_bench [DUMP.xml.bz2] [--reps R]
// DUMP defaults to $SINGULARITY_TEST_DATA/wikipedia/<the shortened enwiki dump>. Best of R runs
// (default 3) after one warm-up, for three stages, so the cost of each shows:
//   bzip2 only           decompressing the dump (WikipediaDumpStream)
//   bz2+XML+clean        read_wikipedia_dump on the .bz2: the whole reader
//   XML+clean            read_wikipedia_dump on the same dump decompressed to a temporary .xml
// MB/s is of uncompressed XML (MB = 10^6 bytes); articles/s counts articles passed to the sink.
#include "backend/blas_core.h"
#include <bzlib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "prepare/wikipedia_dump_stream.h"
#include "prepare/wikipedia_source.h"
#include "util/error.h"

namespace {

int reps = 3;

struct CountingSink : sg::DocumentSink {
  int64_t documents = 0, bytes = 0;
  void add(std::string text, std::string) override {
    ++documents;
    bytes += static_cast<int64_t>(text.size());
  }
};

double time_best(const std::function<void()>& run) {
  run();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

void report(const char* stage, double seconds, int64_t xml_bytes, int64_t articles) {
  std::printf("%-16s %8.3f s %9.1f MB/s XML", stage, seconds,
              static_cast<double>(xml_bytes) / seconds / 1e6);
  if (articles > 0) std::printf(" %9.0f articles/s", static_cast<double>(articles) / seconds);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  sg::reexec_with_best_blas_core(argv);  // the binary's BLAS kernels and OpenMP waiting
  std::string dump;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--reps" && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else
      dump = arg;
  }
  if (dump.empty()) {
    const char* data = std::getenv("SINGULARITY_TEST_DATA");
    if (data == nullptr) {
      std::fprintf(
          stderr,
          "usage: wikipedia_bench DUMP.xml.bz2 [--reps R] (or set SINGULARITY_TEST_DATA)\n");
      return 2;
    }
    dump = std::string(data) +
           "/wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2";
  }
  try {
    sg::WikipediaStats stats;
    CountingSink sink;
    std::vector<char> buffer(1 << 20);
    const double decompress = time_best([&] {
      sg::WikipediaDumpStream stream(dump);
      while (stream.read(buffer.data(), buffer.size()) > 0) {
      }
    });
    const double whole = time_best([&] { sg::read_wikipedia_dump(dump, sink, &stats); });
    std::printf("%s: %lld pages, %lld articles, %.2f MB compressed, %.2f MB XML, %.2f MB text\n",
                dump.c_str(), static_cast<long long>(stats.pages),
                static_cast<long long>(stats.articles), stats.bytes_in / 1e6, stats.xml_bytes / 1e6,
                stats.text_bytes / 1e6);

    // The same dump uncompressed, to time parsing and cleaning without bzip2.
    const std::string xml_path =
        (std::filesystem::temp_directory_path() / "wikipedia_bench_dump.xml").string();
    {
      sg::WikipediaDumpStream stream(dump);
      std::ofstream out(xml_path, std::ios::binary);
      for (size_t n; (n = stream.read(buffer.data(), buffer.size())) > 0;)
        out.write(buffer.data(), static_cast<std::streamsize>(n));
    }
    const double parse_clean = time_best([&] { sg::read_wikipedia_dump(xml_path, sink, nullptr); });
    std::filesystem::remove(xml_path);

    report("bzip2 only", decompress, stats.xml_bytes, 0);
    report("bz2+XML+clean", whole, stats.xml_bytes, stats.articles);
    report("XML+clean", parse_clean, stats.xml_bytes, stats.articles);
  } catch (const sg::RunError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
