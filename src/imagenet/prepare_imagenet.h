#pragma once
// `singularity prepare imagenet SRC DST`: scan and check an ILSVRC-2012 tree, write
// DST/imagenet_index.json, print a report; with `pack`, also write the images re-encoded at a
// reduced size into pack shards (image_pack.h) DST/{train,val}_NNNNN.sgpk that the index points at.
#include <cstdint>
#include <string>

namespace sg {

struct ImagenetPrepareOptions {
  bool pack = false;
  int pack_short_side = 256;            // packed images' shorter side (never enlarged)
  int pack_quality = 90;                // JPEG quality of packed images
  uint64_t pack_shard_bytes = 1ull << 30;
  int threads = 0;                      // 0: all cores
  bool full_decode = false;             // decode every image, not only its header
  bool strict = false;                  // return 1 when any problem was found
};

// Returns the exit code: 0, or 1 when `strict` and problems were found. Throws sg::RunError when
// SRC is not an ImageNet tree or DST cannot be written, sg::SpecError for bad options.
int run_prepare_imagenet(const std::string& src, const std::string& dst, const ImagenetPrepareOptions& options);

}  // namespace sg
