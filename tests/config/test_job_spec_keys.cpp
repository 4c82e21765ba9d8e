// The key table and the "did you mean" suggestions.
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/model_config.h"
#include "spec_test_util.h"

using namespace sg;

TEST_CASE("edit distance counts insertions, deletions, substitutions and transpositions") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("lr", "lr") == 0);
  CHECK(edit_distance("lrr", "lr") == 1);
  CHECK(edit_distance("stpes", "steps") == 1);  // one transposition
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("", "abc") == 3);
}

TEST_CASE("suggestions are close keys of the same section, or sections") {
  CHECK(suggest_job_spec_key("optim.lrr") == "optim.lr");
  CHECK(suggest_job_spec_key("optim.warmup") == std::nullopt);  // 6 edits from warmup_steps
  CHECK(suggest_job_spec_key("optim.warmup_step") == "optim.warmup_steps");
  CHECK(suggest_job_spec_key("modle") == "model");
  CHECK(suggest_job_spec_key("modle.n_head") == "model.n_head");
  CHECK(suggest_job_spec_key("sed") == "seed");
  CHECK(suggest_job_spec_key("train.lr") == "optim.lr");
  CHECK(suggest_job_spec_key("lr") == "optim.lr");
  CHECK(suggest_job_spec_key("xy") == std::nullopt);
  CHECK(suggest_job_spec_key("tptim") == std::nullopt);  // a different first letter is no typo
  CHECK(suggest_job_spec_key("OPTIM") == "optim");
  CHECK(nearest_word("tpu", {"cpu", "cuda"}) == std::nullopt);
  CHECK(nearest_word("cosin", {"cosine", "linear", "constant"}) == "cosine");
  CHECK(suggest_job_spec_key("parallel.xyz") == std::nullopt);
  CHECK(did_you_mean("eval.stepz") == "; did you mean 'eval.steps'?");
  CHECK(did_you_mean("optim.qqqq") == "");
}

TEST_CASE("each family's key table has unique paths and every section of the job spec") {
  std::set<std::string_view> sections;
  for (const ModelFamilyEntry& family : model_family_entries()) {
    std::set<std::string_view> paths;
    for (const JobSpecKey& key : job_spec_keys(family.arch)) {
      CHECK_MESSAGE(paths.insert(key.path).second, family.arch, " ", key.path);
      if (!key.section().empty()) sections.insert(key.section());
    }
    CHECK(paths.count("name") == 1);
    CHECK(paths.count("seed") == 1);
    CHECK(paths.count("model.arch") == 1);
  }
  CHECK(sections == std::set<std::string_view>{"model", "data", "optim", "train", "eval",
                                                "parallel", "devices", "checkpoint", "log"});
  // The whole table: a path shared by two families appears once for each, the first found.
  std::set<std::string_view> all;
  for (const JobSpecKey& key : job_spec_keys()) {
    const JobSpecKey* found = find_job_spec_key(key.path);
    REQUIRE(found != nullptr);
    CHECK(found->path == key.path);
    if (all.insert(key.path).second) CHECK(found == &key);
  }
  CHECK(find_job_spec_key("optim.lrr") == nullptr);
  CHECK(is_job_spec_section("optim"));
  CHECK_FALSE(is_job_spec_section("lr"));
}

TEST_CASE("each key's accessor reaches its own field") {
  // Setting a key through the table changes exactly that key and no other.
  for (const JobSpecKey& key : job_spec_keys()) {
    JobSpec base;
    JobSpec changed;
    std::visit(
        [&](auto accessor) {
          auto& field = accessor(changed);
          using Field = std::remove_cvref_t<decltype(field)>;
          if constexpr (std::is_same_v<Field, bool>)
            field = !field;
          else if constexpr (std::is_same_v<Field, std::string>)
            field += "x";
          else if constexpr (SpecEnum<Field>)
            field = static_cast<Field>((static_cast<size_t>(field) + 1) %
                                       SpecEnumNames<Field>::names.size());
          else if constexpr (std::is_arithmetic_v<Field>)
            field = field + 1;
          else
            field[1] = field[1] + 1;
        },
        key.field);
    CHECK(sg::test::differing_keys(base, changed) == std::vector<std::string>{std::string(key.path)});
  }
}

TEST_CASE("a spec enum has one spelling: parsed, written, formatted and in JSON alike") {
  CHECK(parse_spec_enum<Precision>("bf16") == Precision::BF16);
  CHECK(parse_spec_enum<Precision>("BF16") == std::nullopt);  // the spec's words are lower case
  CHECK(parse_spec_enum<PipelineSchedule>("1f1b") == PipelineSchedule::OneFOneB);
  CHECK(to_string(DatasetKind::ImageNet) == "imagenet");
  CHECK(fmt::format("{}", LrDecay::Step) == "step");
  CHECK(nlohmann::json(BackendKind::Cuda) == "cuda");  // never the enum's number
  CHECK(nlohmann::json{{"optimizer", OptimizerKind::Sgd}}.dump() == R"({"optimizer":"sgd"})");
  for (std::string_view name : spec_enum_names<Recompute>())
    CHECK(to_string(parse_spec_enum<Recompute>(name).value()) == name);
}
