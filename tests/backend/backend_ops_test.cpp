// The table of backend-op cases (backend_op_cases.h) on the guarded backend: the CPU backend's
// kernels behind memory the host cannot touch outside the backend's own calls. Every op must give
// the CPU backend's bits there, and a kernel that reads or writes past its tensors or touches
// "device" memory from the host dies with SIGSEGV. (On a GPU the same table runs on the CUDA
// backend: tests/cuda/cuda_backend_test.cpp.)
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "tests/backend/backend_op_cases.h"
#include "tests/guarded_backend.h"

TEST_CASE("every backend op of the table: the guarded backend gives the CPU backend's bits") {
  sg::test::GuardedBackend guarded(sg::cpu_backend());
  std::set<std::string> seen;
  for (const sg::test::BackendOpCase& c : sg::test::backend_op_cases()) {
    INFO("op " << c.op);
    CHECK_MESSAGE(seen.insert(c.op).second, "two cases for one op");
    sg::test::OpRun run(guarded, /*exact=*/true, 0x5eed + seen.size());
    c.run(run);
  }
  CHECK(seen.size() >= 60);
}
