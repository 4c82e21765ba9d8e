#pragma once
// Muon (Keller Jordan's MomentUm Orthogonalized by Newton-Schulz, as torch.optim.Muon in PyTorch
// 2.9+): the hidden layers' 2-D weight matrices step along their momentum orthogonalised by a
// Newton-Schulz iteration; everything else (embeddings, the head, norms, biases, convolutions)
// takes AdamW with optim.lr, betas and eps, as the Muon recipe pairs them.
//
// Per matrix W (rows A, cols B), gradient g (clipped like every gradient here), at step t:
//   m = mu m + (1 - mu) g                      (torch's buf.lerp_(grad, 1 - momentum))
//   u = (1 - mu) g + mu m   (nesterov)  or  m
//   O = NS(u): X = u (transposed when A > B), X /= max(|X|_F, 1e-7), then ns_steps times
//       X = a X + (b G + c G^2) X, G = X X^T, (a, b, c) = (3.4445, -4.7750, 2.0315)
//   W = W (1 - lr wd) - lr sqrt(max(1, A/B)) O
// with lr = optim.muon_lr on optim.lr's schedule. Differences from torch: the iteration runs in
// fp32, not bf16 (torch's choice for GPU speed), and the gradient is clipped by the global norm
// first (optim.grad_clip; 0 leaves it alone, as torch).
//
// State: "m" (AdamW's first moment; a matrix's momentum) and "v" (AdamW's second moment; unused
// for a matrix), one element per parameter, so ZeRO shards it like AdamW's.
// A matrix is orthogonalised whole:
//   - ZeRO: each process updates the momentum of its shard, then the processes all-gather u
//     over the whole flat buffer (one more all-gather a step, as the parameters'), and each
//     orthogonalises every matrix that meets its shard and updates its part (a matrix across
//     two shards is orthogonalised on both, identically);
//   - tensor parallelism: a matrix split by rows or columns is all-gathered over the tensor group
//     into the whole matrix, orthogonalised on every tensor rank alike, and each keeps its part.
// Runs on the CPU backend (host memory, OpenBLAS products).
#include <vector>

#include "comm/communicator.h"
#include "optim/optimizer.h"

namespace sg {

// The groups Muon gathers matrices over (optim/optimizer.h's make_optimizer).
struct OptimizerGroups {
  Communicator* zero = nullptr;  // the data-parallel group when ZeRO shards the state
  size_t zero_shard = 0;         // its shard size (elements)
  Communicator* tensor = nullptr;  // the tensor-parallel group (size > 1: split matrices)
};

// Whether tensor t takes Muon: a 2-D weight inside the model's blocks.
bool is_muon_tensor(const ParamTensor& t, const ParameterLayout& layout);

// Floats of host scratch Muon keeps besides its state, for `plan`: u over the flat buffer
// (flat_floats) and, for the largest matrix, its gathered parts, the whole, the result and the
// Newton-Schulz work (about six times its size).
double muon_scratch_floats(const ModelDescription& model, double flat_floats);

// torch.optim.Muon's orthogonalisation of u (rows, cols) into out, in fp32 (see above).
void newton_schulz(float* out, const float* u, int rows, int cols, int steps);

class MuonOptimizer final : public Optimizer {
 public:
  MuonOptimizer(const ParameterLayout& layout, const OptimSpec& spec, size_t begin, size_t end,
                Backend& backend, const OptimizerGroups& groups);
  std::string name() const override { return "muon"; }
  std::vector<std::string> state_names() const override { return {"m", "v"}; }

 private:
  void apply(float* params, const float* grads, std::span<const UpdateRange> ranges, double lr,
             int step, float grad_scale) override;
  // The whole matrix of u for layout tensor t (gathered over the tensor group when split).
  const float* whole_matrix(const ParamTensor& t);

  OptimizerGroups groups_;
  std::vector<UpdateRange> adamw_ranges_;  // relative to begin()
  std::vector<size_t> matrices_;           // layout tensors taking Muon that meet [begin, end)
  std::vector<float> nesterov_;            // u over the (padded) flat buffer
  std::vector<float> gathered_, whole_, ortho_;
};

}  // namespace sg
