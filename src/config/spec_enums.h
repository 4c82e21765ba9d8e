#pragma once
// The job spec's words that pick one of a few behaviours (optim.name, train.precision, ...), as
// enums. Each is parsed once, when the spec is read (an unknown word is one located error with a
// "did you mean"), so nothing downstream compares strings; the names below are the only
// spelling of each word, used by the parser, the resolved-spec writer and messages alike.
#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <type_traits>
#include <vector>

#ifndef __CUDACC__  // nvcc cannot compile fmt 9's headers; the CUDA module formats no enums
#include <fmt/format.h>
#endif

namespace sg {

enum class OptimizerKind { AdamW, Sgd, Muon };                        // optim.name
enum class LrDecay { Cosine, Linear, Step, Constant };            // optim.decay
enum class Precision { FP32, BF16, FP16 };                        // train.precision
// What a stage recomputes in its backward instead of keeping from the forward (train.recompute):
// nothing; the attention core (selective: the softmax and its saved log-sum-exp); or each
// block from its input (full: only the blocks' inputs are kept per micro-batch).
enum class Recompute { None, Selective, Full };
enum class PipelineSchedule { GPipe, OneFOneB };                  // parallel.schedule
enum class BackendKind { Cpu, Cuda };                             // devices.backend
enum class DatasetKind { OpenWebText, Wikipedia, Tokens, Synthetic, ImageNet };  // data.dataset

// The spelling of each value, indexed by the enum's value (the order of the enumerators).
template <typename E>
struct SpecEnumNames;
template <>
struct SpecEnumNames<OptimizerKind> {
  static constexpr std::array<std::string_view, 3> names{"adamw", "sgd", "muon"};
};
template <>
struct SpecEnumNames<LrDecay> {
  static constexpr std::array<std::string_view, 4> names{"cosine", "linear", "step", "constant"};
};
template <>
struct SpecEnumNames<Precision> {
  static constexpr std::array<std::string_view, 3> names{"fp32", "bf16", "fp16"};
};
template <>
struct SpecEnumNames<Recompute> {
  static constexpr std::array<std::string_view, 3> names{"none", "selective", "full"};
};
template <>
struct SpecEnumNames<PipelineSchedule> {
  static constexpr std::array<std::string_view, 2> names{"gpipe", "1f1b"};
};
template <>
struct SpecEnumNames<BackendKind> {
  static constexpr std::array<std::string_view, 2> names{"cpu", "cuda"};
};
template <>
struct SpecEnumNames<DatasetKind> {
  static constexpr std::array<std::string_view, 5> names{"openwebtext", "wikipedia", "tokens",
                                                         "synthetic", "imagenet"};
};

template <typename E>
concept SpecEnum = std::is_enum_v<E> && requires { SpecEnumNames<E>::names; };

template <SpecEnum E>
constexpr std::string_view to_string(E value) {
  return SpecEnumNames<E>::names[static_cast<size_t>(value)];
}

// The value spelled `text` exactly (the spec's words are lower case), or nothing.
template <SpecEnum E>
constexpr std::optional<E> parse_spec_enum(std::string_view text) {
  const auto& names = SpecEnumNames<E>::names;
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == text) return static_cast<E>(i);
  return std::nullopt;
}

template <SpecEnum E>
std::vector<std::string_view> spec_enum_names() {
  const auto& names = SpecEnumNames<E>::names;
  return {names.begin(), names.end()};
}

// nlohmann::json writes a spec enum as its word ("bf16"), never as its number: one overload
// per enum, more specialised than the library's enum-as-integer template.
#define SG_SPEC_ENUM_JSON(E)                                 \
  template <typename BasicJson>                              \
  void to_json(BasicJson& json, const E& value) {            \
    json = typename BasicJson::string_t(to_string(value));   \
  }
SG_SPEC_ENUM_JSON(OptimizerKind)
SG_SPEC_ENUM_JSON(LrDecay)
SG_SPEC_ENUM_JSON(Precision)
SG_SPEC_ENUM_JSON(Recompute)
SG_SPEC_ENUM_JSON(PipelineSchedule)
SG_SPEC_ENUM_JSON(BackendKind)
SG_SPEC_ENUM_JSON(DatasetKind)
#undef SG_SPEC_ENUM_JSON

// The datasets of llm.c token shards (data.train / data.val globs).
constexpr bool is_shard_dataset(DatasetKind dataset) {
  return dataset == DatasetKind::OpenWebText || dataset == DatasetKind::Wikipedia ||
         dataset == DatasetKind::Tokens;
}

}  // namespace sg

#ifndef __CUDACC__
// fmt prints a spec enum as its word ("bf16").
template <sg::SpecEnum E>
struct fmt::formatter<E> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(E value, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(sg::to_string(value), ctx);
  }
};
#endif
