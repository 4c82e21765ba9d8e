#include "checkpoint/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/json_fields.h"
#include "util/error.h"

namespace sg {
namespace {

// The reference implementation refuses headers above 100 MB; so do we, before allocating.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

}  // namespace

FileDigest write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                             const std::map<std::string, std::string>& metadata) {
  std::vector<const TensorRef*> order;
  std::set<std::string> seen;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__" || t.name.empty())
      throw RunError(path + ": invalid tensor name '" + t.name + "'");
    if (!seen.insert(t.name).second)
      throw RunError(path + ": tensor '" + t.name + "' given twice");
    for (int64_t d : t.shape)
      if (d < 0) throw RunError(path + ": tensor '" + t.name + "' has a negative dimension");
    order.push_back(&t);
  }
  std::stable_sort(order.begin(), order.end(), [](const TensorRef* a, const TensorRef* b) {
    return dtype_size(a->dtype) > dtype_size(b->dtype);
  });

  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorRef* t : order) {
    const uint64_t bytes = static_cast<uint64_t>(element_count(t->shape)) * dtype_size(t->dtype);
    header[t->name] = {{"dtype", dtype_name(t->dtype)},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data section starts 8-byte aligned
  const uint64_t header_bytes = text.size();

  AtomicFileWriter out(path);
  out.write(&header_bytes, sizeof header_bytes);  // little-endian hosts only (x86, arm64)
  out.write(text.data(), text.size());
  for (const TensorRef* t : order)
    out.write(t->data, static_cast<size_t>(element_count(t->shape)) * dtype_size(t->dtype));
  FileDigest digest{out.bytes_written(), out.checksum_hex()};
  out.commit();
  return digest;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  const std::string advice = "the file is corrupt or not a safetensors file";
  const std::string corrupt = "; " + advice;
  const uint64_t file_bytes = file_.size();
  if (file_bytes < 8)
    throw RunError(path + ": file is " + std::to_string(file_bytes) +
                   " bytes, too short for a safetensors header" + corrupt);
  uint64_t header_bytes;
  std::memcpy(&header_bytes, file_.data(), 8);
  if (header_bytes > kMaxHeaderBytes || header_bytes > file_bytes - 8)
    throw RunError(path + ": header length " + std::to_string(header_bytes) +
                   " does not fit in the " + std::to_string(file_bytes) + "-byte file" + corrupt);
  const char* text = reinterpret_cast<const char*>(file_.data() + 8);
  // Nesting bounded before parsing (a forged shape 60,000 arrays deep would otherwise exhaust
  // the stack when an error echoes it); echoed values are cut to kMaxEchoChars.
  const nlohmann::json header = parse_bounded_json(std::string_view(text, header_bytes), path,
                                                   "header", advice, /*byte_base=*/8);
  if (!header.is_object()) throw RunError(path + ": header is not a JSON object" + corrupt);

  const uint8_t* data = file_.data() + 8 + header_bytes;
  const uint64_t data_bytes = file_bytes - 8 - header_bytes;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // (begin, end) of non-empty tensors
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw RunError(path + ": __metadata__ is not an object" + corrupt);
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          throw RunError(path + ": __metadata__." + excerpt(key) + " is not a string" + corrupt);
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string where = path + ": tensor '" + excerpt(name) + "'";
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() ||
        !entry.contains("shape") || !entry["shape"].is_array() ||
        !entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
        entry["data_offsets"].size() != 2)
      throw RunError(where + " needs dtype, shape and data_offsets [begin, end]" + corrupt);
    TensorRef t;
    t.name = name;
    if (!parse_dtype(entry["dtype"].get<std::string>(), &t.dtype))
      throw RunError(where + " has unsupported dtype " +
                     excerpt(entry["dtype"].get<std::string>()) + corrupt);
    // Count elements in 128 bits so a forged shape cannot overflow past the size check.
    // Each dimension is below 2^48 and the running product is capped at 2^64, so a forged
    // shape cannot overflow 128 bits and slip past the size check.
    unsigned __int128 elements = 1;
    bool too_large = false;
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 48))
        throw RunError(where + " has an invalid shape " + json_excerpt(entry["shape"]) + corrupt);
      t.shape.push_back(d.get<int64_t>());
      elements *= d.get<uint64_t>();
      if (elements > (static_cast<unsigned __int128>(1) << 64)) {
        too_large = true;
        elements = 1;
      }
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
      throw RunError(where + " has invalid data_offsets " + json_excerpt(offsets) + corrupt);
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end || end > data_bytes)
      throw RunError(where + " has data_offsets [" + std::to_string(begin) + ", " +
                     std::to_string(end) + "] outside the " + std::to_string(data_bytes) +
                     "-byte data section; the file is truncated or corrupt");
    if (too_large || elements * dtype_size(t.dtype) != end - begin)
      throw RunError(where + ": shape " + shape_text(t.shape) + " of " + dtype_name(t.dtype) +
                     " does not match its " + std::to_string(end - begin) + " bytes" + corrupt);
    if (end > begin) ranges.emplace_back(begin, end);
    t.data = data + begin;
    tensors_.emplace(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      throw RunError(path + ": two tensors overlap at data bytes [" +
                     std::to_string(ranges[i].first) + ", " +
                     std::to_string(ranges[i - 1].second) + ")" + corrupt);
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& entry : tensors_) out.push_back(entry.first);
  return out;
}

const TensorRef& SafetensorsFile::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    std::string listed;
    int shown = 0;
    for (const auto& entry : tensors_) {
      if (shown++ == 5) {
        listed += ", ...";
        break;
      }
      listed += (listed.empty() ? "" : ", ") + excerpt(entry.first);
    }
    throw RunError(path() + ": no tensor named '" + excerpt(name) + "' (the file holds " +
                   std::to_string(tensors_.size()) + " tensors: " + listed +
                   "); it was written for a different model or by another program");
  }
  return it->second;
}

const TensorRef& SafetensorsFile::get_checked(const std::string& name,
                                              const std::vector<int64_t>& shape) const {
  const TensorRef& t = get(name);
  if (t.shape != shape)
    throw RunError(path() + ": tensor '" + name + "' has shape " + shape_text(t.shape) +
                   " but " + shape_text(shape) +
                   " is expected; the checkpoint was written for a different model shape");
  return t;
}

void SafetensorsFile::read_f32(float* out, const std::string& name,
                               const std::vector<int64_t>& expected_shape) const {
  const TensorRef& t = get_checked(name, expected_shape);
  const size_t n = static_cast<size_t>(element_count(t.shape));
  const auto* bytes = static_cast<const uint8_t*>(t.data);
  switch (t.dtype) {  // memcpy per element: foreign files need not be aligned
    case DType::F32:
      std::memcpy(out, bytes, n * sizeof(float));
      return;
    case DType::F64:
      for (size_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, bytes + 8 * i, 8);
        out[i] = static_cast<float>(v);
      }
      return;
    case DType::F16:
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        out[i] = t.dtype == DType::F16 ? half_to_float(h) : bf16_to_float(h);
      }
      return;
    default:
      throw RunError(path() + ": tensor '" + name + "' is " + dtype_name(t.dtype) +
                     ", not a floating-point tensor");
  }
}

void SafetensorsFile::read_exact(void* out, const std::string& name, DType dtype,
                                 const std::vector<int64_t>& expected_shape) const {
  const TensorRef& t = get_checked(name, expected_shape);
  if (t.dtype != dtype)
    throw RunError(path() + ": tensor '" + name + "' is " + dtype_name(t.dtype) + " but " +
                   dtype_name(dtype) + " is expected");
  std::memcpy(out, t.data, static_cast<size_t>(element_count(t.shape)) * dtype_size(dtype));
}

}  // namespace sg
