#include "imagenet/image_pack.h"

#include <fmt/format.h>

#include <cstring>

#include "util/error.h"

namespace sg {

uint64_t image_pack_data_start(uint64_t count) { return 24 + 8 * (count + 1); }

size_t ImagePackWriter::add(const std::vector<uint8_t>& jpeg) {
  payload_.insert(payload_.end(), jpeg.begin(), jpeg.end());
  sizes_.push_back(jpeg.size());
  return sizes_.size() - 1;
}

std::vector<uint64_t> ImagePackWriter::finish() {
  const uint64_t count = sizes_.size(), start = image_pack_data_start(count);
  std::vector<uint64_t> offsets(count + 1);
  offsets[0] = start;
  for (size_t i = 0; i < count; ++i) offsets[i + 1] = offsets[i] + sizes_[i];
  AtomicFileWriter out(path_);
  const uint32_t version = 1, reserved = 0;
  out.write(kImagePackMagic, 8);
  out.write(&version, 4);
  out.write(&reserved, 4);
  out.write(&count, 8);
  out.write(offsets.data(), offsets.size() * 8);
  out.write(payload_.data(), payload_.size());
  out.commit();
  offsets.pop_back();
  return offsets;
}

ImagePackReader::ImagePackReader(const std::string& path) : file_(path) {
  const uint8_t* d = file_.data();
  if (file_.size() < 32 || std::memcmp(d, kImagePackMagic, 8) != 0)
    throw RunError(fmt::format("{}: not an image pack (bad magic); run `singularity prepare imagenet --pack` again", path));
  uint32_t version = 0;
  uint64_t count = 0;
  std::memcpy(&version, d + 8, 4);
  std::memcpy(&count, d + 16, 8);
  if (version != 1) throw RunError(fmt::format("{}: image pack version {} (expected 1)", path, version));
  if (count > (file_.size() - 24) / 8 || image_pack_data_start(count) > file_.size())
    throw RunError(fmt::format("{}: image pack table truncated; the file is incomplete", path));
  count_ = count;
  data_start_ = image_pack_data_start(count);
  uint64_t last = 0;
  std::memcpy(&last, d + 24 + 8 * count, 8);
  if (last != file_.size())
    throw RunError(fmt::format("{}: image pack is {} bytes, its table says {}; the file is truncated or corrupt", path,
                               file_.size(), last));
}

std::pair<const uint8_t*, size_t> ImagePackReader::range(uint64_t offset, uint64_t size) const {
  if (offset < data_start_ || offset > file_.size() || size > file_.size() - offset)
    throw RunError(fmt::format("{}: image range [{}, +{}) is outside the pack; the index does not match it", path(),
                               offset, size));
  return {file_.data() + offset, static_cast<size_t>(size)};
}

std::pair<const uint8_t*, size_t> ImagePackReader::image(size_t i) const {
  if (i >= count_) throw RunError(fmt::format("{}: image {} of {} requested", path(), i, count_));
  uint64_t a = 0, b = 0;
  std::memcpy(&a, file_.data() + 24 + 8 * i, 8);
  std::memcpy(&b, file_.data() + 24 + 8 * (i + 1), 8);
  if (b < a) throw RunError(fmt::format("{}: image pack table is not increasing at {}", path(), i));
  return range(a, b - a);
}

}  // namespace sg
