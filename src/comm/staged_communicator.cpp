#include "comm/staged_communicator.h"

namespace sg {
namespace {

// An operation whose result reaches device memory when it completes.
class StagedRequest final : public CommRequest {
 public:
  StagedRequest(CommHandle inner, std::vector<unsigned char> host, void* device_dst,
                Backend& backend)
      : inner_(std::move(inner)), host_(std::move(host)), dst_(device_dst), backend_(backend) {}
  bool test() override {
    if (done_) return true;
    if (!inner_->test()) return false;
    finish();
    return true;
  }
  void wait() override {
    if (done_) return;
    inner_->wait();
    finish();
  }

 private:
  void finish() {
    if (dst_ != nullptr) backend_.copy_from_host(dst_, host_.data(), host_.size());
    done_ = true;
  }
  CommHandle inner_;
  std::vector<unsigned char> host_;
  void* dst_;
  Backend& backend_;
  bool done_ = false;
};

}  // namespace

StagedCommunicator::StagedCommunicator(Communicator& host, Backend& backend,
                                       std::unique_ptr<Communicator> owned)
    : owned_(std::move(owned)), host_(host), backend_(backend) {}

std::vector<unsigned char>& StagedCommunicator::stage_in(const void* src, size_t bytes) {
  staging_.resize(bytes);
  if (bytes > 0) backend_.copy_to_host(staging_.data(), src, bytes);
  return staging_;
}

// A group of one (alone()): every collective is the identity or a device copy, so nothing goes
// through the host (a one-GPU job's data and tensor groups, docs/gpu.md).
bool StagedCommunicator::alone() const { return host_.size() == 1; }

namespace {
class DoneRequest final : public CommRequest {
 public:
  bool test() override { return true; }
  void wait() override {}
};
}  // namespace

void StagedCommunicator::all_reduce(void* data, size_t n, DType dtype, ReduceOp op) {
  if (alone()) return;
  const size_t bytes = n * dtype_size(dtype);
  auto& h = stage_in(data, bytes);
  host_.all_reduce(h.data(), n, dtype, op);
  if (bytes > 0) backend_.copy_from_host(data, h.data(), bytes);
}

CommHandle StagedCommunicator::start_all_reduce(void* data, size_t n, DType dtype, ReduceOp op) {
  if (alone()) return std::make_unique<DoneRequest>();
  const size_t bytes = n * dtype_size(dtype);
  std::vector<unsigned char> h(bytes);
  if (bytes > 0) backend_.copy_to_host(h.data(), data, bytes);
  CommHandle inner = host_.start_all_reduce(h.data(), n, dtype, op);
  // The vector's heap block moves with it: the pointer MPI holds stays valid.
  return std::make_unique<StagedRequest>(std::move(inner), std::move(h), data, backend_);
}

void StagedCommunicator::reduce_scatter(void* out, const void* in, size_t n_per_rank,
                                        DType dtype, ReduceOp op) {
  const size_t elem = dtype_size(dtype);
  if (alone()) {
    if (out != in && n_per_rank > 0) backend_.copy(out, in, n_per_rank * elem);
    return;
  }
  auto& h = stage_in(in, n_per_rank * elem * static_cast<size_t>(size()));
  staging_out_.resize(n_per_rank * elem);
  host_.reduce_scatter(staging_out_.data(), h.data(), n_per_rank, dtype, op);
  if (!staging_out_.empty()) backend_.copy_from_host(out, staging_out_.data(), staging_out_.size());
}

void StagedCommunicator::all_gather_into(void* out, const void* in, size_t n_per_rank,
                                         DType dtype) {
  const size_t elem = dtype_size(dtype);
  if (alone()) {
    if (out != in && n_per_rank > 0) backend_.copy(out, in, n_per_rank * elem);
    return;
  }
  auto& h = stage_in(in, n_per_rank * elem);
  staging_out_.resize(n_per_rank * elem * static_cast<size_t>(size()));
  host_.all_gather_into(staging_out_.data(), h.data(), n_per_rank, dtype);
  if (!staging_out_.empty()) backend_.copy_from_host(out, staging_out_.data(), staging_out_.size());
}

void StagedCommunicator::all_gather_inplace(void* buf, size_t n_per_rank, DType dtype) {
  if (alone()) return;
  const size_t bytes = n_per_rank * dtype_size(dtype) * static_cast<size_t>(size());
  auto& h = stage_in(buf, bytes);
  host_.all_gather_inplace(h.data(), n_per_rank, dtype);
  if (bytes > 0) backend_.copy_from_host(buf, h.data(), bytes);
}

void StagedCommunicator::broadcast(void* data, size_t bytes, int root) {
  if (alone()) return;
  auto& h = stage_in(data, bytes);
  host_.broadcast(h.data(), bytes, root);
  if (bytes > 0) backend_.copy_from_host(data, h.data(), bytes);
}

void StagedCommunicator::send(const void* data, size_t bytes, int dest, int tag) {
  auto& h = stage_in(data, bytes);
  host_.send(h.data(), bytes, dest, tag);
}

void StagedCommunicator::recv(void* data, size_t bytes, int source, int tag) {
  staging_.resize(bytes);
  host_.recv(staging_.data(), bytes, source, tag);
  if (bytes > 0) backend_.copy_from_host(data, staging_.data(), bytes);
}

CommHandle StagedCommunicator::start_send(const void* data, size_t bytes, int dest, int tag) {
  std::vector<unsigned char> h(bytes);
  if (bytes > 0) backend_.copy_to_host(h.data(), data, bytes);
  CommHandle inner = host_.start_send(h.data(), bytes, dest, tag);
  return std::make_unique<StagedRequest>(std::move(inner), std::move(h), nullptr, backend_);
}

std::unique_ptr<Communicator> StagedCommunicator::split(int color, int key) {
  auto part = host_.split(color, key);
  Communicator& ref = *part;
  return std::make_unique<StagedCommunicator>(ref, backend_, std::move(part));
}

}  // namespace sg
