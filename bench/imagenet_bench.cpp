// ImageNet decode + augment throughput on one thread: not a test (timings are machine-dependent);
// run by scripts/bench/imagenet-cpu, which compares it with torchvision/PIL on the same files.
//
//   imagenet_bench DIR [--passes N] [--split train|val] [--no-dct]
//
// The JPEGs are read into memory first, so the figure is decode + crop + resize + flip +
// normalise, as in the torchvision side. Prints one JSON line.
#include "backend/blas_core.h"
#include <fmt/format.h>

#include <algorithm>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "imagenet/image_batch_loader.h"
#include "imagenet/image_index.h"

int main(int argc, char** argv) {
  sg::reexec_with_best_blas_core(argv);  // the binary's BLAS kernels and OpenMP waiting
  if (argc < 2) {
    std::fprintf(stderr, "usage: imagenet_bench DIR [--passes N] [--split train|val] [--no-dct]\n");
    return 2;
  }
  int passes = 5;
  sg::Split split = sg::Split::Train;
  sg::LoaderOptions options;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--passes" && i + 1 < argc) {
      passes = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--split" && i + 1 < argc) {
      split = std::string(argv[++i]) == "val" ? sg::Split::Val : sg::Split::Train;
    } else if (a == "--no-dct") {
      options.dct_scaling = false;
    } else {
      std::fprintf(stderr, "imagenet_bench: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::recursive_directory_iterator(argv[1]))
    if (e.is_regular_file() && sg::has_jpeg_extension(e.path().string())) paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) {
    std::fprintf(stderr, "imagenet_bench: no .JPEG files under %s\n", argv[1]);
    return 1;
  }
  std::vector<std::vector<uint8_t>> files;
  size_t bytes = 0;
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    files.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    bytes += files.back().size();
  }
  sg::JpegDecoder decoder;
  sg::RgbImage scratch;
  std::vector<float> out(3 * 224 * 224);
  int failures = 0;
  auto run_pass = [&](int64_t epoch) {
    for (size_t i = 0; i < files.size(); ++i)
      failures += !sg::decode_and_transform(out.data(), files[i].data(), files[i].size(), split, 1, epoch,
                                            static_cast<int64_t>(i), options, decoder, scratch, nullptr);
  };
  // Thread CPU time as well as wall time: on a shared machine the wall figure includes waiting.
  auto cpu_now = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  run_pass(-1);  // warm-up: page in code and buffers
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = cpu_now();
  for (int p = 0; p < passes; ++p) run_pass(p);
  const double cpu_seconds = cpu_now() - cpu_start;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double images = static_cast<double>(files.size()) * passes;
  std::printf("%s\n", fmt::format(R"({{"images_per_s": {:.1f}, "ms_per_image": {:.3f}, "cpu_images_per_s": {:.1f}, "images": {}, "passes": {}, )"
                                  R"("mb": {:.1f}, "split": "{}", "dct_scaling": {}, "failures": {}}})",
                                  images / seconds, 1000.0 * seconds / images, images / cpu_seconds, files.size(), passes, bytes / 1e6,
                                  split == sg::Split::Train ? "train" : "val", options.dct_scaling ? "true" : "false",
                                  failures)
                          .c_str());
  return failures == 0 ? 0 : 1;
}
