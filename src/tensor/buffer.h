#pragma once
// Memory owned on one device, allocated by (and returned to) the backend that serves it
// (docs/architecture.md, "Tensors, models and optimizers"). Move-only; the bytes are not
// initialised. Parameters, gradients, optimizer state and activation arenas are each one Buffer per
// process; tensors are views into them.
#include <cstddef>

#include "tensor/device.h"

namespace sg {

class Backend;

class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend& backend, size_t bytes);  // RunError when the backend cannot allocate
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const;
  Backend* backend() const { return backend_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void release() noexcept;
  Backend* backend_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace sg
