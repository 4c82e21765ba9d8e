#pragma once
// Where training and validation micro-batches come from (docs/architecture.md, "Data"). A source is
// an endless sequence of samples in which sample i is a pure function of (seed, i) (the epoch and
// the position in it follow from i), so a job gives the same batches on any process count, a
// virtual replica asks for exactly its samples, and a run resumes from one counter.
// Sources fill the model family's batch fields (tensor/micro_batch.h) and know no model.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensor/micro_batch.h"

namespace sg {

struct JobSpec;

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Fills rows [row, row + count) of `batch` with samples [first, first + count).
  virtual void fill_rows(MicroBatch& batch, int row, int count, uint64_t first) = 0;
  // Fills `batch` with samples [first, first + batch.samples()).
  void fill(MicroBatch& batch, uint64_t first) { fill_rows(batch, 0, batch.samples(), first); }
  // The fills that come next, in order (the first sample of each; `count` samples each):
  // a source that decodes (images) starts on them on worker threads while the step computes.
  virtual void prefetch(const std::vector<uint64_t>& firsts, int count) {
    (void)firsts, (void)count;
  }
  // Samples that could not be read (undecodable images), so far.
  virtual int64_t failures() const { return 0; }
};

struct Dataset {
  std::unique_ptr<BatchSource> train, val;
  std::optional<double> best_val_loss;  // the best validation loss any model can reach, if known
  std::string description;              // one line for the log
};

// The dataset data.dataset names, for a model whose batch has `fields` (token ids and targets,
// or images and labels): token shards, ImageNet, or synthetic data of the right kind. SpecError
// when the dataset does not fit the model's batch, RunError for missing or corrupt data.
Dataset open_dataset(const JobSpec& spec, const std::vector<BatchField>& fields);

}  // namespace sg
