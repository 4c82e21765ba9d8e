#include "optim/muon.h"

#include <algorithm>
#include <cmath>

#include <cblas.h>

#include "util/error.h"

namespace sg {
namespace {

constexpr float kNsA = 3.4445f, kNsB = -4.7750f, kNsC = 2.0315f;  // torch.optim.Muon's
constexpr double kNsEps = 1e-7;

void transpose(float* out, const float* in, int rows, int cols) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[static_cast<size_t>(c) * rows + r] = in[static_cast<size_t>(r) * cols + c];
}

}  // namespace

bool is_muon_tensor(const ParamTensor& t, const ParameterLayout& layout) {
  return t.global_shape.size() == 2 && t.block >= 0 && t.block < layout.model().blocks &&
         !t.tied_copy;
}

double muon_scratch_floats(const ModelDescription& model, double flat_floats) {
  double largest = 0;
  for (const TensorSpec& t : model.tensors)
    if (t.shape.size() == 2 && t.block >= 0 && t.block < model.blocks)
      largest = std::max(largest, static_cast<double>(element_count(t.shape)));
  return flat_floats + 6 * largest;
}

void newton_schulz(float* out, const float* u, int rows, int cols, int steps) {
  // X (m, n), m <= n: u or its transpose.
  const bool tall = rows > cols;
  const int m = tall ? cols : rows, n = tall ? rows : cols;
  const size_t mn = static_cast<size_t>(m) * n;
  std::vector<float> x(mn), next(mn), gram(static_cast<size_t>(m) * m),
      update(static_cast<size_t>(m) * m);
  if (tall) {
    transpose(x.data(), u, rows, cols);
  } else {
    std::copy_n(u, mn, x.data());
  }
  double sum = 0;
  for (float v : x) sum += static_cast<double>(v) * v;
  const float inv = static_cast<float>(1.0 / std::max(std::sqrt(sum), kNsEps));
  for (float& v : x) v *= inv;
  for (int k = 0; k < steps; ++k) {
    // G = X X^T; U = b G + c G G; X' = a X + U X
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, m, n, 1.0f, x.data(), n, x.data(), n,
                0.0f, gram.data(), m);
    update = gram;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, kNsC, gram.data(), m,
                gram.data(), m, kNsB, update.data(), m);
    next = x;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, m, 1.0f, update.data(), m,
                x.data(), n, kNsA, next.data(), n);
    x.swap(next);
  }
  if (tall) {
    transpose(out, x.data(), cols, rows);
  } else {
    std::copy_n(x.data(), mn, out);
  }
}

MuonOptimizer::MuonOptimizer(const ParameterLayout& layout, const OptimSpec& spec, size_t begin,
                             size_t end, Backend& backend, const OptimizerGroups& groups)
    : Optimizer(layout, spec, begin, end, backend, 2), groups_(groups) {
  if (backend.device().kind != DeviceKind::Cpu)
    throw SpecError("optim.name muon runs on the CPU backend for now; use devices.backend: cpu");
  const float decay = static_cast<float>(spec_.weight_decay);
  const auto& ts = layout.tensors();
  for (size_t i = 0; i < ts.size(); ++i) {
    const ParamTensor& t = ts[i];
    const size_t lo = std::max(t.offset, this->begin()), hi = std::min(t.offset + t.numel, this->end());
    if (lo >= hi) continue;
    if (is_muon_tensor(t, layout)) {
      matrices_.push_back(i);
      continue;
    }
    const long from = static_cast<long>(lo - this->begin()), to = static_cast<long>(hi - this->begin());
    const float wd = t.decay ? decay : 0.0f;
    if (!adamw_ranges_.empty() && adamw_ranges_.back().end == from &&
        adamw_ranges_.back().weight_decay == wd) {
      adamw_ranges_.back().end = to;
    } else {
      adamw_ranges_.push_back({from, to, wd});
    }
  }
  const bool zero = groups_.zero != nullptr && groups_.zero->size() > 1;
  nesterov_.assign(zero ? groups_.zero_shard * static_cast<size_t>(groups_.zero->size())
                        : layout.total(),
                   0.0f);
}

const float* MuonOptimizer::whole_matrix(const ParamTensor& t) {
  const float* local = nesterov_.data() + t.offset;
  const ModelShard& shard = layout_.shard();
  if (shard.tensors == 1 || t.split == TensorSplit::kWhole) return local;
  Communicator& tp = *groups_.tensor;
  gathered_.resize(t.numel * static_cast<size_t>(tp.size()));
  tp.all_gather(gathered_.data(), local, t.numel);
  whole_.resize(static_cast<size_t>(element_count(t.global_shape)));
  for (int r = 0; r < tp.size(); ++r) {  // rank r's part into its place in the whole matrix
    ModelShard theirs = shard;
    theirs.tensor_rank = r;
    const float* part = gathered_.data() + t.numel * static_cast<size_t>(r);
    for_each_run(t, theirs, [&](size_t l, size_t g, size_t n) {
      std::copy_n(part + l, n, whole_.data() + g);
    });
  }
  return whole_.data();
}

void MuonOptimizer::apply(float* params, const float* grads, std::span<const UpdateRange>,
                          double lr, int step, float grad_scale) {
  if (!adamw_ranges_.empty())
    backend_.adamw_update_ranges(params, state(0), state(1), grads, adamw_ranges_,
                                 static_cast<float>(lr), static_cast<float>(spec_.betas[0]),
                                 static_cast<float>(spec_.betas[1]), static_cast<float>(spec_.eps),
                                 step, grad_scale);
  // The momentum of this shard's part of each matrix, and u into the whole buffer.
  const float mu = static_cast<float>(spec_.muon_momentum);
  const auto& ts = layout_.tensors();
  const size_t base = begin();
  for (size_t i : matrices_) {
    const ParamTensor& t = ts[i];
    const size_t lo = std::max(t.offset, base), hi = std::min(t.offset + t.numel, end());
    float* m = state(0) + (lo - base);
    const float* g = grads + (lo - base);
    float* u = nesterov_.data() + lo;
    for (size_t k = 0; k < hi - lo; ++k) {
      const float gk = g[k] * grad_scale;
      m[k] += (1.0f - mu) * (gk - m[k]);  // torch's lerp
      u[k] = spec_.muon_nesterov ? gk + mu * (m[k] - gk) : m[k];
    }
  }
  if (groups_.zero != nullptr && groups_.zero->size() > 1)
    groups_.zero->all_gather_in_place(nesterov_.data(), groups_.zero_shard);
  // Each matrix whole, then this shard's part of the update.
  const double muon_lr = spec_.lr > 0 ? spec_.muon_lr * lr / spec_.lr : 0.0;
  for (size_t i : matrices_) {
    const ParamTensor& t = ts[i];
    const int rows = static_cast<int>(t.global_shape[0]), cols = static_cast<int>(t.global_shape[1]);
    const float* whole = whole_matrix(t);
    ortho_.resize(static_cast<size_t>(rows) * cols);
    newton_schulz(ortho_.data(), whole, rows, cols, spec_.muon_ns_steps);
    const float decay = t.decay ? static_cast<float>(1.0 - muon_lr * spec_.weight_decay) : 1.0f;
    const float step_size = static_cast<float>(muon_lr * std::sqrt(std::max(1.0, double(rows) / cols)));
    const size_t lo = std::max(t.offset, base), hi = std::min(t.offset + t.numel, end());
    for_each_run(t, layout_.shard(), [&](size_t l, size_t g, size_t n) {
      // Local elements [t.offset + l, + n) hold whole elements [g, g + n); keep this shard's.
      const size_t from = std::max(t.offset + l, lo), to = std::min(t.offset + l + n, hi);
      for (size_t k = from; k < to; ++k) {
        float& p = params[k - base];
        p = p * decay - step_size * ortho_[g + (k - t.offset - l)];
      }
    });
  }
}

}  // namespace sg
