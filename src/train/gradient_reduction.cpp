#include "train/gradient_reduction.h"

#include <algorithm>

namespace sg {

GradientReduction::GradientReduction(const RunEnvironment& env, ProcessModel& model,
                                     const ReplicaPlan& plan)
    : backend_(env.backend),
      world_(env.world),
      model_(model),
      plan_(plan),
      deterministic_(env.spec.train.deterministic),
      bucketed_(model.mesh.data_group->size() > 1 && !deterministic_ &&
                env.spec.parallel.zero < 2 && model.mesh.stages == 1),
      tree_sum_(deterministic_ ? model.grad_floats() : 0, env.backend) {
  if (deterministic_) {
    replica_grads_ = Buffer(backend_, model.grads.bytes());
    replica_losses_.assign(static_cast<size_t>(plan.replicas), 0.0);
  }
}

void GradientReduction::begin_step() {
  backend_.zero(model_.grad_data(), model_.grad_floats());
  loss_sum_ = 0;
  if (deterministic_) {
    tree_sum_.clear();
    std::fill(replica_losses_.begin(), replica_losses_.end(), 0.0);
  }
}

float* GradientReduction::replica_grads(int) {
  if (!deterministic_) return model_.grad_data();
  float* g = replica_grads_.as<float>();
  backend_.zero(g, replica_grads_.bytes() / sizeof(float));
  return g;
}

OnReady GradientReduction::on_ready(int r) {
  if (!bucketed_ || r != plan_.first + plan_.local - 1) return {};
  return [this](size_t begin, size_t end) {
    buckets_.push_back(model_.mesh.data_device().start_all_reduce_sum(model_.grad_data() + begin,
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
  Communicator& world = world_;
  if (deterministic_) {
    const size_t n = model_.grad_floats();
    backend_.copy(model_.grad_data(), tree_sum_.result(), n * sizeof(float));
    tree_all_reduce(model_.grad_data(), n, model_.mesh.data_device(), tree_scratch_, backend_);
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
