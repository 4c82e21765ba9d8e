#pragma once
// A typed view of part of a buffer (docs/architecture.md, "Tensors, models and optimizers"): where
// the data starts, its dtype, device and shape. Views never own memory; the Buffer they point into
// must outlive them. Contiguous, row-major.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/buffer.h"
#include "tensor/dtype.h"
#include "util/error.h"

namespace sg {

int64_t element_count(const std::vector<int64_t>& shape);
std::string shape_text(const std::vector<int64_t>& shape);  // "[768, 2304]"

struct TensorView {
  void* base = nullptr;  // start of the buffer
  size_t offset = 0;     // in elements of dtype, from base
  DType dtype = DType::F32;
  Device device;
  std::vector<int64_t> shape;

  size_t numel() const { return static_cast<size_t>(element_count(shape)); }
  size_t bytes() const { return numel() * dtype_size(dtype); }
  void* data() const { return static_cast<char*>(base) + offset * dtype_size(dtype); }
  // The data as T*; RunError when T is not the view's dtype.
  template <class T>
  T* as() const {
    if (dtype_of<T>() != dtype) {
      throw RunError(std::string("tensor of ") + dtype_name(dtype) + " read as " +
                     dtype_name(dtype_of<T>()));
    }
    return static_cast<T*>(data());
  }
};

// A view of `shape` elements of `dtype` starting `offset` elements into the buffer; RunError
// when it does not fit.
TensorView view_of(const Buffer& buffer, DType dtype, std::vector<int64_t> shape,
                   size_t offset = 0);

}  // namespace sg
