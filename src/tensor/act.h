#pragma once
// An activation's memory and the type its elements are stored in: fp32, or bf16 where the
// backend stores activations in 16 bits (train.precision: bf16, docs/bf16.md). The ops of
// backend.h take these for the activations and activation gradients they read and write; a
// float* converts to one implicitly (fp32), so fp32 callers pass plain pointers. Parameters,
// their gradients, optimizer state and statistics (means, log-sum-exps, losses) stay float*.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensor/dtype.h"
#include "util/error.h"

namespace sg {

namespace detail {
[[noreturn]] inline void act_type_error(DType have, const char* want) {
  throw RunError(std::string("an activation stored as ") + dtype_name(have) + " was read as " +
                 want + "; this op has no kernel for that storage on this backend");
}
}  // namespace detail

// Writable activation memory.
struct Act {
  void* data = nullptr;
  DType dtype = DType::F32;

  Act() = default;
  Act(float* p) : data(p), dtype(DType::F32) {}  // NOLINT: implicit, fp32 callers
  Act(std::nullptr_t) {}                           // NOLINT
  Act(void* p, DType t) : data(p), dtype(t) {}

  bool bf16() const { return dtype == DType::BF16; }
  explicit operator bool() const { return data != nullptr; }
  float* f32() const {
    if (dtype != DType::F32) detail::act_type_error(dtype, "F32");
    return static_cast<float*>(data);
  }
  uint16_t* b16() const {
    if (dtype != DType::BF16) detail::act_type_error(dtype, "BF16");
    return static_cast<uint16_t*>(data);
  }
  // The activation `elements` further on (a row, a slot), of the same type.
  Act at(size_t elements) const {
    return {static_cast<char*>(data) + elements * dtype_size(dtype), dtype};
  }
};

// Activation memory an op only reads.
struct ConstAct {
  const void* data = nullptr;
  DType dtype = DType::F32;

  ConstAct() = default;
  ConstAct(const float* p) : data(p), dtype(DType::F32) {}  // NOLINT: implicit, fp32 callers
  ConstAct(std::nullptr_t) {}                                // NOLINT
  ConstAct(Act a) : data(a.data), dtype(a.dtype) {}          // NOLINT
  ConstAct(const void* p, DType t) : data(p), dtype(t) {}

  bool bf16() const { return dtype == DType::BF16; }
  explicit operator bool() const { return data != nullptr; }
  const float* f32() const {
    if (dtype != DType::F32) detail::act_type_error(dtype, "F32");
    return static_cast<const float*>(data);
  }
  const uint16_t* b16() const {
    if (dtype != DType::BF16) detail::act_type_error(dtype, "BF16");
    return static_cast<const uint16_t*>(data);
  }
  ConstAct at(size_t elements) const {
    return {static_cast<const char*>(data) + elements * dtype_size(dtype), dtype};
  }
};

}  // namespace sg
