#include "train/gradient_reduction.h"

#include <algorithm>

namespace sg {

GradientReduction::GradientReduction(TrainingRun& run)
    : run_(run),
      deterministic_(run.spec.train.deterministic),
      bucketed_(run.mesh.data_group->size() > 1 && !deterministic_ &&
                run.spec.parallel.zero < 2 && run.mesh.stages == 1),
      tree_sum_(deterministic_ ? run.grads.bytes() / sizeof(float) : 0, run.backend) {
  if (deterministic_) {
    replica_grads_ = Buffer(run.backend, run.grads.bytes());
    replica_losses_.assign(static_cast<size_t>(run.replicas), 0.0);
  }
}

void GradientReduction::begin_step() {
  run_.backend.zero(run_.grad_data(), run_.grads.bytes() / sizeof(float));
  loss_sum_ = 0;
  if (deterministic_) {
    tree_sum_.clear();
    std::fill(replica_losses_.begin(), replica_losses_.end(), 0.0);
  }
}

float* GradientReduction::replica_grads(int) {
  if (!deterministic_) return run_.grad_data();
  float* g = replica_grads_.as<float>();
  run_.backend.zero(g, replica_grads_.bytes() / sizeof(float));
  return g;
}

OnReady GradientReduction::on_ready(int r) {
  if (!bucketed_ || r != run_.first_replica + run_.local_replicas - 1) return {};
  return [this](size_t begin, size_t end) {
    buckets_.push_back(run_.mesh.data_device().start_all_reduce_sum(run_.grad_data() + begin,
                                                                    end - begin));
    for (CommHandle& bucket : buckets_) bucket->test();  // MPI has no progress thread
  };
}

void GradientReduction::replica_done(int r, double loss) {
  if (deterministic_) {
    tree_sum_.add(replica_grads_.as<float>());
    replica_losses_[static_cast<size_t>(r)] = loss;
  } else {
    loss_sum_ += loss;
  }
}

double GradientReduction::finish() {
  Communicator& world = run_.world;
  if (deterministic_) {
    const size_t n = run_.grads.bytes() / sizeof(float);
    run_.backend.copy(run_.grad_data(), tree_sum_.result(), n * sizeof(float));
    tree_all_reduce(run_.grad_data(), n, run_.mesh.data_device(), tree_scratch_, run_.backend);
    // One slot per replica, zero elsewhere: the MPI sum is exact, then a fixed-order sum.
    if (world.size() > 1) world.all_reduce_sum(replica_losses_.data(), replica_losses_.size());
    for (double l : replica_losses_) loss_sum_ += l;
  } else if (world.size() > 1) {
    world.all_reduce_sum(&loss_sum_, 1);
  }
  for (CommHandle& bucket : buckets_) bucket->wait();
  buckets_.clear();
  return loss_sum_;
}

}  // namespace sg
