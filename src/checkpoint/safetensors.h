#pragma once
// The Hugging Face safetensors format (https://huggingface.co/docs/safetensors):
//   u64 little-endian N | N bytes of JSON header | raw little-endian tensor data
// header = { name: {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//            "__metadata__": {string: string} }, offsets relative to the data section.
// Files we write load in the safetensors Python/Rust libraries and vice versa (GPT-2 import and
// export; docs/architecture.md, "Checkpoints"). Reads are memory-mapped and validated before any
// tensor is handed out.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/file_io.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace sg {

struct TensorRef {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // prod(shape) elements of dtype; not owned
};


// Size and XXH3-64 checksum of a file as written.
struct FileDigest {
  uint64_t bytes = 0;
  std::string xxh3;  // 16 hex digits
};

// Writes the tensors atomically (temp file + rename). Tensors are laid out by decreasing element
// size, as the reference writer does, so every tensor is aligned to its dtype in the mapping.
// Names must be unique and not "__metadata__".
FileDigest write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                             const std::map<std::string, std::string>& metadata);

class SafetensorsFile {
 public:
  // Maps and validates the file: header length and JSON (nested at most kMaxJsonDepth levels,
  // checkpoint/json_fields.h), dtypes, shapes against byte sizes, offsets inside the file and
  // not overlapping. Any failure is a RunError of one line naming the file, echoing at most
  // kMaxEchoChars of any value.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // RunError naming the file and the tensor if absent.
  const TensorRef& get(const std::string& name) const;

  // Copies tensor `name` into out (prod(expected_shape) floats), converting from F32, F64, F16 or
  // BF16; RunError if the shape differs or the dtype is not a float.
  void read_f32(float* out, const std::string& name,
                const std::vector<int64_t>& expected_shape) const;
  // Copies tensor `name` into out as raw bytes; RunError unless dtype and shape match exactly.
  void read_exact(void* out, const std::string& name, DType dtype,
                  const std::vector<int64_t>& expected_shape) const;

 private:
  const TensorRef& get_checked(const std::string& name, const std::vector<int64_t>& shape) const;
  MappedFile file_;
  std::map<std::string, TensorRef> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace sg
