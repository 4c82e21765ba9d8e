#pragma once
// The batch a model consumes, one micro-batch at a time: named host arrays whose dtypes and
// shapes the model family declares (token ids and targets; images and labels). Data sources
// fill them, stage models read them; neither knows the other. upload() copies the fields to a
// backend's memory once filled: the ops read those copies (device()), host code the originals.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/buffer.h"
#include "tensor/tensor.h"

namespace sg {

struct BatchField {
  std::string name;            // "tokens", "targets", "images", "labels"
  DType dtype = DType::I32;
  std::vector<int64_t> shape;  // of one micro-batch; shape[0] is the number of samples
};

class MicroBatch {
 public:
  MicroBatch() = default;
  explicit MicroBatch(std::vector<BatchField> fields) : fields_(std::move(fields)) {
    for (const BatchField& f : fields_) {
      const size_t bytes = static_cast<size_t>(element_count(f.shape)) * dtype_size(f.dtype);
      storage_.emplace_back((bytes + 7) / 8, 0);  // 8-byte aligned
    }
  }
  size_t size() const { return fields_.size(); }
  const BatchField& field(size_t i) const { return fields_[i]; }
  int samples() const { return fields_.empty() ? 0 : static_cast<int>(fields_[0].shape[0]); }
  // Elements of field i per sample.
  size_t per_sample(size_t i) const {
    return static_cast<size_t>(element_count(fields_[i].shape) / fields_[i].shape[0]);
  }
  // Copies every field into `backend`'s memory (allocated on first use), where device() finds it.
  void upload(Backend& backend);
  // Field i in the memory of the backend of the last upload(); RunError before any upload.
  template <class T>
  const T* device(size_t i) const {
    check<T>(i);
    if (i >= device_.size()) throw RunError("micro-batch read on the device before upload()");
    return device_[i].as<const T>();
  }
  // Field i as T*; RunError when T is not its dtype.
  template <class T>
  T* data(size_t i) {
    check<T>(i);
    return reinterpret_cast<T*>(storage_[i].data());
  }
  template <class T>
  const T* data(size_t i) const {
    check<T>(i);
    return reinterpret_cast<const T*>(storage_[i].data());
  }

 private:
  template <class T>
  void check(size_t i) const {
    if (i >= fields_.size()) {
      throw RunError("micro-batch has no field " + std::to_string(i));
    }
    if (fields_[i].dtype != dtype_of<T>()) {
      throw RunError("micro-batch field " + std::to_string(i) + " read with the wrong type");
    }
  }
  std::vector<BatchField> fields_;
  std::vector<std::vector<uint64_t>> storage_;
  std::vector<Buffer> device_;  // per field, after upload()
};

}  // namespace sg
