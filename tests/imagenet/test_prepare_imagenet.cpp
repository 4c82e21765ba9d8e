// `prepare imagenet`: the index written, broken files reported and left out, packs that the
// loader reads to the same labels, a damaged pack named.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "imagenet/image_batch_loader.h"
#include "imagenet/image_pack.h"
#include "imagenet/prepare_imagenet.h"
#include "imagenet_fixture.h"
#include "temp_dir.h"
#include "error_of.h"

using namespace sg;

TEST_CASE("prepare imagenet: index, problems, strict mode, packs") {
  const std::string data = test::imagenet_data_dir();
  if (data.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/imagenet/sample not found");
    return;
  }
  test::TempDir dir;
  const std::string src = dir / "src", dst = dir / "dst";
  const auto samples = test::make_imagenet_tree(src, data, true);
  const auto bytes = test::read_file_bytes(samples[3].path);
  test::write_file_bytes(src + "/train/" + samples[3].wnid + "/cut.JPEG", bytes.data(), 200);
  std::ofstream(src + "/train/" + samples[4].wnid + "/text.JPEG") << "hello\n";

  ImagenetPrepareOptions options;
  options.threads = 2;
  CHECK(run_prepare_imagenet(src, dst, options) == 0);
  const ImageIndex index = load_image_index(dst + "/imagenet_index.json");
  CHECK(index.train.size() == 100);  // the two broken files are left out
  CHECK(index.val.size() == 100);
  CHECK(index.wnids.size() == 1000);
  options.strict = true;
  CHECK(run_prepare_imagenet(src, dst, options) == 1);

  options.strict = false;
  options.pack = true;
  options.pack_short_side = 160;
  options.pack_shard_bytes = 400 * 1000;  // several shards from 200 small images
  CHECK(run_prepare_imagenet(src, dst, options) == 0);
  const ImageIndex packed = load_image_index(dst + "/imagenet_index.json");
  REQUIRE(packed.packs.size() >= 3);
  REQUIRE(packed.train.size() == 100);
  size_t in_packs = 0;
  for (const auto& p : packed.packs) in_packs += ImagePackReader(p).count();
  CHECK(in_packs == 200);
  JpegDecoder decoder;
  for (size_t i = 0; i < packed.train.size(); i += 10) {
    const auto& e = packed.train[i];
    REQUIRE(e.shard >= 0);
    CHECK(e.label == index.train[i].label);
    const ImagePackReader reader(packed.packs[e.shard]);
    const auto range = reader.range(e.offset, e.size);
    JpegHeader header;
    REQUIRE(decoder.read_header(range.first, range.second, header));
    CHECK(std::min(header.width, header.height) <= 160);
  }
  LoaderOptions loader_options;
  loader_options.batch_size = 50;
  loader_options.threads = 2;
  ImageBatchLoader loader(packed, Split::Val, loader_options);
  ImageBatch batch;
  int batches = 0;
  while (loader.next(batch)) {
    ++batches;
    CHECK(std::all_of(batch.ok.begin(), batch.ok.end(), [](uint8_t ok) { return ok == 1; }));
  }
  CHECK(batches == 2);
  CHECK(loader.undecodable() == 0);

  // A truncated shard is named when opened.
  std::filesystem::resize_file(packed.packs[0], std::filesystem::file_size(packed.packs[0]) - 10);
  const std::string message = test::error_of([&] { ImagePackReader reader(packed.packs[0]); });
  CHECK(message.find(packed.packs[0]) != std::string::npos);
  CHECK(message.find("truncated") != std::string::npos);
}

TEST_CASE("prepare imagenet: a folder that is not ImageNet is a RunError naming it") {
  test::TempDir dir;
  const std::string message = test::error_of([&] { run_prepare_imagenet(dir.path(), dir / "out", {}); });
  CHECK(message.find(dir.path()) != std::string::npos);
}
