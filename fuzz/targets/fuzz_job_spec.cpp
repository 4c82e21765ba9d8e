// libFuzzer target: the job spec parser (src/config/, docs/faults.md "Fuzzing").
// Input: YAML text, then optionally NUL-separated `--set` overrides ("a.b=value").
// Contract (src/config/load_job_spec.h): every input is accepted or refused with one SpecError
// of one line starting with the file name (or "--set" for an override); an accepted spec
// written back with job_spec_to_yaml parses again to the same YAML text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/load_job_spec.h"
#include "fuzz_files.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = sg::fuzz::as_text(data, size);
  const size_t nul = input.find('\0');
  const std::string yaml(input.substr(0, nul));
  std::vector<std::string> overrides;
  for (size_t at = nul; at != std::string_view::npos && at < input.size();) {
    const size_t next = input.find('\0', at + 1);
    overrides.emplace_back(input.substr(at + 1, next == std::string_view::npos ? next : next - at - 1));
    at = next;
  }

  std::string written;
  try {
    written = sg::job_spec_to_yaml(sg::parse_job_spec(yaml, "fuzz.yaml", overrides));
  } catch (const sg::SpecError& e) {
    const std::string message = e.what();
    sg::fuzz::note("refused: " + message);
    if (message.find('\n') != std::string::npos)
      sg::fuzz::contract_broken("SpecError of more than one line: " + message);
    if (message.rfind("fuzz.yaml", 0) != 0 && message.rfind("--set", 0) != 0)
      sg::fuzz::contract_broken("SpecError not located in the file or an override: " + message);
    return 0;
  }
  sg::fuzz::note("accepted");
  // Accepted: the resolved spec reads back to itself.
  std::string again;
  try {
    again = sg::job_spec_to_yaml(sg::parse_job_spec(written, "written.yaml", {}));
  } catch (const sg::SpecError& e) {
    sg::fuzz::contract_broken(std::string("job_spec_to_yaml wrote a spec that is refused: ") +
                              e.what() + "\n--- written:\n" + written);
  }
  if (again != written)
    sg::fuzz::contract_broken("job_spec_to_yaml round trip differs:\n--- first:\n" + written +
                              "\n--- second:\n" + again);
  return 0;
}
