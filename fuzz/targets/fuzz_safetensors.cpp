// libFuzzer target: the safetensors reader (src/checkpoint/safetensors.cpp, docs/faults.md
// "Fuzzing"). Input: a whole .safetensors file (u64 header length, JSON header, data).
// Contract (src/checkpoint/safetensors.h): the file is read or refused with a RunError naming
// it; every tensor handed out lies inside the file and can be copied out.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "fuzz_files.h"
#include "tensor/tensor.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      sg::fuzz::write_scratch_file("t.safetensors", sg::fuzz::as_text(data, size));
  try {
    const sg::SafetensorsFile file(path);
    std::vector<uint8_t> out;
    for (const std::string& name : file.names()) {
      const sg::TensorRef& t = file.get(name);
      const int64_t count = sg::element_count(t.shape);
      const int64_t bytes = count * static_cast<int64_t>(sg::dtype_size(t.dtype));
      if (count < 0 || bytes < 0 || bytes > static_cast<int64_t>(size))
        sg::fuzz::contract_broken("tensor " + name + " of " + std::to_string(bytes) +
                                  " bytes handed out from a file of " + std::to_string(size));
      // One element more than needed: an empty tensor still gets a buffer, as callers pass one
      // (memcpy of 0 bytes to an empty vector's null data() is undefined, and UBSan says so).
      out.resize(static_cast<size_t>(bytes) + 1);
      file.read_exact(out.data(), name, t.dtype, t.shape);  // touches every byte of it
      if (sg::is_float_dtype(t.dtype)) {
        std::vector<float> floats(static_cast<size_t>(count) + 1);
        file.read_f32(floats.data(), name, t.shape);
      }
    }
    sg::fuzz::note("accepted: " + std::to_string(file.names().size()) + " tensors");
  } catch (const sg::RunError& e) {
    sg::fuzz::note(std::string("refused: ") + e.what());
    if (std::string(e.what()).find("t.safetensors") == std::string::npos)
      sg::fuzz::contract_broken(std::string("RunError not naming the file: ") + e.what());
  }
  return 0;
}
