#pragma once
// Host access to a range of a backend's memory, for the code that must touch values on the host
// (initialisation, checkpoint loading and saving): on the host backend the memory itself, on a
// device a host copy, read from the device when asked and written back by upload(). Not for
// the training step, which never leaves the device.
#include <cstddef>
#include <vector>

#include "backend/backend.h"

namespace sg {

class HostMirror {
 public:
  // read: start from the device's values (else from zeros).
  HostMirror(Backend& backend, float* device, size_t n, bool read)
      : backend_(backend), device_(device), n_(n) {
    if (backend.device().is_cpu()) return;
    copy_.assign(n, 0.0f);
    if (read && n > 0) backend.copy_to_host(copy_.data(), device, n * sizeof(float));
  }
  float* data() { return backend_.device().is_cpu() ? device_ : copy_.data(); }
  // Writes the host values to the device (nothing to do on the host backend).
  void upload() {
    if (!backend_.device().is_cpu() && n_ > 0) {
      backend_.copy_from_host(device_, copy_.data(), n_ * sizeof(float));
    }
  }

 private:
  Backend& backend_;
  float* device_;
  size_t n_;
  std::vector<float> copy_;
};

}  // namespace sg
