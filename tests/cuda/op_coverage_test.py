"""Every Backend op has its GPU test and every kernel of ours behind it an emulated one.

One list, tests/cuda/backend_ops.txt, names each op of src/backend/backend.h, how the GPU tests
reach it and which of our kernels (sg::cuda::...) run it. This fails when an op of backend.h is
missing from the list (or the list names one that is gone), when an op marked `test` or
`composite` is neither in the backend-op table (tests/backend/backend_op_cases.cpp, which the GPU
test runs on the CUDA backend) nor called by a hand-written GPU test, when an op marked `composite` is overridden by the CUDA
backend after all (then it needs its own kernels listed), or when a listed kernel has no call in
the emulated tests. Runs on any machine (no GPU, no CUDA needed): it reads sources.

    op_coverage_test.py SOURCE_ROOT
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
backend_h = (root / "src/backend/backend.h").read_text()
cuda_h = (root / "kernels/cuda/cuda_backend.h").read_text()
gpu_tests = "".join((root / "tests/cuda" / f).read_text()
                    for f in ("cuda_backend_test.cpp", "cuda_real_sizes_test.cpp"))
emulated = (root / "tests/cuda/emulated_kernels_test.cpp").read_text()
# The backend-op table (tests/backend/backend_op_cases.cpp), which the GPU test runs on the CUDA
# backend: its entries {"op", tolerance, function}.
table = set(re.findall(r'\{"(\w+)",\s*[-0-9.e]+,\s*\w+\}',
                       (root / "tests/backend/backend_op_cases.cpp").read_text()))

# The interface's ops: every `virtual ... name(` of backend.h except the destructor.
ops = set(re.findall(r"virtual\s[^;{(]*?\b(\w+)\s*\(", backend_h)) - {"Backend"}
listed = {}
for number, line in enumerate((root / "tests/cuda/backend_ops.txt").read_text().splitlines(), 1):
    if not line.strip() or line.lstrip().startswith("#"):
        continue
    fields = [f.strip() for f in line.split("|")]
    if len(fields) != 3 or fields[1] not in ("test", "composite", "harness"):
        sys.exit(f"backend_ops.txt:{number}: want 'op | test|composite|harness | kernels': {line}")
    listed[fields[0]] = (fields[1], fields[2])

failures = []
for op in sorted(ops - listed.keys()):
    failures.append(f"{op}: an op of backend.h missing from tests/cuda/backend_ops.txt")
for op in sorted(table - ops):
    failures.append(f"{op}: in the backend-op table but not an op of backend.h")
for op in sorted(listed.keys() - ops):
    failures.append(f"{op}: listed in backend_ops.txt but not an op of backend.h")
overridden = set(re.findall(r"\b(\w+)\s*\([^;]*?\)\s*(?:const\s*)?override", cuda_h, re.S))
for op, (gpu, kernels) in sorted(listed.items()):
    if gpu in ("test", "composite") and op not in table and not re.search(rf"gpu\(\)\.{op}\(", gpu_tests):
        failures.append(f"{op}: neither in the backend-op table (tests/backend/backend_op_cases.cpp) "
                        "nor called by a GPU test (cuda_backend_test.cpp, cuda_real_sizes_test.cpp)")
    if gpu == "composite" and op in overridden:
        failures.append(f"{op}: marked composite, but the CUDA backend overrides it: list its kernels")
    if kernels in ("none", "library"):
        continue
    for kernel in kernels.split(","):
        if not re.search(rf"sg::cuda::{kernel}\s*[(<]", emulated):
            failures.append(f"{op}: its kernel {kernel} has no emulated test (emulated_kernels_test.cpp)")

for f in failures:
    print("FAIL:", f)
tested = sum(1 for gpu, _ in listed.values() if gpu != "harness")
print(f"{len(ops)} ops: {tested} called by the GPU tests ({len(table & ops)} through the backend-op "
      f"table, on every backend), "
      f"{len({k for _, ks in listed.values() for k in ks.split(',') if ks not in ('none', 'library')})} "
      f"kernels with emulated tests; {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
