// The one place that maps data.dataset to a batch source.
#include <algorithm>

#include "config/job_spec.h"
#include <thread>

#include <fmt/format.h>

#include "data/batch_source.h"
#include "data/synthetic_images.h"
#include "data/token_batch_source.h"
#include "imagenet/imagenet_source.h"
#include "data/token_dataset.h"
#include "util/error.h"

namespace sg {
namespace {

bool has_field(const std::vector<BatchField>& fields, const std::string& name) {
  return std::any_of(fields.begin(), fields.end(), [&](const BatchField& f) { return f.name == name; });
}

Dataset open_tokens(const JobSpec& spec) {
  TokenSplits splits = open_token_dataset(spec);
  const SequenceSampler train_sampler(splits.train->size(), spec.seq_len(), spec.seed);
  // Its own seed stream, so validation windows do not follow the training order.
  const SequenceSampler val_sampler(splits.val->size(), spec.seq_len(), spec.seed ^ 0x5eed0fda7aull);
  Dataset d;
  d.train = std::make_unique<TokenBatchSource>(std::move(splits.train), train_sampler);
  d.val = std::make_unique<TokenBatchSource>(std::move(splits.val), val_sampler);
  d.best_val_loss = splits.best_val_loss;
  d.description = splits.description;
  return d;
}

// Decoding threads: data.workers, or half the cores this process may use (at least one).
int image_workers(const JobSpec& spec) {
  if (spec.data.workers > 0) return spec.data.workers;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, spec.devices.processes) / 2);
}

Dataset open_images(const JobSpec& spec) {
  const ModelData m = spec.model.config().data();
  Dataset d;
  if (spec.data.dataset == DatasetKind::Synthetic) {
    const int64_t n = spec.data.synthetic_images;
    d.train = std::make_unique<SyntheticImages>(m.classes, m.image_size, n, spec.seed, spec.seed);
    d.val = std::make_unique<SyntheticImages>(m.classes, m.image_size, std::max<int64_t>(1, n / 10),
                                              spec.seed, spec.seed ^ 0x76616cull);
    d.description = fmt::format("synthetic images ({} classes, {}x{}, {} per epoch)", m.classes,
                                m.image_size, m.image_size, n);
    return d;
  }
  std::vector<std::string> problems;
  auto index = std::make_shared<const ImageIndex>(open_image_index(spec.data.root, &problems));
  if (!problems.empty()) {
    fmt::print(stderr, "warning: {}: {} problem(s) in the ImageNet tree (first: {}); run "
               "`singularity prepare imagenet` for the full report\n",
               spec.data.root, problems.size(), problems.front());
  }
  if (index->wnids.size() > static_cast<size_t>(m.classes)) {
    throw SpecError(fmt::format("{}: data.root {} has {} classes but model.classes is {}; set "
                                "model.classes: {}",
                                spec.source, spec.data.root, index->wnids.size(), m.classes,
                                index->wnids.size()));
  }
  const int workers = image_workers(spec);
  d.train = std::make_unique<ImageNetSource>(index, Split::Train, m.image_size, spec.seed, workers);
  d.val = std::make_unique<ImageNetSource>(index, Split::Val, m.image_size, spec.seed, workers);
  d.description = fmt::format("imagenet {}: {} train / {} val images, {} classes", spec.data.root,
                              index->train.size(), index->val.size(), index->wnids.size());
  return d;
}

}  // namespace

Dataset open_dataset(const JobSpec& spec, const std::vector<BatchField>& fields) {
  const std::string where = spec.source.empty() ? "job spec" : spec.source;
  if (has_field(fields, "tokens")) return open_tokens(spec);
  if (has_field(fields, "images")) return open_images(spec);
  throw SpecError(where + ": data.dataset " + std::string(to_string(spec.data.dataset)) + " cannot feed model.arch " +
                  spec.model.arch + "; use a dataset of the model's kind");
}

}  // namespace sg
