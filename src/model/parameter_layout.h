#pragma once
// A model's tensors as named ranges of flat buffers
// (docs/architecture.md, "Tensors, models and optimizers"): bucketing, ZeRO sharding and
// checkpointing all work on ranges of a flat buffer. The model family describes the whole model
// as a plain value (ModelDescription: each tensor's global name, shape, tensor-parallel split,
// weight decay, trained parameter or buffer, and pipeline block); this class lays out one
// process's shard of it. Nothing here names a model.
//
// Trained parameters live in one flat buffer (the optimizer's, the gradients'); buffers such as
// batch-norm running statistics in a second one of their own (checkpointed, never optimised).
// Tensors are ordered: those before the blocks (held by the first pipeline stage), the blocks in
// order (a stage holds a contiguous run), those after (the last stage).
//
// A shard (tensor rank t of T, pipeline stage s of S; docs/design-notes.md "Tensor and pipeline
// parallelism"):
//   - stage s holds the blocks balance_stages gives it; stage 0 also the tensors before the
//     blocks, the last stage those after and, when S > 1, a copy of every first-stage tensor
//     marked tied_to_last (a tied LM head), placed last (`tied_copy`);
//   - split tensors keep this rank's part (TensorSplit); everything else is replicated.
// Tensors keep their global names; `runs` map a local tensor onto the global tensor, so
// checkpoints always hold whole tensors and any mesh can load any checkpoint.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace sg {

// Which part of the model one process holds.
struct ModelShard {
  int tensor_rank = 0, tensors = 1;  // t of T
  int stage = 0, stages = 1;         // s of S
};

enum class TensorSplit : uint8_t {
  kWhole,    // replicated: every tensor rank holds all of it
  kRows,     // rows [t*R/T, (t+1)*R/T) (vocabulary-parallel embedding, column-parallel linear)
  kQkvRows,  // the q, k and v row blocks of this rank's heads (column-parallel fused qkv)
  kCols,     // columns [t*K/T, (t+1)*K/T) of every row (row-parallel linear)
};

// One tensor of the whole model, as its family declares it.
struct TensorSpec {
  std::string name;            // global name, as checkpoints store it
  std::vector<int64_t> shape;  // whole shape
  TensorSplit split = TensorSplit::kWhole;
  bool decay = false;          // weight decay applies
  bool trainable = true;       // false: a buffer (running statistics), not optimised
  int block = -1;              // -1: before the blocks; >= blocks: after them; else its block
  bool tied_to_last = false;   // a first-stage tensor the last stage uses too (a tied head)
};

// The whole model: what a family hands the layout, `plan` and checkpoints.
struct ModelDescription {
  std::vector<TensorSpec> tensors;  // in flat-buffer order (see above)
  int blocks = 0;                   // pipeline units
  std::vector<double> block_costs;  // compute of each block (relative); empty: 1 each
  double first_cost = 0;            // extra compute on the first stage (stem, embedding)
  double last_cost = 0;             // extra compute on the last stage (head, loss)
};

struct ParamTensor {
  std::string name;
  std::vector<int64_t> shape;  // local shape
  size_t offset = 0;           // in elements, into its flat buffer
  size_t numel = 0;
  bool decay = false;
  int block = -1;
  std::vector<int64_t> global_shape;
  size_t global_offset = 0;  // offset of the whole tensor in the unsharded layout's buffer
  size_t global_index = 0;   // index of the whole tensor in ModelDescription::tensors
  TensorSplit split = TensorSplit::kWhole;
  bool tied_copy = false;  // the last stage's copy of a tied tensor: kept equal, never saved
};

class ParameterLayout {
 public:
  explicit ParameterLayout(ModelDescription model, const ModelShard& shard = {});

  const ModelDescription& model() const { return model_; }
  const ModelShard& shard() const { return shard_; }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }  // trained parameters
  const std::vector<ParamTensor>& buffers() const { return buffers_; }  // their own flat buffer
  size_t total() const { return total_; }
  size_t buffer_total() const { return buffer_total_; }
  // Trained parameters first, then buffers. find throws RunError if absent, find_if is null.
  const ParamTensor& find(const std::string& name) const;
  const ParamTensor* find_if(const std::string& name) const;
  bool sharded() const { return shard_.tensors > 1 || shard_.stages > 1; }

  // Blocks of this stage: [first_block, first_block + blocks).
  int first_block() const { return first_block_; }
  int blocks() const { return blocks_; }
  bool first_stage() const { return shard_.stage == 0; }
  bool last_stage() const { return shard_.stage == shard_.stages - 1; }
  // Local block `b`'s trained tensors: indices [first, first + count) of tensors().
  std::pair<size_t, size_t> block_tensors(int local_block) const {
    return block_ranges_[static_cast<size_t>(local_block)];
  }
  // Indices into tensors() of the tensors before the blocks and after them (with tied copies).
  std::pair<size_t, size_t> first_tensors() const { return first_range_; }
  std::pair<size_t, size_t> last_tensors() const { return last_range_; }

 private:
  ModelDescription model_;
  ModelShard shard_;
  std::vector<ParamTensor> tensors_, buffers_;
  size_t total_ = 0, buffer_total_ = 0;
  int first_block_ = 0, blocks_ = 0;
  std::vector<std::pair<size_t, size_t>> block_ranges_;
  std::pair<size_t, size_t> first_range_{0, 0}, last_range_{0, 0};
};

// Pipeline stages: contiguous runs of blocks, at least one each, chosen to balance compute.
// Block b costs costs[b]; the first stage also carries first_cost, the last last_cost. The split
// minimises the sum of squared stage costs (an additive criterion that evens the stages out;
// with equal blocks and no extras the sizes differ by at most one). Returns the first block of
// each stage and, last, the number of blocks.
std::vector<int> balance_stages(const std::vector<double>& costs, double first_cost,
                                double last_cost, int stages);
// Equal blocks with the head's cost on the last stage.
std::vector<int> balance_stages(int blocks, double head_cost, int stages);
// Blocks of stage `stage` of `stages`: [first, first + count).
std::pair<int, int> stage_blocks(const ModelDescription& model, int stage, int stages);

// Contiguous pieces of a local tensor in its whole tensor: fn(local element offset, global
// element offset, count), offsets relative to the tensors' starts.
void for_each_run(const ParamTensor& t, const ModelShard& shard,
                  const std::function<void(size_t, size_t, size_t)>& fn);

// Copies this shard's parts of the whole tensor `whole` (t.global_shape) into local tensor t of
// the flat buffer `local`.
void slice_tensor(const ParamTensor& t, const ModelShard& shard, const float* whole, float* local);
// Copies this shard's parts of a whole-model parameter buffer (unsharded layout) into `local`.
void slice_from_global(const ParameterLayout& layout, const float* global, float* local);
// Whether this shard is the designated owner of (the elements it holds of) tensor t: its
// tensor-split parts, the replicated tensors on tensor rank 0, never a tied copy.
// Over all shards of one data-parallel replica every element has exactly one owner.
bool owns_tensor(const ParamTensor& t, const ModelShard& shard);
// Ranges of the local parameter buffer this shard owns in the sense above: the global gradient
// norm is the sum over shards of the squares in these ranges.
std::vector<std::pair<size_t, size_t>> owned_ranges(const ParameterLayout& layout);

// Initialisation helper shared by the families: calls fn(spec, whole, n, stream) for each local
// tensor (parameters and buffers) with a buffer `whole` of the whole tensor's n elements to fill,
// then slices it into place. `stream` is the i-th SplitMix64 output of the seed for whole tensor
// i, so adding a tensor never shifts another's values and every shard gets exactly its slice of
// the one-process values.
void initialize_tensors(
    float* params, float* buffers, const ParameterLayout& layout, uint64_t seed,
    const std::function<void(const TensorSpec&, float* whole, size_t n, uint64_t stream)>& fn);

}  // namespace sg
