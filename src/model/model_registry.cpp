// The one place that maps model.arch to a model family (torchtitan's train-spec registry):
// everything else works through ModelFamily.
#include "config/job_spec.h"
#include "backend/backend.h"
#include "model/gpt2_family.h"
#include "model/model_family.h"
#include "model/resnet_family.h"
#include "util/error.h"

namespace sg {

Recompute parse_recompute(const std::string& text) {
  if (text == "none") return Recompute::None;
  if (text == "selective") return Recompute::Selective;
  if (text == "full") return Recompute::Full;
  throw SpecError("train.recompute must be none, selective or full, not '" + text + "'");
}

namespace {

std::unique_ptr<ModelFamily> make_family(const JobSpec& spec) {
  const ModelSpec& m = spec.model;
  if (m.arch == "gpt2") {
    const GPT2Shape shape{m.n_layer, m.n_head, m.n_embd, m.context, m.vocab, spec.padded_vocab()};
    return std::make_unique<GPT2Family>(shape, spec.seq_len(), m.init_std);
  }
  if (m.arch == "resnet") {
    ResNetShape shape;
    shape.depth = m.depth;
    shape.width = m.width;
    shape.classes = m.classes;
    shape.image_size = m.image_size;
    shape.zero_init_residual = m.zero_init_residual;
    shape.sync_bn = m.sync_bn;
    shape.label_smoothing = static_cast<float>(m.label_smoothing);
    return std::make_unique<ResNetFamily>(shape);
  }
  throw SpecError(spec.source + ": model.arch '" + m.arch + "' is not a model this build knows; "
                  "use gpt2 or resnet");
}

}  // namespace

std::unique_ptr<ModelFamily> make_model_family(const JobSpec& spec) {
  auto family = make_family(spec);
  family->set_activation_policy({spec.devices.backend, parse_recompute(spec.train.recompute),
                                 activation_dtype_for(spec.devices.backend, spec.train.precision)});
  return family;
}

nlohmann::json current_shape_record(nlohmann::json record) {
  if (record.is_object() && !record.contains("family")) record["family"] = "gpt2";
  return record;
}

}  // namespace sg
