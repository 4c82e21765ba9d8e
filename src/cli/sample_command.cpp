#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <span>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "checkpoint/checkpoint.h"
#include "cli/checkpoint_lookup.h"
#include "cli/commands.h"
#include "model/gpt2.h"
#include "model/gpt2_family.h"
#include "tokenizer/gpt2_tokenizer.h"
#include "train/train_checkpoint.h"
#include "config/load_job_spec.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/rng.h"

namespace sg {
namespace {

// Token ids from "1 2 3" or "1,2,3", or nullopt when the prompt is not a list of ids.
std::optional<std::vector<int32_t>> parse_token_ids(const std::string& prompt, int vocab) {
  std::string s = prompt;
  std::replace(s.begin(), s.end(), ',', ' ');
  std::istringstream in(s);
  std::vector<int32_t> ids;
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long id = -1;
    try {
      id = std::stol(word, &used);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (used != word.size()) return std::nullopt;
    if (id < 0 || id >= vocab) {
      throw SpecError(fmt::format("--prompt: token id {} is outside the vocabulary [0, {})", id,
                                  vocab));
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  if (ids.empty()) return std::nullopt;
  return ids;
}

// GPT-2's tokenizer for text prompts of models trained on GPT-2 tokens (vocab 50257).
std::optional<Gpt2Tokenizer> text_tokenizer(const std::string& dir_option, int vocab) {
  std::string dir = dir_option;
  if (dir.empty()) {
    if (const char* env = std::getenv("SINGULARITY_TOKENIZER")) dir = env;
  }
  if (dir.empty() || vocab != 50257) return std::nullopt;
  return Gpt2Tokenizer::load(dir);
}

}  // namespace

int run_sample_command(const std::string& job_path, const std::vector<std::string>& sets,
                       const std::string& checkpoint, const std::string& prompt, int tokens,
                       double temperature, uint64_t seed, const std::string& tokenizer_dir) {
  const CheckpointModel loaded = load_checkpoint_model(job_path, sets, checkpoint);
  const std::string& path = loaded.path;
  const ParameterLayout& layout = *loaded.layout;
  const auto* gpt2 = dynamic_cast<const GPT2Family*>(loaded.family.get());
  if (gpt2 == nullptr) {
    throw SpecError("sample generates text from a GPT-2 checkpoint; " + path + " holds a " +
                    loaded.family->name() + " model (use eval for it)");
  }
  const GPT2Shape& shape = gpt2->shape();
  const std::vector<float>& params = loaded.params;
  const TrainerState& state = loaded.state;

  const std::optional<Gpt2Tokenizer> tokenizer = text_tokenizer(tokenizer_dir, shape.vocab);
  std::vector<int32_t> sequence;
  if (auto ids = parse_token_ids(prompt, shape.vocab)) {
    sequence = *ids;
  } else if (tokenizer) {
    sequence = tokenizer->encode(prompt);
    if (sequence.empty()) throw SpecError("--prompt is empty: give some text or token ids");
  } else {
    throw SpecError(fmt::format(
        "--prompt: '{}' is not a list of token ids; text prompts need GPT-2's tokenizer and a "
        "model with vocab 50257 (pass --tokenizer DIR or set SINGULARITY_TOKENIZER), otherwise "
        "give ids, e.g. --prompt \"1 2 3\"",
        prompt));
  }
  // The model is causal: a window as long as the whole generation is enough.
  const int T = static_cast<int>(
      std::min<size_t>(static_cast<size_t>(shape.context), sequence.size() + tokens));
  GPT2 model(shape, layout, 1, T);
  std::vector<int32_t> window(T, 0);
  Rng rng(seed);
  std::vector<double> probs(shape.vocab);
  const size_t prompt_length = sequence.size();
  for (int i = 0; i < tokens; ++i) {
    // The model is causal, so positions after the last real token do not affect it.
    const size_t start = sequence.size() > static_cast<size_t>(T) ? sequence.size() - T : 0;
    const int length = static_cast<int>(sequence.size() - start);
    std::fill(window.begin(), window.end(), 0);
    std::copy(sequence.begin() + static_cast<long>(start), sequence.end(), window.begin());
    model.forward(params.data(), window.data(), nullptr);
    const float* logits = model.logits() + static_cast<size_t>(length - 1) * shape.padded_vocab;
    int32_t next = 0;
    if (temperature <= 0) {
      next = static_cast<int32_t>(std::max_element(logits, logits + shape.vocab) - logits);
    } else {
      const double top = *std::max_element(logits, logits + shape.vocab);
      double sum = 0;
      for (int t = 0; t < shape.vocab; ++t) sum += probs[t] = std::exp((logits[t] - top) / temperature);
      double u = rng.uniform() * sum;
      next = shape.vocab - 1;
      for (int t = 0; t < shape.vocab; ++t) {
        if ((u -= probs[t]) < 0) {
          next = t;
          break;
        }
      }
    }
    sequence.push_back(next);
  }
  fmt::print("checkpoint {} (step {})\n", path, state.step);
  std::string prompt_text, generated;
  for (size_t i = 0; i < sequence.size(); ++i) {
    (i < prompt_length ? prompt_text : generated) += fmt::format("{} ", sequence[i]);
  }
  fmt::print("prompt:    {}\ngenerated: {}\n", prompt_text, generated);
  if (tokenizer) {
    const std::span<const int32_t> all(sequence);
    fmt::print("text:      {}{}\n", tokenizer->decode(all.first(prompt_length)),
               tokenizer->decode(all.subspan(prompt_length)));
  }
  return 0;
}

}  // namespace sg
