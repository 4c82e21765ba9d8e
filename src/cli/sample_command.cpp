#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <span>
#include <sstream>

#include <fmt/format.h>

#include "cli/checkpoint_lookup.h"
#include "cli/commands.h"
#include "model/model_family.h"
#include "model/text_decoder.h"
#include "tokenizer/gpt2_tokenizer.h"
#include "train/train_checkpoint.h"
#include "util/error.h"
#include "util/rng.h"

namespace sg {
namespace {

// Token ids from "1 2 3" or "1,2,3", or nullopt when the prompt is not a list of ids. `where`
// names the prompt in errors (--prompt, or --prompts FILE:LINE).
std::optional<std::vector<int32_t>> parse_token_ids(const std::string& prompt, int vocab,
                                                    const std::string& where) {
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
      throw SpecError(fmt::format("{}: token id {} is outside the vocabulary [0, {}); give ids "
                                  "the model knows",
                                  where, id, vocab));
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

// Every option's value, before the checkpoint is read: a mistake costs no loading time.
void check_sample_arguments(const SampleArguments& args) {
  if (args.prompt.empty() == args.prompts_file.empty()) {
    throw SpecError(args.prompt.empty()
                        ? "sample needs a prompt: give --prompt TEXT (or ids \"1 2 3\") or "
                          "--prompts FILE (one prompt per line)"
                        : "give either --prompt or --prompts FILE, not both");
  }
  if (args.tokens < 1 || args.tokens > 100000) {
    throw SpecError(fmt::format("--tokens {} is outside [1, 100000]; give how many tokens to "
                                "generate per prompt",
                                args.tokens));
  }
  if (!std::isfinite(args.temperature) || args.temperature < 0 || args.temperature > 100) {
    throw SpecError(fmt::format("--temperature {} is outside [0, 100]; use 0 for greedy "
                                "decoding, 1 for the model's own distribution",
                                args.temperature));
  }
  if (args.top_k < 0) {
    throw SpecError(fmt::format("--top-k {} is negative; give the number of most likely tokens "
                                "to sample from, or 0 to turn it off",
                                args.top_k));
  }
  if (!std::isfinite(args.top_p) || args.top_p <= 0 || args.top_p > 1) {
    throw SpecError(fmt::format("--top-p {} is outside (0, 1]; give a probability such as 0.9, "
                                "or 1 to turn nucleus sampling off",
                                args.top_p));
  }
}

struct Prompt {
  std::string text, where;
};

// --prompt, or the non-blank lines of --prompts FILE.
std::vector<Prompt> read_prompts(const SampleArguments& args) {
  if (!args.prompt.empty()) return {{args.prompt, "--prompt"}};
  std::ifstream in(args.prompts_file);
  if (!in) {
    throw SpecError("--prompts " + args.prompts_file +
                    ": cannot be read; give a text file with one prompt per line");
  }
  std::vector<Prompt> prompts;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF files
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    prompts.push_back({line, fmt::format("--prompts {}:{}", args.prompts_file, number)});
  }
  if (prompts.empty()) {
    throw SpecError("--prompts " + args.prompts_file +
                    " holds no prompt; write one prompt (text or token ids) per line");
  }
  return prompts;
}

std::vector<int32_t> encode_prompt(const Prompt& prompt, int vocab,
                                   const std::optional<Gpt2Tokenizer>& tokenizer) {
  if (auto ids = parse_token_ids(prompt.text, vocab, prompt.where)) return *ids;
  if (tokenizer) {
    std::vector<int32_t> ids = tokenizer->encode(prompt.text);
    if (ids.empty()) throw SpecError(prompt.where + " is empty: give some text or token ids");
    return ids;
  }
  throw SpecError(fmt::format(
      "{}: '{}' is not a list of token ids; text prompts need GPT-2's tokenizer and a "
      "model with vocab 50257 (pass --tokenizer DIR or set SINGULARITY_TOKENIZER), otherwise "
      "give ids, e.g. --prompt \"1 2 3\"",
      prompt.where, prompt.text));
}

}  // namespace

int run_sample_command(const std::string& job_path, const std::vector<std::string>& sets,
                       const SampleArguments& args) {
  check_sample_arguments(args);
  const std::vector<Prompt> prompts = read_prompts(args);
  const CheckpointModel loaded = load_checkpoint_model(job_path, sets, args.checkpoint);
  const std::string& path = loaded.path;
  std::unique_ptr<TextDecoder> decoder =
      loaded.family->make_decoder(*loaded.layout, loaded.params.data());
  if (!decoder) {
    throw SpecError("sample generates text from a language model's checkpoint; " + path + " holds a " +
                    loaded.family->name() + " model (use eval for it)");
  }
  const int vocab = decoder->vocab();
  const int context = decoder->context();
  const std::optional<Gpt2Tokenizer> tokenizer = text_tokenizer(args.tokenizer_dir, vocab);
  // Every prompt is encoded first, so that a bad line fails before any generation.
  std::vector<std::vector<int32_t>> encoded;
  for (const Prompt& prompt : prompts) encoded.push_back(encode_prompt(prompt, vocab, tokenizer));

  const SamplingOptions options{args.temperature, args.top_k, args.top_p};
  fmt::print("checkpoint {} (step {})\n", path, loaded.state.step);
  double seconds = 0;
  for (size_t p = 0; p < encoded.size(); ++p) {
    std::vector<int32_t> sequence = encoded[p];
    const size_t prompt_length = sequence.size();
    if (prompt_length > static_cast<size_t>(context)) {
      fmt::print(stderr,
                 "note: {} has {} tokens, more than model.context {}; the model sees its last "
                 "{}\n",
                 prompts[p].where, prompt_length, context, std::max(1, context / 2));
    }
    // Each prompt its own stream, so that its output does not depend on the prompts before it.
    Rng rng(args.seed + p);
    const GenerationTimes times =
        generate_tokens(*decoder, sequence, args.tokens, options, rng);
    seconds += times.total_seconds;
    if (p > 0) fmt::print("\n");
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
    // Tokens per second over the whole generation, the prompt's pass included (as a user waits).
    fmt::print("speed:     {} tokens in {:.3f} s, {:.1f} tokens/s (prompt of {} tokens: {:.1f} ms)\n",
               args.tokens, times.total_seconds, args.tokens / times.total_seconds,
               prompt_length, 1e3 * times.prefill_seconds);
  }
  if (encoded.size() > 1) {
    const double total = static_cast<double>(args.tokens) * static_cast<double>(encoded.size());
    fmt::print("\ntotal:     {} prompts, {} tokens in {:.3f} s, {:.1f} tokens/s\n", encoded.size(),
               total, seconds, total / seconds);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace sg
