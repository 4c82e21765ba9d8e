#pragma once
// Pack shards: many JPEGs in one file, for sequential reading instead of a million small opens.
//
//   offset 0   char[8]  magic "SGIMGPK1"
//          8   uint32   version (1)
//         12   uint32   reserved (0)
//         16   uint64   count
//         24   uint64   offsets[count + 1]   absolute byte offset of each JPEG; offsets[count] = file size
//              bytes    the JPEGs, back to back
// Little-endian. The index (image_index.h) also records each image's shard, offset and size, so
// the loader reads a JPEG without touching the table; the table makes a shard self-describing.
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "data/file_io.h"

namespace sg {

constexpr char kImagePackMagic[8] = {'S', 'G', 'I', 'M', 'G', 'P', 'K', '1'};

// Collects JPEGs in memory order and writes the shard atomically in finish().
class ImagePackWriter {
 public:
  explicit ImagePackWriter(std::string path) : path_(std::move(path)) {}
  // Returns the JPEG's number in the shard.
  size_t add(const std::vector<uint8_t>& jpeg);
  size_t count() const { return sizes_.size(); }
  uint64_t payload_bytes() const { return payload_.size(); }
  // Writes the file; returns each JPEG's absolute offset in it. Throws sg::RunError naming the file.
  std::vector<uint64_t> finish();

 private:
  std::string path_;
  std::vector<uint64_t> sizes_;
  std::vector<uint8_t> payload_;
};

uint64_t image_pack_data_start(uint64_t count);

// A memory-mapped shard, its header and table checked on open (sg::RunError naming the file).
class ImagePackReader {
 public:
  explicit ImagePackReader(const std::string& path);
  size_t count() const { return count_; }
  // The JPEG bytes of image i, or the range (offset, size) as the index recorded it; a range
  // outside the payload throws sg::RunError naming the file.
  std::pair<const uint8_t*, size_t> image(size_t i) const;
  std::pair<const uint8_t*, size_t> range(uint64_t offset, uint64_t size) const;
  const std::string& path() const { return file_.path(); }

 private:
  MappedFile file_;
  size_t count_ = 0;
  uint64_t data_start_ = 0;
};

}  // namespace sg
