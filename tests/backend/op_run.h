#pragma once
// What a backend-op case (backend_op_cases.h) runs with: a subject backend and the reference (the
// CPU backend), tensors with the same values on both, the op called on each, and the subject's
// results compared with the reference's (bitwise, or to the case's relative tolerance).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "util/rng.h"

namespace sg::test {

// One tensor on both backends: [0] the reference's, [1] the subject's.
template <class T>
struct OpPair {
  T* on[2] = {nullptr, nullptr};
  size_t n = 0;
  T* operator[](int side) const { return on[side]; }
};

class OpRun {
 public:
  // exact: the subject must give the reference's bits; else within the case's tolerance.
  OpRun(Backend& subject, bool exact, uint64_t seed)
      : backends_{&cpu_backend(), &subject}, exact_(exact), rng_(seed) {}
  ~OpRun() {
    for (auto& [backend, ptr] : owned_) backend->deallocate(ptr);
  }
  OpRun(const OpRun&) = delete;
  OpRun& operator=(const OpRun&) = delete;

  Backend& backend(int side) const { return *backends_[side]; }
  void set_tolerance(double relative) { tolerance_ = relative; }

  // A tensor holding `values` on both backends.
  template <class T>
  OpPair<T> input(const std::vector<T>& values) {
    OpPair<T> p;
    p.n = values.size();
    for (int side = 0; side < 2; ++side) {
      void* ptr = backends_[side]->allocate(std::max<size_t>(1, p.n) * sizeof(T));
      owned_.emplace_back(backends_[side], ptr);
      backends_[side]->copy_from_host(ptr, values.data(), p.n * sizeof(T));
      p.on[side] = static_cast<T*>(ptr);
    }
    return p;
  }
  // n floats uniform in [lo, hi).
  OpPair<float> random(size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::vector<float> v(n);
    for (float& x : v) x = lo + (hi - lo) * static_cast<float>(rng_.uniform());
    return input(v);
  }
  // n int32 in [0, bound).
  OpPair<int32_t> ids(size_t n, int bound) {
    std::vector<int32_t> v(n);
    for (int32_t& x : v) x = static_cast<int32_t>(rng_.next_u64() % static_cast<uint64_t>(bound));
    return input(v);
  }
  OpPair<float> filled(size_t n, float value) { return input(std::vector<float>(n, value)); }
  // Different sizes on the two backends (an attention state): n(backend) floats, zeroed.
  OpPair<float> per_backend(const std::function<size_t(Backend&)>& n) {
    OpPair<float> p;
    for (int side = 0; side < 2; ++side) {
      const size_t count = std::max<size_t>(1, n(*backends_[side]));
      void* ptr = backends_[side]->allocate(count * sizeof(float));
      owned_.emplace_back(backends_[side], ptr);
      backends_[side]->zero(static_cast<float*>(ptr), count);
      p.on[side] = static_cast<float*>(ptr);
    }
    return p;
  }

  // Runs fn(backend, side) on the reference, then on the subject.
  void both(const std::function<void(Backend&, int)>& fn) {
    for (int side = 0; side < 2; ++side) fn(*backends_[side], side);
  }

  // The subject's values of p against the reference's.
  template <class T>
  void expect(const OpPair<T>& p, const char* what) {
    std::vector<T> ref(p.n), got(p.n);
    backends_[0]->copy_to_host(ref.data(), p[0], p.n * sizeof(T));
    backends_[1]->copy_to_host(got.data(), p[1], p.n * sizeof(T));
    INFO(what);
    if (exact_ || !std::is_floating_point_v<T>) {
      CHECK(std::memcmp(ref.data(), got.data(), p.n * sizeof(T)) == 0);
      return;
    }
    double largest = 0, worst = 0;
    for (size_t i = 0; i < p.n; ++i) {
      largest = std::max(largest, std::fabs(static_cast<double>(ref[i])));
      worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - ref[i]));
    }
    CHECK_MESSAGE(worst <= tolerance_ * std::max(largest, 1e-30),
                  "max difference " << worst << " against a largest value of " << largest);
  }
  void expect_value(double ref, double got, const char* what) {
    INFO(what);
    if (exact_) CHECK(ref == got);
    else CHECK(std::fabs(got - ref) <= tolerance_ * std::max(std::fabs(ref), 1e-30));
  }

 private:
  Backend* backends_[2];
  bool exact_;
  double tolerance_ = 1e-5;
  Rng rng_;
  std::vector<std::pair<Backend*, void*>> owned_;
};

}  // namespace sg::test
