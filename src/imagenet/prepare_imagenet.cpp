#include "imagenet/prepare_imagenet.h"

#include <fmt/format.h>
#include <omp.h>

#include <cstdio>
#include <filesystem>

#include "data/file_io.h"
#include "imagenet/image_index.h"
#include "imagenet/image_pack.h"
#include "imagenet/image_transform.h"
#include "imagenet/jpeg_decoder.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace sg {
namespace {

// Checks every entry (in parallel); drops the unreadable ones and reports each by name. A file
// that is not a regular file (a FIFO, a directory named .JPEG) is refused without blocking on it,
// and an image over kMaxImagePixels from its header.
void check_images(std::vector<ImageEntry>& entries, bool full_decode, int threads,
                  std::vector<std::string>& problems) {
  std::vector<std::string> why(entries.size());
  const auto n = static_cast<int64_t>(entries.size());
#pragma omp parallel for schedule(dynamic, 64) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) {
    thread_local JpegDecoder decoder;
    thread_local std::vector<uint8_t> bytes;
    thread_local RgbImage image;
    bool complete = false;
    std::string error;
    // The header (SOF) sits in the first few kB unless large EXIF/ICC segments come first.
    if (!read_regular_file(entries[i].path, bytes, error, full_decode ? SIZE_MAX : 65536,
                           &complete)) {
      why[i] = error;
      continue;
    }
    JpegHeader header;
    bool ok = decoder.read_header(bytes.data(), bytes.size(), header);
    if (!ok && !complete && !over_pixel_limit(header) &&
        read_regular_file(entries[i].path, bytes, error, SIZE_MAX, &complete))
      ok = decoder.read_header(bytes.data(), bytes.size(), header);
    // The full decode is there to find damaged data, which entropy decoding meets at any scale:
    // at 1/8, the smallest DCT scale, no memory or time goes to full-size pixels nobody looks at.
    if (ok && full_decode) ok = decoder.decode(bytes.data(), bytes.size(), 1, 1, image);
    if (!ok)
      why[i] = over_pixel_limit(header) ? decoder.last_error()
                                        : "not a decodable JPEG (" + decoder.last_error() + ")";
  }
  std::vector<ImageEntry> kept;
  kept.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    if (why[i].empty())
      kept.push_back(std::move(entries[i]));
    else
      problems.push_back(fmt::format("{}: {}; left out of the index", entries[i].path, why[i]));
  }
  entries = std::move(kept);
}

// Re-encodes a split into pack shards under dst; sets each entry's shard, offset and size.
void pack_split(std::vector<ImageEntry>& entries, const std::string& name, const std::string& dst,
                const ImagenetPrepareOptions& options, int threads, std::vector<std::string>& packs,
                std::vector<std::string>& problems) {
  constexpr int64_t kBlock = 256;  // images re-encoded in parallel, then appended in order
  std::vector<std::vector<uint8_t>> encoded(kBlock);
  std::vector<std::string> why(kBlock);
  std::unique_ptr<ImagePackWriter> writer;
  std::vector<size_t> members;  // entries in the open shard
  auto close_shard = [&] {
    if (!writer) return;
    const auto offsets = writer->finish();
    for (size_t m = 0; m < members.size(); ++m) entries[members[m]].offset = offsets[m];
    writer.reset();
    members.clear();
  };
  for (int64_t base = 0; base < static_cast<int64_t>(entries.size()); base += kBlock) {
    const int64_t count = std::min<int64_t>(kBlock, static_cast<int64_t>(entries.size()) - base);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t j = 0; j < count; ++j) {
      thread_local JpegDecoder decoder;
      thread_local RgbImage image;
      encoded[j].clear();
      why[j].clear();
      std::vector<uint8_t> bytes;
      if (!read_regular_file(entries[base + j].path, bytes, why[j])) continue;
      JpegHeader header;
      if (!decoder.read_header(bytes.data(), bytes.size(), header)) {
        why[j] = decoder.last_error();
        continue;
      }
      // Decode at the smallest DCT scale that keeps the shorter side >= the target, then resize.
      const int side = options.pack_short_side;
      const bool wide = header.width >= header.height;
      const int min_w = wide ? 0 : side, min_h = wide ? side : 0;
      if (!decoder.decode(bytes.data(), bytes.size(), min_w, min_h, image)) {
        why[j] = decoder.last_error();
        continue;
      }
      encoded[j] = encode_jpeg(resize_shorter_side(image, side), options.pack_quality);
    }
    for (int64_t j = 0; j < count; ++j) {
      ImageEntry& e = entries[base + j];
      if (!why[j].empty()) {
        // Kept in the index unpacked would break the "all packed" promise; the loader would
        // count it as undecodable anyway, so it is left out and reported.
        problems.push_back(fmt::format("{}: not packed ({}); left out of the index", e.path, why[j]));
        e.shard = -2;
        continue;
      }
      if (writer && writer->payload_bytes() + encoded[j].size() > options.pack_shard_bytes) close_shard();
      if (!writer) {
        const std::string file = fmt::format("{}_{:05d}.sgpk", name, packs.size());
        writer = std::make_unique<ImagePackWriter>((fs::path(dst) / file).string());
        packs.push_back(file);
      }
      e.shard = static_cast<int32_t>(packs.size() - 1);
      e.size = static_cast<uint32_t>(encoded[j].size());
      writer->add(encoded[j]);
      members.push_back(static_cast<size_t>(base + j));
    }
  }
  close_shard();
  std::erase_if(entries, [](const ImageEntry& e) { return e.shard == -2; });
}

}  // namespace

int run_prepare_imagenet(const std::string& src, const std::string& dst, const ImagenetPrepareOptions& options) {
  if (options.pack_short_side < 32 || options.pack_quality < 1 || options.pack_quality > 100 || options.threads < 0)
    throw SpecError("prepare imagenet: need pack short side >= 32, quality 1..100, threads >= 0");
  const int threads = options.threads > 0 ? options.threads : omp_get_num_procs();
  std::vector<std::string> problems;
  ImageIndex index = scan_imagenet(src, &problems);
  const size_t scanned = index.train.size() + index.val.size();
  check_images(index.train, options.full_decode, threads, problems);
  check_images(index.val, options.full_decode, threads, problems);
  if (index.train.empty() && index.val.empty())
    throw RunError(fmt::format("{}: no readable JPEG images found in train/ or val/", src));

  std::error_code ec;
  fs::create_directories(dst, ec);
  if (ec) throw RunError(fmt::format("{}: cannot create the output folder ({})", dst, ec.message()));
  if (options.pack) {
    pack_split(index.train, "train", dst, options, threads, index.packs, problems);
    pack_split(index.val, "val", dst, options, threads, index.packs, problems);
  }
  const std::string index_path = (fs::path(dst) / "imagenet_index.json").string();
  save_image_index(index, index_path);

  std::printf("prepare imagenet %s -> %s\n", src.c_str(), index_path.c_str());
  std::printf("  classes: %zu\n  train images: %zu\n  val images: %zu\n  checked: %zu (%s)\n", index.wnids.size(),
              index.train.size(), index.val.size(), scanned, options.full_decode ? "full decode" : "JPEG headers");
  if (options.pack)
    std::printf("  packed: %zu shard(s), shorter side %d, quality %d\n", index.packs.size(), options.pack_short_side,
                options.pack_quality);
  std::printf("  problems: %zu\n", problems.size());
  constexpr size_t kShown = 50;
  for (size_t i = 0; i < problems.size() && i < kShown; ++i) std::printf("    %s\n", problems[i].c_str());
  if (problems.size() > kShown) std::printf("    ... and %zu more\n", problems.size() - kShown);
  return options.strict && !problems.empty() ? 1 : 0;
}

}  // namespace sg
