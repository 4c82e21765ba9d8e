#pragma once
// The oneDNN engine and stream of the CPU backend, and a cache of primitives keyed by shape
// (creating a primitive descriptor costs far more than running a small one). Private to
// kernels/cpu/. oneDNN runs on OpenMP (Debian's libdnnl is built with DNNL_RUNTIME_OMP), so it
// follows omp_set_num_threads like the other kernels.
#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace sg::cpu::dnnl_detail {

dnnl::engine& engine();
dnnl::stream& stream();

// Runs fn, turning a oneDNN error into a RunError that names the op and what to do.
template <class F>
auto checked(const char* what, F&& fn) -> decltype(fn());

// One cache per primitive kind: Key -> the primitives and scratch of one shape, built by
// make(key) on first use. Entries live as long as the process.
template <class Key, class Entry>
class PrimitiveCache {
 public:
  template <class Make>
  Entry& get(const Key& key, Make make) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) it = entries_.emplace(key, std::make_unique<Entry>(make(key))).first;
    return *it->second;
  }

 private:
  std::mutex mutex_;
  std::map<Key, std::unique_ptr<Entry>> entries_;
};

[[noreturn]] void throw_dnnl_error(const char* what, const dnnl::error& e);

template <class F>
auto checked(const char* what, F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const dnnl::error& e) {
    throw_dnnl_error(what, e);
  }
}

// Accumulates src (any layout oneDNN chose) into dst (plain): dst += src, through a reorder
// with a sum post-op.
void reorder_add(dnnl::memory& src, dnnl::memory dst);

}  // namespace sg::cpu::dnnl_detail
