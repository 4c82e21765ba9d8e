#include "tensor/tensor.h"

#include <algorithm>
#include <utility>

#include "backend/backend.h"
#include "tensor/micro_batch.h"

namespace sg {

std::string Device::str() const {
  return kind == DeviceKind::Cpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Device parse_device(const std::string& text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.starts_with("cuda:") && text.size() > 5 && text.size() < 9 &&
      text.find_first_not_of("0123456789", 5) == std::string::npos) {
    return Device::cuda(std::stoi(text.substr(5)));
  }
  throw SpecError("device '" + text + "' is not cpu, cuda or cuda:N");
}

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

Buffer::Buffer(Backend& backend, size_t bytes)
    : backend_(&backend), data_(bytes ? backend.allocate(bytes) : nullptr), bytes_(bytes) {}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& other) noexcept
    : backend_(std::exchange(other.backend_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    backend_ = std::exchange(other.backend_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void Buffer::release() noexcept {
  if (data_ != nullptr && backend_ != nullptr) backend_->deallocate(data_);
  data_ = nullptr;
  bytes_ = 0;
}

Device Buffer::device() const { return backend_ ? backend_->device() : Device::cpu(); }

TensorView view_of(const Buffer& buffer, DType dtype, std::vector<int64_t> shape, size_t offset) {
  TensorView v{buffer.data(), offset, dtype, buffer.device(), std::move(shape)};
  if ((offset + v.numel()) * dtype_size(dtype) > buffer.bytes()) {
    throw RunError("a view of " + shape_text(v.shape) + " " + dtype_name(dtype) + " at element " +
                   std::to_string(offset) + " does not fit its buffer of " +
                   std::to_string(buffer.bytes()) + " bytes");
  }
  return v;
}

}  // namespace sg

namespace sg {

void MicroBatch::upload(Backend& backend) {
  if (device_.size() != fields_.size() ||
      (!device_.empty() && device_[0].backend() != &backend)) {
    device_.clear();
    for (const auto& s : storage_) device_.emplace_back(backend, std::max<size_t>(8, s.size() * 8));
  }
  for (size_t i = 0; i < fields_.size(); ++i) {
    const size_t bytes = static_cast<size_t>(element_count(fields_[i].shape)) * dtype_size(fields_[i].dtype);
    backend.upload_batch(device_[i].data(), storage_[i].data(), bytes);
  }
}

}  // namespace sg
