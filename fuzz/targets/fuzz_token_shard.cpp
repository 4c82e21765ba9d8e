// libFuzzer target: the llm.c token shard reader (src/data/token_shard.cpp, docs/faults.md
// "Fuzzing"). Input: a whole shard file (1024-byte header, uint16 tokens).
// Contract (src/data/token_shard.h): the shard is read, its size matching the file exactly, or
// refused with a RunError naming the file.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/token_shard.h"
#include "fuzz_files.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = sg::fuzz::write_scratch_file("shard.bin", sg::fuzz::as_text(data, size));
  try {
    const sg::TokenShard shard(path);
    if (shard.size() < 0 ||
        static_cast<uint64_t>(shard.size()) * 2 + sg::kTokenShardHeaderBytes != size)
      sg::fuzz::contract_broken("shard of " + std::to_string(shard.size()) +
                                " tokens accepted from a file of " + std::to_string(size) +
                                " bytes");
    uint64_t sum = 0;  // every token is readable
    for (int64_t i = 0; i < shard.size(); ++i) sum += shard.tokens()[i];
    sg::fuzz::note("accepted: " + std::to_string(shard.size()) + " tokens, sum " +
                   std::to_string(sum));
  } catch (const sg::RunError& e) {
    sg::fuzz::note(std::string("refused: ") + e.what());
    if (std::string(e.what()).find("shard.bin") == std::string::npos)
      sg::fuzz::contract_broken(std::string("RunError not naming the file: ") + e.what());
  }
  return 0;
}
