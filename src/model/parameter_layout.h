#pragma once
// GPT-2 parameters as named ranges of one flat buffer (DESIGN §4): bucketing, ZeRO sharding and
// checkpointing all work on ranges of the flat buffer. Order: wte, wpe, then each block's tensors
// contiguously (so a pipeline stage owns one contiguous range), then ln_f. Names follow the
// Hugging Face GPT-2 layout; Linear weights are stored (out, in) like nn.Linear (HF's Conv1D is
// the transpose). The LM head is tied to wte.
//
// A layout may describe one process's shard of the model (tensor rank t of T, pipeline stage s
// of S; docs/design-notes.md "Tensor and pipeline parallelism"):
//   - stage s holds a contiguous run of blocks (stage_layers: balanced with the LM head's cost
//     on the last stage); stage 0 also wte and wpe; the last stage ln_f and, when S > 1, a copy
//     of wte for the tied LM head (placed last, `tied_copy`);
//   - Megatron split: attn.c_attn and mlp.c_fc keep the rows of this rank's heads / hidden
//     units (column-parallel), attn.c_proj and mlp.c_proj the matching columns (row-parallel);
//     wte keeps vocabulary rows [t*Vp/T, (t+1)*Vp/T); everything else is replicated.
// Tensors keep their global names; `runs` map a local tensor onto the global tensor, so
// checkpoints always hold whole tensors and any mesh can load any checkpoint.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace sg {

struct GPT2Shape {
  int n_layer = 0;
  int n_head = 0;
  int n_embd = 0;      // C
  int context = 0;     // maximum sequence length (rows of wpe)
  int vocab = 0;       // V: real tokens
  int padded_vocab = 0;  // Vp >= V: rows of wte; padding rows stay zero
};

// Which part of the model one process holds.
struct ModelShard {
  int tensor_rank = 0, tensors = 1;  // t of T
  int stage = 0, stages = 1;         // s of S
};

enum class TensorSplit : uint8_t {
  kWhole,    // replicated: every tensor rank holds all of it
  kRows,     // rows [t*R/T, (t+1)*R/T) (vocabulary-parallel wte, column-parallel c_fc)
  kQkvRows,  // the q, k and v row blocks of this rank's heads (column-parallel c_attn)
  kCols,     // columns [t*K/T, (t+1)*K/T) of every row (row-parallel c_proj)
};

struct ParamTensor {
  std::string name;
  std::vector<int64_t> shape;  // local shape
  size_t offset = 0;  // in floats, into the flat buffer
  size_t numel = 0;
  bool decay = false;  // AdamW weight decay applies (2-D weights only)
  std::vector<int64_t> global_shape;
  size_t global_offset = 0;  // offset of the whole tensor in the unsharded layout
  size_t global_index = 0;   // index of the whole tensor in the unsharded layout
  TensorSplit split = TensorSplit::kWhole;
  bool tied_copy = false;  // the last stage's copy of wte: kept equal to stage 0's, never saved
};

class ParameterLayout {
 public:
  explicit ParameterLayout(const GPT2Shape& shape, const ModelShard& shard = {});

  const GPT2Shape& shape() const { return shape_; }
  const ModelShard& shard() const { return shard_; }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  size_t total() const { return total_; }
  const ParamTensor& find(const std::string& name) const;  // throws RunError if absent
  const ParamTensor* find_if(const std::string& name) const;  // nullptr if absent
  // Parameter count at the real vocabulary (padding rows excluded), as users quote it; of the
  // whole model, whatever the shard.
  int64_t real_parameter_count() const;
  bool sharded() const { return shard_.tensors > 1 || shard_.stages > 1; }

  // Blocks of this stage: [first_layer, first_layer + layers).
  int first_layer() const { return first_layer_; }
  int layers() const { return layers_; }
  bool has_embedding() const { return shard_.stage == 0; }
  bool has_head() const { return shard_.stage == shard_.stages - 1; }
  // Local widths: heads, attention width C/T, MLP width 4C/T, vocabulary rows Vp/T from vocab_begin.
  int local_heads() const { return shape_.n_head / shard_.tensors; }
  int attn_width() const { return shape_.n_embd / shard_.tensors; }
  int mlp_width() const { return 4 * shape_.n_embd / shard_.tensors; }
  int vocab_rows() const { return shape_.padded_vocab / shard_.tensors; }
  int vocab_begin() const { return shard_.tensor_rank * vocab_rows(); }

  // Index into tensors() of local block `local_layer`'s first tensor; kPerBlock tensors follow.
  static constexpr int kPerBlock = 12;
  size_t block_first(int local_layer) const {
    return blocks_begin_ + static_cast<size_t>(local_layer) * kPerBlock;
  }

 private:
  GPT2Shape shape_;
  ModelShard shard_;
  std::vector<ParamTensor> tensors_;
  size_t total_ = 0;
  int first_layer_ = 0, layers_ = 0;
  size_t blocks_begin_ = 0;
};

// Pipeline stages: contiguous runs of blocks, at least one each, chosen to balance compute.
// A block costs one unit; the last stage also runs the LM head and cross-entropy, worth
// `head_cost` blocks. The split minimises the sum of squared stage costs (an additive criterion
// that evens the stages out; with head_cost 0 the sizes differ by at most one). Returns the
// first block of each stage and, last, n_layer.
std::vector<int> balance_stages(int n_layer, double head_cost, int stages);
// The LM head's training compute in units of one block's: C*Vp against 12*C^2 + context*C
// multiply-adds per token (the attention core counted at half for causality).
double head_cost_in_blocks(const GPT2Shape& shape);
// Blocks of stage `stage` of `stages` for this model: [first, first + count).
std::pair<int, int> stage_layers(const GPT2Shape& shape, int stage, int stages);

// Contiguous pieces of a local tensor in its whole tensor: fn(local element offset, global
// element offset, count), offsets relative to the tensors' starts.
void for_each_run(const ParamTensor& t, const ModelShard& shard,
                  const std::function<void(size_t, size_t, size_t)>& fn);

// Copies this shard's parts of the whole tensor `whole` (t.global_shape) into local tensor t of
// the flat buffer `local`.
void slice_tensor(const ParamTensor& t, const ModelShard& shard, const float* whole, float* local);
// Copies this shard's parts of a whole-model buffer (unsharded layout) into `local`.
void slice_from_global(const ParameterLayout& layout, const float* global, float* local);
// Whether this shard is the designated owner of (the elements it holds of) tensor t: its
// tensor-split parts, the replicated tensors on tensor rank 0, never the tied copy of wte.
// Over all shards of one data-parallel replica every element has exactly one owner.
bool owns_tensor(const ParamTensor& t, const ModelShard& shard);
// Ranges of the local buffer this shard owns in the sense above: the global gradient norm is
// the sum over shards of the squares in these ranges.
std::vector<std::pair<size_t, size_t>> owned_ranges(const ParameterLayout& layout);

// GPT-2 initialisation (nanoGPT/llm.c): Linear and embedding weights N(0, std), the residual
// projections (attn.c_proj, mlp.c_proj) N(0, std/sqrt(2*n_layer)), biases 0, layernorm weight 1,
// bias 0, vocabulary padding rows 0. Deterministic in seed, and a shard gets exactly its slice
// of the whole model's values.
void init_gpt2_parameters(float* params, const ParameterLayout& layout, float std, uint64_t seed);

}  // namespace sg
